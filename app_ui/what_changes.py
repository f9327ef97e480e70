"""What changes: a finished run's outputs side by side, the original's beside a variant's, worst inputs first.

The engine keeps the examples (:attr:`VariantResult.examples`, measure/what_changes.py) and draws them
(report/changes.py, escaped HTML without scripts); this section only picks the variant, the recommended one
first.
"""

from __future__ import annotations

import streamlit as st

from shrinkray.measure.results import Comparison
from shrinkray.report.changes import CSS, examples_html
from shrinkray.text_safety import streamlit_markdown as md

VARIANT_KEY = "what-changes:variant"
SHOWN_KEY = "what-changes:shown"
#: How many inputs a visitor may see per output; the first is the default.
SHOWN = (3, 1, 5)


def what_changes(c: Comparison, recommended: str | None) -> str | None:
    """The section; returns the variant it shows (None when no variant has examples)."""
    shown = [r for r in c.variants if r.ok and r.examples]
    if not shown:
        return None
    keys = [r.key for r in shown]
    st.markdown("#### What changes")
    if st.session_state.get(VARIANT_KEY) not in keys:
        st.session_state[VARIANT_KEY] = recommended if recommended in keys else keys[0]
    row = st.container(horizontal=True, gap="large", vertical_alignment="bottom")  # wraps on a narrow page
    picker = row.container(key="what-changes-picker", width=360)
    key = picker.selectbox("Variant", keys, key=VARIANT_KEY,
                       format_func=lambda k: f"{k} (recommended)" if k == recommended else k,
                       help="Its outputs beside the original's, on the inputs the verdict was measured on: the "
                       "inputs where it differs most first, each output judged in its own terms")  # fmt: skip
    result = c.get(key)
    if st.session_state.get(SHOWN_KEY) not in SHOWN:
        st.session_state[SHOWN_KEY] = SHOWN[0]
    most = row.radio("Inputs shown per output", sorted(SHOWN), key=SHOWN_KEY, horizontal=True, width="content")
    used = f"the {result.parity.samples} inputs" if result.parity is not None else "the inputs"
    st.caption(md(f"The inputs where it differs most from the original come first, of {used} the verdict was "
                  "measured on; what differs is marked."))  # fmt: skip
    with st.container(border=True, key="what-changes"):
        body = "".join(examples_html(oe, result.key, most) for oe in result.examples)
        st.html(f"<style>{CSS}</style>{body}")
    return key
