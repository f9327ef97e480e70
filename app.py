"""Shrink Ray Studio: the Streamlit entry point (navigation and the sidebar)."""

import streamlit as st

from app_ui.controls import sidebar_model_badge

# An emoji icon is drawn inline; a :material/...: page icon makes the browser fetch it from fonts.gstatic.com.
st.set_page_config(page_title="Shrink Ray Studio", page_icon="🗜️", layout="wide")

pages = [
    st.Page("app_pages/model.py", title="Model", icon=":material/upload_file:", default=True),
    st.Page("app_pages/shrink.py", title="Shrink", icon=":material/compress:"),
    st.Page("app_pages/compare.py", title="Compare", icon=":material/bar_chart:"),
    st.Page("app_pages/pricing.py", title="Pricing", icon=":material/payments:"),
]
navigation = st.navigation(pages)
sidebar_model_badge()
navigation.run()
