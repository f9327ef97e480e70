"""Streamlit glue for the app: session state, controls and result display.

Only the app imports this package; the engine (`shrinkray/`) never imports Streamlit.
"""
