"""The headline card at the top of a finished run: size as served, the wait on a connection, the money a
year and the one verdict sentence, with the same as one line of text to copy."""

from __future__ import annotations

from decimal import Decimal

import streamlit as st

from shrinkray import pricing
from shrinkray.errors import ShrinkRayError
from shrinkray.measure.results import Comparison
from shrinkray.measure.waits import connections, get_connection
from shrinkray.text_safety import streamlit_markdown as md
from shrinkray.units import format_bytes, format_seconds
from shrinkray.verdict.headline import DEFAULT_DOWNLOADS, Headline, default_pricing, headline_of

CONNECTION_KEY = "headline:connection"


def pricing_choice() -> pricing.PricingChoice:
    """The Pricing page's provider, downloads and delivery when the visitor set them; else the defaults."""
    ss = st.session_state
    try:
        chosen = ss.get("pricing:provider")
        provider = pricing.get_provider(chosen if chosen and chosen != pricing.CUSTOM else None)
        downloads = Decimal(int(ss.get("pricing:downloads", DEFAULT_DOWNLOADS)))
        return pricing.PricingChoice(provider, downloads, ss.get("pricing:delivery", "brotli"))
    except (ShrinkRayError, ValueError, TypeError):
        return default_pricing()


def headline_card(c: Comparison) -> Headline:
    """Draw the card; returns the headline it drew (the page's tests read it)."""
    ids = [conn.id for conn in connections()]
    if st.session_state.get(CONNECTION_KEY) not in ids:
        st.session_state[CONNECTION_KEY] = get_connection().id
    h = headline_of(c, pricing_choice(), st.session_state[CONNECTION_KEY])
    with st.container(border=True):
        if h.variant is None:
            st.markdown(f"#### Keep the original: {md(c.name)}")
        else:
            st.markdown(f"#### {md(c.name)} → {md(h.variant)}")
        row = st.container(horizontal=True, gap="large")  # wraps on a narrow page instead of clipping values
        flat = {"width": "content", "delta_color": "off", "delta_arrow": "off"}
        if h.variant_bytes is not None and h.original_bytes:
            row.metric(f"Size as served ({h.delivery})", format_bytes(h.variant_bytes),
                       f"−{h.reduction:.0%} from {format_bytes(h.original_bytes)}", **flat,
                       help="Bytes a visitor downloads, compressed as the server sends them (MiB = 2^20 bytes)")  # fmt: skip
        elif h.original_bytes is not None:
            row.metric(f"Size as served ({h.delivery})", format_bytes(h.original_bytes), **flat)
        w = h.wait
        if w is not None:
            faster = None if w.variant_s is None else f"{w.speedup:.1f}x faster than {format_seconds(w.original_s)}"
            row.metric(f"Download on {w.connection.name}", format_seconds(w.variant_s or w.original_s), faster, **flat,
                       help=f"{w.connection.describe()}: size ÷ bandwidth + one round trip. Source: {w.connection.source}")  # fmt: skip
        if h.saving_per_year is not None:
            row.metric("Saved a year", pricing.format_money(h.saving_per_year, h.currency), **flat,
                       help=f"At {h.pricing_text}: the Pricing page's provider and downloads (its defaults until "
                       "you change them)")  # fmt: skip
        row.metric("Its verdict", h.verdict_label if h.variant else "Keep the original", **flat)
        if h.pricing_text:
            st.caption(md(f"Money at {h.pricing_text} (set on the Pricing page)."))
        st.markdown(md(h.verdict_sentence if h.variant else h.reason))
        if h.ready_text():
            st.markdown(md(h.ready_text()[0].upper() + h.ready_text()[1:] + "."))
        st.radio("Connection", ids, key=CONNECTION_KEY, horizontal=True,
                 format_func=lambda cid: get_connection(cid).describe())  # fmt: skip
        with st.expander("Copy as text"):
            st.code(h.text(), language=None, wrap_lines=True)
    return h
