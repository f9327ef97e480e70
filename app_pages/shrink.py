"""Shrink page: choose methods and options, run them, and see what each one costs and saves."""

import dataclasses

import streamlit as st

from app_ui.controls import friendly_errors, method_controls
from app_ui.results import show_results
from app_ui.runs import follow_run, latest_comparison, start_run
from app_ui.state import current_model, judged_outputs, session_setting
from shrinkray.measure.parity import MEASURES, PROFILES, USER_KINDS, VerdictSettings, build_verdict
from shrinkray.measure.results import CompareSettings
from shrinkray.methods import all_methods
from shrinkray.pipeline.set_shrink import NOT_FOR_SETS
from shrinkray.text_safety import streamlit_markdown as md

st.title("Shrink")
st.write(
    "Pick one or more methods. Each one writes a smaller copy of the model; every copy is checked "
    "(onnx.checker and ONNX Runtime) and measured against the original: download size, output parity and speed."
)

loaded = current_model()
if loaded is None:
    st.info("Load a model on the **Model** page first.", icon=":material/info:")
    st.page_link("app_pages/model.py", label="Go to Model", icon=":material/upload_file:")
    st.stop()
specs = all_methods()
if loaded.model_set is not None:  # an encoder and a decoder: every method on every file, judged by what it writes
    specs = [s for s in specs if s.name not in NOT_FOR_SETS]
    st.info(f"**{md(loaded.name)}** is a set of models ({md(loaded.model_set.words())}): each method shrinks every "
            "file, and the set is judged by what it writes, the variant's encoder feeding the variant's decoder.",
            icon=":material/stacks:")  # fmt: skip
if loaded.streams_only:  # too large to load whole here: the methods that stream, into a zip or measured in its files
    from app_ui.large_models import large_shrink_panel

    large_shrink_panel(loaded)
    specs = [s for s in specs if s.stream is not None]
    st.markdown("#### Or compare them, measured in the model's own files")
with st.container(border=True):
    st.markdown("**The methods**")
    for spec in specs:
        st.markdown(f"- **{spec.title}** (`{spec.name}`): {spec.summary}")

# Every setting keeps its value for the whole browser session (persist_state), across page changes; its key holds
# its starting value (session_setting), never also a default= / value= (Streamlit warns about both).
chosen = st.multiselect(
    "Methods to compare", [s.name for s in specs], format_func=lambda n: next(s.title for s in specs if s.name == n),
    key=session_setting("shrink.methods.streaming" if loaded.streams_only else "shrink.methods",  # its own choices
                        [s.name for s in specs if s.in_default_set]), persist_state="session",
)  # fmt: skip
methods = []
for spec in specs:
    if spec.name in chosen:
        with st.expander(f"Options: {spec.title}"):
            methods.append((spec.name, method_controls(spec, "shrink")))

with st.expander("Measurement settings"):
    profile = st.radio(
        "Parity verdict", list(PROFILES), horizontal=True,
        format_func=lambda p: {"relative": "Each output in its own terms (recommended)",
                               "absolute": "Absolute tolerances (max abs 0.06, mean abs 0.02, cosine 0.99)"}.get(p, p),
        help="Relative: class scores must keep their top-1 decisions, maps and boxes stay within a share of their "
        "own range, embeddings keep their cosine row by row. Absolute: the same error limits for every output.",
        key=session_setting("shrink.profile", list(PROFILES)[0]), persist_state="session",
    )  # fmt: skip
    st.caption("How each output is judged. Leave **auto** to let the tool decide from the graph, the name and the "
               "shape; add criteria such as `min_top1_agreement=0.995` or `max_relative_error=0.05`, comma-separated.")  # fmt: skip
    kept_rows = st.session_state.setdefault("shrink.verdict_rows", {})  # a data editor's edits do not persist
    outputs_table = st.data_editor(
        kept_rows.get(loaded.sha256)
        or [{"Output": name, "Judge as": "auto", "Extra criteria": ""} for name in judged_outputs(loaded)],
        column_config={
            "Output": st.column_config.TextColumn(disabled=True),
            "Judge as": st.column_config.SelectboxColumn(options=["auto", *USER_KINDS], required=True),
            "Extra criteria": st.column_config.TextColumn(help="Criteria: min_ or max_ of " + ", ".join(MEASURES)),
        },
        hide_index=True, width="stretch", key="verdict_outputs",
    )  # fmt: skip
    kept_rows[loaded.sha256] = [dict(row) for row in outputs_table]  # the next visit starts from these
    c1, c2 = st.columns(2)
    runs = c1.number_input("Timed runs per model (0 = adaptive)", min_value=0, max_value=500,
                           help="0: adaptive. Original and variants run interleaved until every variant's speed ratio "
                           f"is known within ±3% (95% interval), or {CompareSettings().latency_budget_s:.0f} s per "
                           "setting (thread count and batch size). A number: exactly that many runs. "
                           "Median and p90 are reported.", key=session_setting("shrink.runs", 0), persist_state="session")  # fmt: skip
    latency = c2.toggle("Measure latency", key=session_setting("shrink.latency", True), persist_state="session")
    culprits = st.toggle(
        "When a variant fails, find the tensors that hurt and try leaving them in float (slower)",
        help="Rewrites the failing variant's tensors one at a time, ranks them by how far they move the outputs, "
        "and adds a variant that keeps the worst ones in float until parity passes.",
        key=session_setting("shrink.culprits", False), persist_state="session",
    )  # fmt: skip
    sweep = c2.toggle("Batches 1, 8 and 32",
                      help="Also time batches of 8 and 32 (when the batch axis is free); batch 1 only by default.",
                      key=session_setting("shrink.sweep", False), persist_state="session")  # fmt: skip

previous = comparison.settings if (comparison := latest_comparison(loaded)) else None  # this model's inputs only
verdict = None
with friendly_errors("Reading the parity settings"):
    verdict = build_verdict(
        profile,
        [f"{row['Output']}:{item.strip()}" for row in outputs_table for item in str(row["Extra criteria"] or "").split(",")
         if item.strip()],
        [f"{row['Output']}={row['Judge as']}" for row in outputs_table if row["Judge as"] != "auto"],
    )  # fmt: skip
settings = CompareSettings(
    methods=methods, verdict=verdict or VerdictSettings(profile=profile),
    runs=int(runs) or None, latency=latency, batches=[1, 8, 32] if sweep else None,
    culprit_budget_s=30.0, culprits=culprits, auto=culprits,
    inputs=previous.inputs if previous else CompareSettings().inputs,
    inputs_path=previous.inputs_path if previous else None,
    sample_files=previous.sample_files if previous else [], image_range=previous.image_range if previous else "auto",
)  # fmt: skip

from app_ui.runs import view as run_view  # noqa: E402 - the page reads top to bottom

current = run_view()
busy = current is not None and current.live  # one run at a time per session: cancel it to start another
buttons = st.container(horizontal=True)  # each button as wide as its label (columns cut it on a narrow page)
measure = buttons.button("Shrink and measure", type="primary", disabled=not methods or verdict is None or busy,
                      icon=":material/compress:", help="A run is under way: wait for it or cancel it" if busy else None)  # fmt: skip
smallest = not loaded.streams_only and loaded.model_set is None and buttons.button(  # the search holds the model whole: not for one this large
    "Smallest that passes", disabled=verdict is None or busy, icon=":material/auto_awesome:",
    help="Measures how far each tensor's precision moves the outputs, then gives every tensor the smallest of "
    "float16, 8-bit or 4-bit that keeps the whole model within the parity verdict set under \"Measurement "
    "settings\", judged on the inputs used for parity (yours, when you gave them on the Compare page); shown "
    "beside 8-bit.",
)  # fmt: skip
if smallest:  # the search, beside plain 8-bit for scale (each with the options set above, if any)
    options = dict(methods)
    settings = dataclasses.replace(
        settings, methods=[("auto", options.get("auto", {})), ("weights-int8", options.get("weights-int8", {}))]
    )
if measure or smallest:
    started = False
    with friendly_errors("Starting the run"):
        start_run(loaded, settings)  # queued: the page follows it below and stays responsive
        st.session_state["last_settings"] = settings
        started = True
    if started:
        st.rerun()  # redraw with the buttons disabled while it runs

with friendly_errors("Following the run"):
    current = follow_run()
if current is None or not current.live:
    comparison = latest_comparison(loaded)
    if comparison is not None:
        with friendly_errors("Showing the results"):
            show_results(comparison)
