"""Compare page: the charts across the original and its variants, and the inputs used for parity."""

import dataclasses
import re
import shutil
import uuid
from pathlib import Path

import streamlit as st

from app_ui.controls import friendly_errors, input_examples
from app_ui.runs import follow_run, latest_comparison, start_run
from app_ui.state import current_model, workspace
from shrinkray.errors import OptionError
from shrinkray.measure.content import IMAGE_RANGES
from shrinkray.measure.inputs import InputOptions, parse_dims, parse_ranges
from shrinkray.measure.sample_files import is_sample_file
from shrinkray.report import charts
from shrinkray.text_safety import streamlit_markdown as md

IMAGE_RANGE_LABELS = {
    "auto": "Auto (from the model)", "imagenet": "Mean/std normalized (ImageNet)", "0-1": "0 to 1",
    "-1-1": "-1 to 1", "0-255": "0 to 255",
}  # fmt: skip


def _num(x: float) -> str:
    """A range bound as typed: 30521, not 30521.0; never rounded."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


st.title("Compare")
st.write("Size, speed and accuracy of every variant side by side. The same charts are in the HTML report.")

loaded = current_model()
with friendly_errors("Following the run"):
    if loaded is not None:
        follow_run(cards=False)  # a re-measure under way: its progress; a failed one: why
comparison = latest_comparison(loaded)
if loaded is None or comparison is None:
    st.info("Run **Shrink** on a model first; its measurements appear here.", icon=":material/info:")
    st.page_link("app_pages/shrink.py", label="Go to Shrink", icon=":material/compress:")
    st.stop()

with friendly_errors("Drawing the charts"):
    st.plotly_chart(charts.pareto_chart(comparison), width="stretch")
    # one chart per row: side by side, a narrow page cut their subtitles off (plotly never wraps a title)
    st.plotly_chart(charts.size_chart(comparison), width="stretch")
    st.plotly_chart(charts.latency_chart(comparison), width="stretch")
    if len({s.batch for s in comparison.original.latency}) > 1:
        st.plotly_chart(charts.throughput_chart(comparison), width="stretch")
    outputs = [o.name for o in comparison.original.parity.outputs] if comparison.original.parity else []
    ok_variants = [r.key for r in comparison.variants if r.ok and r.parity is not None]
    if outputs and ok_variants:
        st.markdown("#### Parity per output")
        c1, c2 = st.columns(2)
        output = c1.selectbox("Output", outputs)
        variant = c2.selectbox("Variant for the scatter plot", ok_variants)
        st.plotly_chart(charts.parity_error_chart(comparison, output=output), width="stretch")
        st.plotly_chart(charts.parity_scatter_chart(comparison, variant, output=output), width="stretch")

# In your browser (app_ui/browser_panel.py): the models run in this browser with ONNX Runtime Web.
with friendly_errors("Running in your browser"):
    from app_ui import browser_panel

    browser_panel.render(loaded, comparison)

st.markdown("#### Inputs used for parity")
st.caption(md(comparison.input_note))
shown = [p for p in comparison.settings.sample_files if Path(p).suffix.lower() != ".wav" and Path(p).is_file()]
if shown:
    st.image([Path(p).read_bytes() for p in shown[:8]], caption=[Path(p).name for p in shown[:8]], width=140)
with st.form("inputs"):
    # The form starts from the shown results' inputs, so changing one thing (the seed) keeps the others.
    used = comparison.settings
    if loaded.model_set is not None:  # a set reads text lines (or clips): no dimensions or ranges to set
        speech = any(i.name == "input_features" for i in loaded.model.graph.input)  # its encoder's input
        st.write("A set of models is fed the lines of its prompts.txt through its tokenizer (token ids drawn like "
                 "text without them; clips of voiced audio for a speech encoder). "
                 + ("Upload WAV files of your own (each clip one input), " if speech else
                    "Upload a .txt of your own text, one input per line, ")
                 + "or change the seed of the synthesized inputs.")  # fmt: skip
        dims_text = ranges_text = ""
        seed = st.number_input("Seed", min_value=0, value=used.inputs.seed, step=1)
        image_range = used.image_range
        uploads = st.file_uploader("Your clips (WAV files)" if speech else "Your text (one .txt, one input per line)",
                                   type=["wav"] if speech else ["txt"], accept_multiple_files=True)  # fmt: skip
    else:
        st.write("Synthesized inputs look like what the model sees (pages, text lines and scenes for image inputs, "
                 "speech for audio, token ids from the vocabulary). Override free dimensions and value ranges, or "
                 "upload real samples: images or WAV files (one sample each), an .npz with one array per input name, "
                 "or for a language model a .txt of text like what it reads (its prompts are windows of it).")  # fmt: skip
        c1, c2 = st.columns(2)
        dims_example, ranges_example = input_examples(loaded.model)
        dims_text = c1.text_area("Dimensions, one NAME=VALUE per line", placeholder=dims_example,
                                 value="\n".join(f"{k}={v}" for k, v in used.inputs.dims.items()))  # fmt: skip
        ranges_text = c2.text_area("Value ranges, one NAME=LOW:HIGH per line", placeholder=ranges_example,
                                   value="\n".join(f"{k}={_num(lo)}:{_num(hi)}" for k, (lo, hi) in used.inputs.ranges.items()))  # fmt: skip
        c1, c2 = st.columns(2)
        seed = c1.number_input("Seed", min_value=0, value=used.inputs.seed, step=1)
        range_options = ["auto", *IMAGE_RANGES]
        image_range = c2.selectbox(
            "Image values", range_options, format_func=lambda r: IMAGE_RANGE_LABELS.get(r, r),
            index=range_options.index(used.image_range) if used.image_range in range_options else 0,
            help="How uploaded images are scaled before they reach the model; auto reads it from the model's graph.",
        )  # fmt: skip
        uploads = st.file_uploader("Real samples (images, WAV files, one .npz, or one .txt for a language model)",
                                   type=["npz", "png", "jpg", "jpeg", "wav", "txt"], accept_multiple_files=True)  # fmt: skip
    submitted = st.form_submit_button("Re-measure with these inputs", type="primary")

started = False
if submitted:
    with friendly_errors("Re-measuring"):
        try:
            dims, ranges = parse_dims(_lines(dims_text)), parse_ranges(_lines(ranges_text))
        except OptionError as exc:  # the engine words these for the command line (--dim, --range)
            problem = exc.problem.replace("--dim ", "Dimension ").replace("--range ", "Value range ")
            raise OptionError(problem, re.sub(r"--(dim|range) ", "", exc.hint)) from None
        npz_files = [u for u in uploads or [] if u.name.lower().endswith(".npz")]
        sample_uploads = [u for u in uploads or [] if is_sample_file(u.name)]
        texts = [u for u in uploads or [] if u.name.lower().endswith(".txt")]
        if npz_files and sample_uploads or len(npz_files) > 1:
            raise OptionError("Upload either one .npz file or images / WAV files, not both", "Remove the extra files")

        if texts and (npz_files or sample_uploads or len(texts) > 1):
            raise OptionError("A .txt is a language model's prompts: upload one, on its own", "Remove the extra files")
        path, sample_paths = None, []
        folder = workspace() / f"samples-{uuid.uuid4().hex[:12]}"  # the shown results keep theirs until this works
        folder.mkdir(parents=True)
        text = ""
        if texts:
            text = str(folder / "prompts.txt")
            Path(text).write_bytes(texts[0].getvalue())
        inputs = InputOptions(dims=dims, ranges=ranges, seed=int(seed), tokenizer=used.inputs.tokenizer,
                              text=text or used.inputs.text)  # fmt: skip
        if npz_files:
            stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(npz_files[0].name).stem)[:60] or "inputs"
            path = folder / f"{stem}.npz"  # the note says "Inputs loaded from <the user's file name>"
            path.write_bytes(npz_files[0].getvalue())
        for index, upload in enumerate(sample_uploads):
            stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(upload.name).stem)[:60]
            target = folder / f"{index:02d}" / f"{stem}{Path(upload.name).suffix.lower()}"  # shown by the user's name
            target.parent.mkdir()
            target.write_bytes(upload.getvalue())
            sample_paths.append(str(target))
        settings = dataclasses.replace(
            comparison.settings, inputs=inputs, inputs_path=str(path) if path else None,
            sample_files=sample_paths, image_range=image_range,
        )  # fmt: skip
        start_run(loaded, settings, what="Re-measuring")  # queued; the run keeps its own copy of the samples
        st.session_state["last_settings"] = settings
        for old in workspace().glob("samples-*"):
            if old != folder:
                shutil.rmtree(old, ignore_errors=True)
        started = True
    if started:
        st.rerun()  # the page redraws with the run's progress at the top
