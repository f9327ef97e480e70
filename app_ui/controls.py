"""Widgets built from the engine's own descriptions, and friendly error display.

Method controls come from each method's options dataclass (type, choices,
bounds and help text), so a new method appears in the app without UI code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

import streamlit as st

from app_ui.state import SAMPLES_DIR, current_model, session_setting
from shrinkray.errors import ShrinkRayError
from shrinkray.measure.budget import BUDGET_SETTING
from shrinkray.methods import MethodSpec
from shrinkray.runs.fairness import TooManyRuns
from shrinkray.text_safety import streamlit_markdown as md
from shrinkray.units import format_bytes

log = logging.getLogger("shrinkray.app")


#: How the app words the engine's hints that name a setting (the CLI has its own flags for them).
APP_HINTS = {
    "stream": "Shrink it with weights-int8 on the Shrink page, which works tensor by tensor",
    "stream_compare": "Compare only weights-int8 and float16 (untick the other methods): they work tensor by tensor "
    "and measure it in its own files",
    "external_data": "Save it with its weights in external data files and upload a .zip of its folder: the Shrink "
    "page then shrinks it with weights-int8, tensor by tensor",
    "inputs": "On the Compare page, set the free dimensions and value ranges under \"Inputs used for parity\", "
    "or upload real inputs (an .npz file, images or WAV files)",
    # measure/budget.py: the work ahead, from the original's first run, passes the job's time cap
    BUDGET_SETTING: "Choose fewer methods under \"Methods to compare\" on the Shrink page, or set smaller free "
    "dimensions (or upload fewer samples) under \"Inputs used for parity\" on the Compare page",
}


def _names(value: Any) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)


def _method_title(name: str | None) -> str:
    from shrinkray.methods import get_method

    try:
        return get_method(name).title if name else "the method"
    except Exception:  # noqa: BLE001 - an unknown name is shown as it is
        return str(name)


def _titled(text: str, names: list[str]) -> str:
    """A hint's sentence with each method named as the Shrink page's list shows it ("Weights-only 8-bit")."""
    import re

    for name in names:
        text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", f'"{_method_title(name)}"', text)
    return text


#: How the app words the engine's advice hints (``shrinkray.verdict.advice.Hint``): as the app's own controls,
#: never as command-line flags. One entry per ``shrinkray.verdict.advice.HINT_SETTINGS``. Plain text: the caller
#: escapes it for Markdown once, with the rest of the advice.
APP_ADVICE = {
    "exclude": lambda h: f"The tensors that move the outputs most are {_names(h.value)}: on the Shrink page, "
    f'add them to "Exclude" under "Options: {_method_title(h.method)}" to leave them in float',
    "auto": lambda h: 'or press "Smallest that passes" on the Shrink page, which chooses a precision per tensor',
    "methods": lambda h: f"{_titled(h.text, h.value)}: add {'it' if len(h.value) == 1 else 'them'} under "
    '"Methods to compare" on the Shrink page',
    "verdict": lambda h: "if the criteria are stricter than needed, loosen them knowingly: \"Parity verdict\" and "
    '"Extra criteria" under "Measurement settings" on the Shrink page',
    "min_elements": lambda h: 'to shrink small tensors too, lower "Min elements" in the method\'s options on the '
    "Shrink page, or keep the original",
    "culprits": lambda h: 'to find the tensors that hurt, turn on "When a variant fails, find the tensors that '
    'hurt" under "Measurement settings" on the Shrink page and run again',
    "own_inputs": lambda h: {
        "text": 'for a firm verdict, upload a .txt of text like what the model reads under "Inputs used for parity" on '
                'the Compare page (its prompts are windows of it)',
        "lines": 'for a firm verdict, upload a .txt of text like what the set reads, one input per line, under "Inputs '
                 'used for parity" on the Compare page',
        "clips": 'for a firm verdict, upload WAV recordings like what the set hears (one input each) under "Inputs '
                 'used for parity" on the Compare page',
    }.get(h.value, 'for a firm verdict, upload more inputs of your own (an .npz file, images or WAV files) under '
                   '"Inputs used for parity" on the Compare page'),
}


def advice_text(item) -> str:
    """One piece of the engine's advice in the app's words (its hints name the app's controls)."""
    return item.worded(APP_ADVICE)


def sample_descriptions() -> dict[str, str]:
    """One line per bundled sample (``- `name`: what it shows`` in sample_models/README.md), for the Model page."""
    import re


    try:
        text = (SAMPLES_DIR / "README.md").read_text(encoding="utf-8")
    except OSError:
        return {}
    return dict(re.findall(r"^- `([\w-]+)`: (.+)$", text, flags=re.MULTILINE))


def size_limit_text(mib: int) -> str:
    """An upload limit given in MiB, in the app's one size convention (binary units): ``1 GiB``, ``200 MiB``."""
    return f"{mib // 1024:,} GiB" if mib >= 1024 and mib % 1024 == 0 else f"{mib:,} MiB"


def app_message(exc: ShrinkRayError) -> str:
    hint = APP_HINTS.get(getattr(exc, "setting", ""), exc.hint)
    return app_words(without_server_paths(f"{exc.problem}. {hint}." if hint else f"{exc.problem}."))


def _option_labels() -> dict[str, str]:
    from shrinkray.methods import all_methods

    labels = {f.name.replace("_", "-"): _label(f.name) for spec in all_methods()
              for f in dataclasses.fields(spec.options_type)}  # fmt: skip
    return labels | PAGE_CONTROLS


#: Command-line flags whose setting is a control on one of the app's pages (e.g. in a provider's notes).
PAGE_CONTROLS = {
    "price-per-gb": "Custom flat price (Provider, on the Pricing page)",
    "free-gib": "Free GiB per month",
    "downloads": "Downloads per month",
    "growth": "Growth per month (%)",
    "delivery": "Delivery",
}


def app_words(text: str) -> str:
    """Engine text in the app's words: a method option named as its command-line flag (``--form``,
    ``--exclude``) becomes the control's label in quotes ("Form", "Exclude"), as the Shrink page shows it."""
    import re

    labels = _option_labels()

    def word(match: re.Match[str]) -> str:
        label = labels.get(match.group(1))
        return f'"{label}"' if label else match.group(0)

    return re.sub(r"(?<![\w-])--([a-z][a-z0-9-]*)", word, text)


def without_server_paths(text: str) -> str:
    """Text with the server's folders cut from every path (``/tmp/shrinkray-session-x/samples/in.npz`` ->
    ``in.npz``): users see their own file names, never where the server keeps them."""
    import os
    import re
    import tempfile
    from pathlib import Path


    roots = {str(SAMPLES_DIR), str(Path(tempfile.gettempdir()).resolve()), tempfile.gettempdir(), os.getcwd()}
    for root in sorted((r.rstrip("/\\") for r in roots if r.strip("/\\")), key=len, reverse=True):
        text = re.sub(re.escape(root) + r"(?:[/\\][^/\\\s'\"]+)*[/\\]", "", text)
    return text


@contextlib.contextmanager
def friendly_errors(action: str) -> Iterator[None]:
    """Show what went wrong and what to do; never a traceback in the page."""
    try:
        yield
    except TooManyRuns as exc:  # not a failure: the visitor's own runs are going (one sentence, nothing before it)
        st.warning(md(app_message(exc)), icon=":material/hourglass_top:")
    except ShrinkRayError as exc:
        st.error(md(f"{action} failed: {app_message(exc)}"), icon=":material/error:")
    except Exception as exc:
        log.exception("unexpected error during %s", action)
        st.error(
            f"{action} failed because of an unexpected {type(exc).__name__}. This is a bug in Shrink Ray "
            "Studio, not in your model; the details were written to the server log. Try another method "
            "or model meanwhile.",
            icon=":material/bug_report:",
        )


#: Words an option's name holds that are written otherwise than capitalized ("Gptq" read as a typo).
_LABEL_WORDS = {"gptq": "GPTQ", "int8": "8-bit", "awq": "AWQ"}


def _label(name: str) -> str:
    words = name.split("_")
    words = [_LABEL_WORDS.get(w, w) for w in words]
    text = " ".join(words)
    return text if words[0] in _LABEL_WORDS.values() else text[:1].upper() + text[1:]


def _initial(default: Any, kind: str, has_choices: bool) -> Any:
    """An option's default as its widget holds it (a list is comma-separated text)."""
    if kind == "bool":
        return bool(default)
    if has_choices:
        return default
    if kind == "int":
        return int(default)
    if kind == "float":
        return float(default)
    return ",".join(map(str, default)) if isinstance(default, list) else str(default)


def method_controls(spec: MethodSpec, key: str) -> dict[str, Any]:
    """One widget per option field; returns only the values that differ from the defaults."""
    chosen: dict[str, Any] = {}
    kinds = spec.options_type.field_kinds()
    for f in dataclasses.fields(spec.options_type):
        meta = f.metadata
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        kind = kinds[f.name]
        widget_key = f"{key}:{spec.name}:{f.name}"
        help_text = meta.get("help", "")
        # kept across pages (app_ui.runs.keep_method_settings), seeded by a run link: the key holds the value
        session_setting(widget_key, _initial(default, kind, "choices" in meta))
        if kind == "bool":
            value = st.toggle(_label(f.name), help=help_text, key=widget_key)
        elif "choices" in meta:
            value = st.selectbox(_label(f.name), list(meta["choices"]), help=help_text, key=widget_key)
        elif kind == "int":
            value = int(
                st.number_input(
                    _label(f.name), min_value=meta.get("min"), max_value=meta.get("max"), step=1, help=help_text,
                    key=widget_key,
                )
            )
        elif kind == "float":
            value = float(st.number_input(_label(f.name), help=help_text, key=widget_key))
        else:
            text = st.text_input(_label(f.name), help=help_text, key=widget_key)
            value = [v.strip() for v in text.split(",") if v.strip()]
        if value != default:
            chosen[f.name] = value
    return chosen


def sidebar_model_badge() -> None:
    """Always show which model is loaded."""
    loaded = current_model()
    with st.sidebar:
        st.markdown("**Current model**")
        if loaded is None:
            st.caption("None yet: pick a sample or upload a file on the Model page.")
        else:
            st.markdown(f"**{md(loaded.name)}**  \n{format_bytes(loaded.file_bytes)} · sha256 {loaded.sha256[:12]}…")
            st.caption(md(st.session_state.get("model_source", "")))


def input_examples(model) -> tuple[str, str]:
    """Placeholders for the Compare page's dimension and range fields, from this model's own inputs: its
    free dimensions (named, or INPUT:AXIS) and its first input's name (generic examples misled on a CNN)."""
    from shrinkray.measure.inputs import signature

    sigs = signature(model) if model is not None else []
    dims: list[str] = []
    for sig in sigs:
        for axis, dim in enumerate(sig.shape):
            label = dim if isinstance(dim, str) else f"{sig.name}:{axis}" if dim is None else None
            if label and f"{label}=" not in "".join(dims):
                dims.append(f"{label}={4 if axis == 0 else 32}")
    first = sigs[0] if sigs else None
    integer = first is not None and first.dtype.kind in "iu"
    ranges = f"{first.name}={'0:1000' if integer else '0:1'}" if first is not None else "NAME=0:1"
    return "\n".join(dims[:3]) or "(every dimension is fixed)", ranges
