"""Shrink Ray Studio: the Streamlit entry point (navigation and the sidebar)."""

import streamlit as st

from app_ui.controls import sidebar_model_badge

st.set_page_config(page_title="Shrink Ray Studio", page_icon=":material/compress:", layout="wide")

pages = [
    st.Page("pages/model.py", title="Model", icon=":material/upload_file:", default=True),
    st.Page("pages/shrink.py", title="Shrink", icon=":material/compress:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/bar_chart:"),
]
navigation = st.navigation(pages)
sidebar_model_badge()
navigation.run()
