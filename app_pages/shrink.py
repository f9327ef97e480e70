"""Shrink page: choose methods and options, run them, and see what each one costs and saves."""

import streamlit as st

from app_ui.controls import friendly_errors, method_controls
from app_ui.results import show_results
from app_ui.state import current_model, latest_comparison, run_comparison
from shrinkray.compare import CompareSettings
from shrinkray.measure.parity import DEFAULT_ABS_TOL, DEFAULT_MEAN_TOL, DEFAULT_MIN_COSINE
from shrinkray.methods import all_methods

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
with st.container(border=True):
    st.markdown("**The methods**")
    for spec in specs:
        st.markdown(f"- **{spec.title}** (`{spec.name}`): {spec.summary}")

chosen = st.multiselect(
    "Methods to compare", [s.name for s in specs], default=[s.name for s in specs],
    format_func=lambda n: next(s.title for s in specs if s.name == n),
)  # fmt: skip
methods = []
for spec in specs:
    if spec.name in chosen:
        with st.expander(f"Options: {spec.title}"):
            methods.append((spec.name, method_controls(spec, "shrink")))

with st.expander("Measurement settings"):
    c1, c2, c3, c4 = st.columns(4)
    abs_tol = c1.number_input("Parity: max abs error allowed", min_value=0.0, value=DEFAULT_ABS_TOL, format="%.4f")
    mean_tol = c2.number_input("Parity: mean abs error allowed", min_value=0.0, value=DEFAULT_MEAN_TOL, format="%.4f")
    min_cosine = c3.number_input("Parity: lowest cosine allowed", min_value=-1.0, max_value=1.0,
                                 value=DEFAULT_MIN_COSINE, format="%.4f",
                                 help="Small absolute errors can hide a destroyed output; the cosine catches it.")  # fmt: skip
    runs = c4.number_input("Timed runs per model", min_value=3, max_value=500, value=20,
                           help="Original and variants run interleaved; median and p90 are reported.")  # fmt: skip
    latency = st.toggle("Measure latency", value=True)

previous = st.session_state.get("last_settings")
settings = CompareSettings(
    methods=methods, abs_tol=float(abs_tol), mean_tol=float(mean_tol), min_cosine=float(min_cosine),
    runs=int(runs), latency=latency,
    latency_budget_s=10.0, culprit_budget_s=30.0,
    inputs=previous.inputs if previous else CompareSettings().inputs,
    inputs_path=previous.inputs_path if previous else None,
)  # fmt: skip

if st.button("Shrink and measure", type="primary", disabled=not methods, icon=":material/compress:"):
    bar = st.progress(0.0, text="Starting")
    with friendly_errors("Shrinking and measuring"):
        run_comparison(loaded, settings, progress=lambda step, f: bar.progress(min(max(f, 0.0), 1.0), text=step))
        st.session_state["last_settings"] = settings
    bar.empty()

comparison = latest_comparison(loaded)
if comparison is not None:
    with friendly_errors("Showing the results"):
        show_results(comparison)
