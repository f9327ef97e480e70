"""Compare page: the charts across the original and its variants, and the inputs used for parity."""

import dataclasses

import streamlit as st

from app_ui.controls import friendly_errors
from app_ui.state import current_model, latest_comparison, run_comparison, workspace
from shrinkray import charts
from shrinkray.measure.inputs import InputOptions, parse_dims, parse_ranges

st.title("Compare")
st.write("Size, speed and accuracy of every variant side by side. The same charts are in the HTML report.")

loaded = current_model()
comparison = latest_comparison(loaded)
if loaded is None or comparison is None:
    st.info("Run **Shrink** on a model first; its measurements appear here.", icon=":material/info:")
    st.page_link("app_pages/shrink.py", label="Go to Shrink", icon=":material/compress:")
    st.stop()

with friendly_errors("Drawing the charts"):
    st.plotly_chart(charts.pareto_chart(comparison), width="stretch")
    left, right = st.columns(2)
    left.plotly_chart(charts.size_chart(comparison), width="stretch")
    right.plotly_chart(charts.latency_chart(comparison), width="stretch")
    if len({s.batch for s in comparison.original.latency}) > 1:
        st.plotly_chart(charts.throughput_chart(comparison), width="stretch")
    outputs = [o.name for o in comparison.original.parity.outputs] if comparison.original.parity else []
    ok_variants = [r.key for r in comparison.variants if r.ok and r.parity is not None]
    if outputs and ok_variants:
        st.markdown("#### Parity per output")
        c1, c2 = st.columns(2)
        output = c1.selectbox("Output", outputs)
        variant = c2.selectbox("Variant for the scatter plot", ok_variants)
        left, right = st.columns(2)
        left.plotly_chart(charts.parity_error_chart(comparison, output=output), width="stretch")
        right.plotly_chart(charts.parity_scatter_chart(comparison, variant, output=output), width="stretch")

st.markdown("#### Inputs used for parity")
st.caption(comparison.input_note)
with st.form("inputs"):
    st.write("Synthesized inputs follow the model's signature. Override free dimensions and value ranges, "
             "or upload real inputs as .npz (one array per input name).")  # fmt: skip
    c1, c2 = st.columns(2)
    dims_text = c1.text_area("Dimensions, one NAME=VALUE per line", placeholder="batch=4\nseq=32\nx:2=224")
    ranges_text = c2.text_area("Value ranges, one NAME=LOW:HIGH per line", placeholder="input_ids=0:30521")
    seed = st.number_input("Seed", min_value=0, value=comparison.settings.inputs.seed, step=1)
    npz = st.file_uploader("Real inputs (.npz)", type=["npz"])
    submitted = st.form_submit_button("Re-measure with these inputs", type="primary")

if submitted:
    with friendly_errors("Re-measuring"):
        lines = lambda text: [ln.strip() for ln in text.splitlines() if ln.strip()]
        inputs = InputOptions(dims=parse_dims(lines(dims_text)), ranges=parse_ranges(lines(ranges_text)), seed=int(seed))
        path = None
        if npz is not None:
            path = workspace() / "inputs.npz"
            path.write_bytes(npz.getvalue())
        settings = dataclasses.replace(comparison.settings, inputs=inputs, inputs_path=str(path) if path else None)
        bar = st.progress(0.0, text="Starting")
        run_comparison(loaded, settings, progress=lambda step, f: bar.progress(min(max(f, 0.0), 1.0), text=step))
        st.session_state["last_settings"] = settings
        bar.empty()
        st.rerun()
