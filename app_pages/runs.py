"""Past runs page: this browser's runs (model, when, how it ended, its headline), each reopened by its link or
removed; the list follows the visitor's signed cookie, so another browser sees its own."""

import datetime

import streamlit as st

from app_ui.controls import friendly_errors
from app_ui.runs import past_runs, remove_past_run
from shrinkray.text_safety import streamlit_markdown as md

st.title("Past runs")
st.write("The runs started in this browser, newest first. Open one to see its results again (its link can be "
         "shared), or remove it. Runs are kept for a limited time on this server.")  # fmt: skip

STATUS = {"done": "Finished", "queued": "Waiting", "running": "Running", "failed": "Failed",
          "cancelled": "Cancelled"}  # fmt: skip

with friendly_errors("Reading your runs"):
    runs = past_runs()
    if not runs:
        st.info("No runs from this browser yet: load a model and press **Shrink and measure**.", icon=":material/info:")
        st.page_link("app_pages/model.py", label="Go to Model", icon=":material/upload_file:")
        st.stop()
    for run in runs:
        with st.container(border=True):
            when = datetime.datetime.fromtimestamp(run.created, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
            st.markdown(f"**{md(run.model_name)}** · {when} · {STATUS.get(run.status, run.status)}"
                        + (f" · {run.browser_runs} in-browser run{'s' if run.browser_runs != 1 else ''}"
                           if run.browser_runs else ""))  # fmt: skip
            if run.headline:
                st.caption(md(run.headline))
            row = st.container(horizontal=True)
            row.link_button("Open", f"./shrink?run={run.id}", icon=":material/open_in_new:")  # its results
            if row.button("Remove", key=f"remove-{run.id}", icon=":material/delete:",
                          help="Removes the run and its files from this server; its link then says so."):  # fmt: skip
                remove_past_run(run.id)
                st.rerun()
