"""Model page: upload or pick a sample, then see what is inside."""

import pandas as pd
import streamlit as st

from app_ui.controls import friendly_errors, sample_descriptions, size_limit_text
from app_ui.large_models import large_model_notice, load_uploaded, load_uploaded_set, release_upload
from app_ui.results import metric_row, wrapped_table
from app_ui.runs import set_model
from app_ui.state import (
    UPLOAD_LIMIT_MB,
    current_model,
    load_sample,
    runtime_problem,
    sample_names,
    summary,
    workspace,
)
from shrinkray.errors import SeveralModels
from shrinkray.io.model_set import set_members
from shrinkray.report import charts
from shrinkray.text_safety import streamlit_markdown as md
from shrinkray.units import format_bytes, format_percent

st.title("Model")
st.write(
    "Load an ONNX model to see its inputs, operators and where its bytes are. "
    "Then go to **Shrink** to make it smaller and measure what that costs."
)

#: The first choice a zip of an encoder and a decoder offers: the set as one model.
WHOLE_SET = "The whole set"


def _load_upload(uploaded, member: str | None = None) -> None:
    """The uploaded file (or ``member`` of a zip of several, or the whole set) as the current model."""
    if member == WHOLE_SET:
        loaded_upload = load_uploaded_set(uploaded, workspace())
    else:
        loaded_upload = load_uploaded(uploaded, workspace(), choose=member)
    set_model(loaded_upload, f"Uploaded: {uploaded.name}" + (f" ({member.lower()})" if member == WHOLE_SET
                                                             else f" ({member})" if member else ""))  # fmt: skip
    if member is None:  # loaded (a zip of several keeps its bytes until one is chosen): Streamlit's copy of the
        release_upload(uploaded)  # upload goes, the file's size again per session (the uploader empties)
    st.session_state["loaded_now"] = True
    if member is None:
        st.session_state.pop("archive_models", None)  # one model: nothing to choose (a set's choice stays)


upload_col, sample_col = st.columns([3, 2], gap="large")
with upload_col:
    uploaded = st.file_uploader(
        f"Drop an .onnx file, or a .zip of a model with its external data files (up to {size_limit_text(UPLOAD_LIMIT_MB)})",
        type=["onnx", "zip"],
        help="The file is copied into this browser session's private folder (a zip is unpacked there) and "
        "removed once the model is in memory; it is never written next to anything else. A model too large to "
        "measure here is kept there as its graph alone, and the Shrink page shrinks it with weights-int8, "
        "tensor by tensor. The limit is server.maxUploadSize in .streamlit/config.toml; model limits are "
        "SHRINKRAY_MAX_* (see docs/security.md).",
    )
    if uploaded is not None and st.session_state.get("upload_id") != uploaded.file_id:
        st.session_state["upload_id"] = uploaded.file_id
        st.session_state.pop("archive_models", None)
        with friendly_errors(f"Loading {uploaded.name}"):
            try:
                _load_upload(uploaded)
            except SeveralModels as several:  # an encoder and a decoder, a transformers.js onnx/ folder: pick one
                whole = (WHOLE_SET,) if set_members(list(several.choices)) is not None else ()
                st.session_state["archive_models"] = (uploaded.file_id, whole + several.choices)
        still = current_model() if not st.session_state.get("loaded_now") else None
        if still is not None:  # the page below still shows it: say which model that is
            st.caption(f"The model loaded before, {md(still.name)}, is still the current one.")
    chosen_from = st.session_state.get("archive_models")
    if uploaded is not None and chosen_from and chosen_from[0] == uploaded.file_id:
        files = [c for c in chosen_from[1] if c != WHOLE_SET]
        member = st.selectbox(
            f"{md(uploaded.name)} holds {len(files)} models: which one?", chosen_from[1],
            format_func=lambda c: f"{c}: {len(files)} files shrunk together, judged by what they write"
            if c == WHOLE_SET else c,
            help="An encoder and a decoder as one set: each method shrinks every file and the set is judged by the "
            "text it writes (the variant's encoder feeding the variant's decoder). Or one file on its own: the "
            "decoder is then fed made-up encoder states.")  # fmt: skip
        if st.button("Load this model", type="primary"):
            with friendly_errors(f"Loading {member} from {uploaded.name}"):
                _load_upload(uploaded, member)
with sample_col:
    descriptions = sample_descriptions()
    choice = st.selectbox("…or pick a bundled sample", sample_names(), index=None, placeholder="Choose a sample",
                          help="Small models built by sample_models/build.py, each showing one kind of model.")  # fmt: skip
    if choice is not None and descriptions.get(choice):
        st.caption(md(descriptions[choice]))
    if st.button("Load sample", disabled=choice is None, type="primary"):
        with friendly_errors(f"Loading sample {choice}"):
            sample = load_sample(choice)
            set_model(sample, f"Sample: {choice}" + (" (a set of models)" if sample.model_set is not None else ".onnx"))
            st.session_state["loaded_now"] = True
if st.session_state.pop("loaded_now", False):
    st.rerun()  # so the sidebar, drawn before this page, shows the new model

loaded = current_model()
if loaded is None:
    st.info("No model loaded yet. Upload a file or pick a sample above.", icon=":material/info:")
    st.stop()
if st.session_state.get("run_id") and st.session_state.get("model_source", "").startswith("From a run link"):
    st.info("This link opened a kept run of this model: its results are on the **Shrink** and **Compare** pages.",
            icon=":material/link:")  # fmt: skip
    st.page_link("app_pages/shrink.py", label="See the results", icon=":material/compress:")

with friendly_errors("Inspecting the model"):
    s = summary(loaded)
    st.subheader(md(s.name))
    if loaded.model_set is not None:
        st.caption(f"A set of models: {md(loaded.model_set.words())}, shrunk together and judged by what they write. "
                   "Inputs are the encoder's, outputs the decoder's; every file's operators and weights are counted.")  # fmt: skip
    cols = metric_row(4)
    cols[0].metric("File size", format_bytes(s.file_bytes), help=f"{s.file_bytes:,} bytes")
    cols[1].metric("Weights", format_percent(s.weight_share), help=f"{format_bytes(s.weight_bytes)} in {len(s.weights)} tensors")
    cols[2].metric("Nodes", f"{s.node_count:,}", help=f"including {s.subgraph_count} subgraphs")
    # a metric's value renders Markdown too: an op domain is the model's text
    cols[3].metric("Opset", md(", ".join(f"{d} {v}" for d, v in s.opsets.items())),
                   help=md(f"IR version {s.ir_version}; {s.producer}"))  # fmt: skip
    if loaded.streams_only:  # too large to hold whole: its weights stay in their files
        st.info(md(large_model_notice(loaded)), icon=":material/info:")
        st.page_link("app_pages/shrink.py", label="Shrink it tensor by tensor", icon=":material/compress:")
    problem = None if loaded.streams_only else runtime_problem(loaded)
    if problem:
        st.warning(
            f"{md(problem)} Inspection works; shrinking and measuring need ONNX Runtime to check every result, "
            "so they will refuse this model.",
            icon=":material/warning:",
        )
    if s.quantized_ops:
        st.info("This model is already quantized (" + md(", ".join(s.quantized_ops)) + "): only its remaining float "
                "tensors can shrink.", icon=":material/info:")  # fmt: skip

    st.markdown("#### Inputs and outputs")
    rows = [
        {"kind": kind, "name": md(t.name), "dtype": t.dtype, "shape": md(t.shape_text()),
         "dynamic axes": md(", ".join(f"{i}: {d}" for i, d in t.dynamic_axes.items()))}
        for kind, sigs in (("input", s.inputs), ("output", s.outputs)) for t in sigs
    ]  # fmt: skip
    st.table(pd.DataFrame(rows), hide_index=True)  # a table wraps long symbolic shapes; a data grid cuts them

    left, right = st.columns(2)
    left.plotly_chart(charts.op_histogram_chart(s), width="stretch")
    right.plotly_chart(charts.weight_bytes_chart(s), width="stretch")

    st.markdown("#### Weight tensors")
    weights = pd.DataFrame(
        [{"name": w.name, "dtype": w.dtype, "shape": str(w.shape), "elements": w.elements, "bytes": w.bytes,
          "share of file": w.share_of_file, "where": w.where} for w in s.weights]
    )  # fmt: skip
    # Widths that add up to a narrow (800 px) page's width, the name pinned: a long tensor name made the grid
    # scroll sideways and took its name out of view; the full name shows on hover and in the cell's tooltip.
    st.dataframe(
        weights, hide_index=True, width="stretch",
        column_config={"name": st.column_config.TextColumn("name", width=190, pinned=True),  # data, never links
                       "where": st.column_config.TextColumn("where", width=90),
                       "dtype": st.column_config.TextColumn("dtype", width=70),
                       "shape": st.column_config.TextColumn("shape", width=100),
                       "share of file": st.column_config.ProgressColumn(format="percent", min_value=0, max_value=1,
                                                                        width=100),
                       "elements": st.column_config.NumberColumn(format="localized", width=90),
                       "bytes": st.column_config.NumberColumn(format="localized", width=100)},
    )  # fmt: skip

    st.markdown("#### What each method can rewrite (default options)")
    # A handful of rows: a static table that wraps to the page (a data grid scrolled sideways at 800 px)
    wrapped_table([[md(m.method), f"{m.tensors:,}", format_bytes(m.bytes), format_percent(m.share_of_file)]
                   for m in s.methods], ["method", "tensors", "bytes", "share of file"])  # fmt: skip
