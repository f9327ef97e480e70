"""Result cards and downloads for a comparison."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_ui.controls import APP_ADVICE, advice_text, app_words
from app_ui.headline import CONNECTION_KEY, headline_card, pricing_choice
from app_ui.state import session_setting
from app_ui.what_changes import what_changes
from shrinkray.io.files import serialize
from shrinkray.measure.results import Comparison, VariantResult
from shrinkray.measure.sizes import BUDGET_S, estimated_note
from shrinkray.pipeline.compare import NAMINGS, naming_stem, variant_file_name
from shrinkray.report import charts
from shrinkray.report import formats as report
from shrinkray.report.card_png import to_card_png
from shrinkray.report.one_page import to_one_page
from shrinkray.text_safety import streamlit_markdown as md
from shrinkray.units import format_bytes
from shrinkray.verdict import verdict_of
from shrinkray.verdict.advice import advise, latency_ratio
from shrinkray.verdict.speed import FASTER, NOISY, SLOWER, SpeedCall, speed_of

_ICONS = {"good": ":material/thumb_up:", "info": ":material/info:", "warning": ":material/warning:",
          "bad": ":material/block:"}  # fmt: skip


_VERDICT_ICONS = {"pass": ":material/check_circle:", "fail": ":material/cancel:", "undecided": ":material/help:",
                  "error": ":material/error:", "unmeasured": ":material/help:"}  # fmt: skip


def _card_advice(item, verdict) -> str:
    """A piece of advice on the card in the app's words; advice that repeats the card's verdict sentence (shown
    once, above it) keeps only what to try next ("" when it has nothing to add)."""
    if verdict.sentence in item.text:
        return item.hints_worded(APP_ADVICE) if item.hints else ""
    return advice_text(item)


#: Changes smaller than this share are shown without an arrow or colour (rounding, not a change).
MEANINGFUL = 0.0005


def _delta(value: int, base: int) -> str | None:
    """The size change as a signed percentage, or None (no arrow, no colour) when there is no real change."""
    if not base or abs(value - base) / base < MEANINGFUL:
        return None
    return f"{(value - base) / base:+.1%}"


def _latency_delta(speed: SpeedCall) -> str | None:
    """Time change as "+35% time" (red, up) or "-20% time" (green, down), when the one speed call says slower
    or faster (timing that ended noisy still counts when its whole interval is beyond ±5%: 3.7-4.2x is surely
    slower); None when it is the original's speed or too noisy to tell."""
    if speed.status not in (SLOWER, FASTER) or speed.ratio is None:
        return None
    return f"{speed.ratio - 1:+.0%} time"


#: A long name without spaces (``/model.22/detect/Concat_output_0``) in a table's first column may break anywhere:
#: else its column keeps the whole name's width and squeezes the others, or the table scrolls sideways. Only the
#: first column: a number broken in two reads as two numbers.
_WRAP_CELLS = ("<style>[data-testid=stTable] :is(td, th):first-child, [data-testid=stTable] :is(td, th):first-child * "
               "{ overflow-wrap: anywhere !important; } "
               # a card's eight columns needed 434 px at Streamlit's padding; a card on an 800 px page has 400
               "[data-testid=stTable] :is(td, th) { padding-left: .15rem !important; padding-right: .15rem !important; }"
               "</style>")


def wrapped_table(rows: list[list[str]], header: list[str]) -> None:
    """A static table whose cells wrap to fit the page, the name first (cells are Markdown: escape model text)."""
    st.html(_WRAP_CELLS)
    st.table(pd.DataFrame(rows, columns=header), hide_index=True)


def metric_row(n: int) -> list:
    """``n`` slots for metrics side by side that wrap onto a second line on a narrow page (columns
    squeeze each value to "43…" there) and spread over the width on a wide one."""
    row = st.container(horizontal=True, horizontal_alignment="distribute", gap="medium")
    return [row.container(width="content", gap=None) for _ in range(n)]


def _pending(column, label: str, what: str, value: str = "…") -> None:
    """A metric still being measured (partial results while a run goes on), or never measured (``value`` —)."""
    column.metric(label, value, what, delta_color="off", delta_arrow="off")


def _model_download(result: VariantResult):
    """The variant's bytes: from memory, or (a kept run) read from its file when the button is pressed."""
    if result.model is not None:
        return serialize(result.model)
    if result.file:
        from pathlib import Path

        path = Path(result.file)
        if path.is_dir():  # a set's variant: its folder of models, tokenizer and settings, zipped when asked for
            from shrinkray.io.model_set import pack_folder

            return lambda: pack_folder(path)
        from shrinkray.io.kept_files import model_bytes

        return lambda: model_bytes(path)  # a run may keep a large variant compressed: the model's own bytes
    return None


NAMING_KEY = "downloads:naming"
NAMING_WORDS = {"shrinkray": "Shrink Ray (model.method.onnx)", "transformers.js": "transformers.js (model_quantized.onnx…)"}


def download_name(c: Comparison, result: VariantResult) -> str:
    """The variant's file name, as the visitor chose (the engine's one naming rule, pipeline.compare)."""
    if result.file and _is_folder(result.file):
        return f"{c.name}.{result.key}.zip"  # a set's variant: transformers.js's file names inside
    naming = st.session_state.get(NAMING_KEY, NAMINGS[0])
    return variant_file_name(naming_stem(c.name, naming), result.key, naming)


def _is_folder(file: str) -> bool:
    from pathlib import Path

    return Path(file).is_dir()


def variant_card(c: Comparison, result: VariantResult, advice_items, partial: bool = False) -> None:
    base = c.original.sizes
    with st.container(border=True):
        st.markdown(f"### {md(result.key)}")
        if not result.ok:
            st.error(md(app_words(result.error or "")), icon=":material/error:")
            return
        if partial and not result.record:  # queued behind the variants before it, or being made now
            st.caption("Shrinking…")
            return
        changed = result.record.get("tensors_changed", 0)
        st.caption(
            f"{changed} tensors rewritten · {format_bytes(result.record.get('weight_bytes_before', 0))} of weights → "
            f"{format_bytes(result.record.get('weight_bytes_after', 0))}"
        )
        cols = metric_row(5)
        s = result.sizes
        if s is None or base is None:
            for column, label in zip(cols[:3], ("Raw", "gzip -9", "brotli"), strict=True):
                _pending(column, label, *(("measuring…",) if partial else ("not measured (see its notes)", "—")))
        else:
            cols[0].metric("Raw", format_bytes(s.raw), _delta(s.raw, base.raw), delta_color="inverse")
            estimated = s.margin("gzip") > 0  # a file over 32 MiB: sampled blocks, with a 95% interval
            cols[1].metric("gzip -9 (estimated)" if estimated else "gzip -9", format_bytes(s.gzip),
                           _delta(s.gzip, base.gzip), delta_color="inverse",
                           help=f"{s.method('gzip')}." if estimated else None)  # fmt: skip
            as_gzip = " · as gzip" if s.brotli_encoding == "gzip" else ""  # gzip -9 was smaller: a server sends that
            cols[2].metric(f"brotli q{s.brotli_quality}{as_gzip}", format_bytes(s.brotli), _delta(s.brotli, base.brotli),
                           delta_color="inverse",
                           help=f"Served: {s.method('brotli')}. Quality {s.brotli_quality} is chosen per comparison so "
                           f"that every file compresses in about {BUDGET_S:.0f} s (11 for small models, 6 for large ones); the "
                           "saving is against the original's brotli size, so it can differ from gzip's "
                           "even when the same file is served.")  # fmt: skip
        parity = result.parity
        if parity is None and partial:
            _pending(cols[3], "Verdict", "measuring…")
        verdict = verdict_of(result)
        if parity is not None:
            cols[3].metric("Verdict", verdict.label, help=f"{md(verdict.sentence)} {parity.verdict.profile.capitalize()} "
                           f"verdict on {parity.samples} input samples.")  # fmt: skip
        ratio = latency_ratio(c, result) if not partial or (result.latency and c.original.latency) else None
        if ratio is None and partial and c.settings.latency:
            _pending(cols[4], "Latency", "measuring…")
        if ratio is not None:
            first = result.latency[0]
            speed = speed_of(c, result)
            delta = _latency_delta(speed)
            neutral = delta is None  # within the noise, or too noisy: said in words, uncoloured
            label = delta or ("too noisy to tell" if speed.status == NOISY else f"{speed.ratio:.2f}x the original's")
            cols[4].metric("Latency", f"{speed.variant_ms:.2f} ms vs {speed.original_ms:.2f} ms", label,
                           delta_color="off" if neutral else "inverse", delta_arrow="off" if neutral else "auto",
                           help=f"This variant's median time vs the original's: {speed.words}. Median of {first.runs} "
                           f"runs, {first.threads} thread(s), batch {first.batch}.")  # fmt: skip
        if parity is not None:
            st.markdown(f"{_VERDICT_ICONS[verdict.status]} {md(verdict.sentence)}")
        for item in advice_items:
            text = _card_advice(item, verdict) if item.variant == result.key else ""
            if text:
                st.markdown(f"{_ICONS.get(item.level, '')} {md(text)}")
        precision = result.record.get("details", {}).get("precision_map")
        if precision:
            with st.expander("Precision per tensor"):
                st.plotly_chart(charts.precision_chart(c, result.key), width="stretch", key=f"precision:{result.key}")
                # a tensor per row (hundreds, in a transformer): a grid, its columns narrow enough for a card on
                # an 800 px page, the tensor's name pinned in view
                narrow = {name: st.column_config.TextColumn(name, width=80) for name in report.PRECISION_HEADER[1:]}
                narrow[report.PRECISION_HEADER[0]] = st.column_config.TextColumn(report.PRECISION_HEADER[0], width=180,
                                                                                 pinned=True)  # fmt: skip
                st.dataframe(report.precision_rows(precision), hide_index=True, width="stretch", column_config=narrow)
        if parity is not None:
            with st.expander("Parity per output"):
                header, rows = report.output_table(result)
                # A table wraps a long "Decided by" (a detection head's boxes) and output name; a data grid made
                # the card scroll sideways. Its cells are Markdown: names come from the model, so escaped.
                wrapped_table([[md(cell) for cell in row] for row in rows], header)
        if result.notes:  # how it was made and judged: held-out samples, calibration, tensors left in float
            with st.expander("How it was made"):
                st.markdown("\n".join(f"- {md(app_words(note))}" for note in result.notes))
        for warning in result.warnings[:5]:
            st.warning(md(app_words(warning)), icon=":material/warning:")
        data = None if partial else _model_download(result)
        if data is None:
            return
        file_name = download_name(c, result)
        st.download_button(
            f"Download {md(file_name)}",
            data=data,
            file_name=file_name,
            mime="application/zip" if file_name.endswith(".zip") else "application/octet-stream",
            key=f"download:{result.key}",
            icon=":material/download:",
            help="Checked: passes onnx.checker and opens in ONNX Runtime.",
        )


def _without_server_paths(c: Comparison) -> Comparison:
    """The comparison as the reports show it: input files by their names, not the server's folders."""
    import dataclasses
    from pathlib import Path

    settings = dataclasses.replace(
        c.settings,
        inputs_path=Path(c.settings.inputs_path).name if c.settings.inputs_path else None,
        sample_files=[Path(p).name for p in c.settings.sample_files],
    )
    return dataclasses.replace(c, settings=settings)


def show_results(c: Comparison, partial: bool = False) -> None:
    """The headline advice, one card per variant and the reports. ``partial``: a snapshot of a run still
    under way (cards with what is measured so far, "measuring…" for the rest; no advice, downloads or reports)."""
    if partial:
        base = c.original.sizes
        if base is not None:
            st.caption(f"Original: {format_bytes(base.raw)} raw · {format_bytes(base.gzip)} gzip -9 · "
                       f"{format_bytes(base.brotli)} brotli q{base.brotli_quality}. Measuring the variants…")  # fmt: skip
        for result in c.variants:
            variant_card(c, result, [], partial=True)
        return
    card = headline_card(c)
    advice_items = advise(c)
    headline = advice_items[0] if advice_items else None
    if headline is not None and headline.level == "good":
        st.success(md(advice_text(headline)), icon=":material/thumb_up:")
    elif headline is not None:
        st.warning(md(advice_text(headline)), icon=":material/warning:")
    for item in advice_items[1:]:
        if item.variant is None:
            st.info(md(advice_text(item)), icon=_ICONS.get(item.level))
    what_changes(c, card.variant)
    base = c.original.sizes
    notes = " ".join(f"{n}." for n in (c.input_note, c.latency_note, estimated_note(r.sizes for r in c.all)) if n)
    st.caption(
        f"Original: {format_bytes(base.raw)} raw · {format_bytes(base.gzip)} gzip -9 · {format_bytes(base.brotli)} "
        f"brotli q{base.brotli_quality}. {md(notes)}"
    )
    if any(r.file and _is_folder(r.file) for r in c.variants):  # a set: each download is a whole model folder
        st.caption("Each download is a .zip of the set's folder: its files under transformers.js's names "
                   "(encoder_model_quantized.onnx, decoder_model_fp16.onnx…) with its settings and tokenizer files.")  # fmt: skip
    else:
        st.radio("Name model downloads", list(NAMING_WORDS), key=session_setting(NAMING_KEY, NAMINGS[0]),
                 horizontal=True, format_func=NAMING_WORDS.get,
                 help="transformers.js names are the files its dtype option loads (model_quantized.onnx for q8, "
                      "model_q4.onnx, model_fp16.onnx): put them beside model.onnx in the model's onnx/ folder.")  # fmt: skip
    for result in c.variants:
        variant_card(c, result, advice_items)
    st.markdown("#### Reports")
    c = _without_server_paths(c)
    choice = pricing_choice()  # the headline card's pricing: reports say what the card says
    row = st.container(horizontal=True)  # side by side, each as wide as its label; wraps on a narrow page
    row.download_button("JSON", report.to_json_text(c, choice.delivery, choice), f"{c.name}.report.json", "application/json",
                        icon=":material/data_object:")  # fmt: skip
    row.download_button("Markdown", report.to_markdown(c, choice.delivery, choice), f"{c.name}.report.md", "text/markdown",
                        icon=":material/description:")  # fmt: skip
    row.download_button("CSV", report.to_csv(c, choice), f"{c.name}.report.csv", "text/csv", icon=":material/table:")
    row.download_button("One page to send", to_one_page(c, choice, st.session_state.get(CONNECTION_KEY)),
                        f"{c.name}.one-page.html", "text/html", icon=":material/summarize:",
                        help="Headline, size, wait and cost per file: opens offline, prints to one page")  # fmt: skip
    row.download_button("Headline card (PNG)", to_card_png(c, choice, st.session_state.get(CONNECTION_KEY)),
                        f"{c.name}.headline.png", "image/png", icon=":material/image:",
                        help="The headline card as a 1200x630 picture (a link preview's size), for a slide or a chat")  # fmt: skip
    row.download_button("HTML with charts", report.to_html(c, choice.delivery, choice), f"{c.name}.report.html", "text/html",
                        icon=":material/monitoring:", help="One file, opens offline")  # fmt: skip
