"""Shrink Ray Studio: the Streamlit entry point (navigation, the sidebar, and the run named in the address)."""

import streamlit as st

from app_ui.controls import sidebar_model_badge
from app_ui.runs import keep_method_settings, keep_visitor, open_run_from_address, show_run_problem
from shrinkray.memory import mmap_large_allocations

mmap_large_allocations()  # uploads' large buffers go back to the system when freed (once per server process)

# An emoji icon is drawn inline; a :material/...: page icon makes the browser fetch it from fonts.gstatic.com.
st.set_page_config(page_title="Shrink Ray Studio", page_icon="🗜️", layout="wide")

pages = [
    st.Page("app_pages/model.py", title="Model", icon=":material/upload_file:", default=True),
    st.Page("app_pages/shrink.py", title="Shrink", icon=":material/compress:"),
    st.Page("app_pages/compare.py", title="Compare", icon=":material/bar_chart:"),
    st.Page("app_pages/pricing.py", title="Pricing", icon=":material/payments:"),
    st.Page("app_pages/runs.py", title="Past runs", icon=":material/history:"),
]
navigation = st.navigation(pages)
keep_visitor()  # who this visitor is (a signed cookie; runs are taken in turn per visitor, and capped)
keep_method_settings()  # the Shrink page's method options survive a visit to another page
open_run_from_address()  # ?run=<id>: that run's model and results, after a reload or from a shared link
sidebar_model_badge()
show_run_problem()  # a bad or expired run link: one message above the page
navigation.run()
