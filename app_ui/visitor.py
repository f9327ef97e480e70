"""Who this session's visitor is (runs are taken in turn per visitor, and each has a cap on live runs).

The engine signs and checks the cookie (:mod:`shrinkray.runs.visitors`); this module reads it from the
session's request (``st.context.cookies``), falls back to the client's address when the browser sent none
that is valid, and gives the browser a signed cookie through a small component of our own (served by this
app, no CDN). The component sends back the cookie the browser holds once it is set, and the session becomes
that visitor at once, so every tab of one browser, the first included, is one visitor.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
import streamlit.components.v1 as components

from shrinkray.errors import OptionError
from shrinkray.runs.visitors import COOKIE, COOKIE_MAX_AGE_S, VisitorKeys, client_address, trusted_proxies

COMPONENT_DIR = Path(__file__).resolve().parent / "visitor_component"
_component = components.declare_component("visitor_cookie", path=str(COMPONENT_DIR))

#: Session keys (only this module reads or writes them).
_KEY, _OFFER, _REPLACE = "visitor", "visitor_offer", "visitor_replace"


@st.cache_resource(show_spinner=False)
def visitor_keys(root: str) -> VisitorKeys:
    """The server's signing secret, kept in the run store's folder ``root`` (shared by replicas sharing it)."""
    return VisitorKeys(root)


def _cookie_sent() -> str | None:
    try:
        value = st.context.cookies.get(COOKIE)
    except Exception:  # noqa: BLE001 - no request behind this session (a test harness): no cookie
        return None
    return value if isinstance(value, str) else None


def _address() -> str | None:
    """The client's address (None on this machine itself, or with no request behind the session); behind a
    proxy named in SHRINKRAY_TRUSTED_PROXIES, the address it forwards."""
    try:
        peer = st.context.ip_address
        forwarded = st.context.headers.get("X-Forwarded-For")
    except Exception:  # noqa: BLE001 - no request behind this session
        return None
    peer = peer if isinstance(peer, str) else None
    try:
        return client_address(peer, forwarded if isinstance(forwarded, str) else None, trusted_proxies())
    except OptionError as exc:  # the server's setting is wrong: its operator reads why, visitors go on by address
        st.error(f"{exc.problem}. {exc.hint}.")
        return peer


def current_visitor(keys: VisitorKeys) -> str:
    """This session's visitor (``cookie:<id>``, or ``address:<ip>`` until the browser holds a valid cookie)."""
    state = st.session_state
    if _KEY not in state:
        sent = _cookie_sent()
        found = keys.identify(sent, _address())
        state[_KEY], state[_OFFER] = found.key, found.set_cookie
        state[_REPLACE] = bool(found.set_cookie and sent)  # it sent one that is not ours: replaced, not kept
    return state[_KEY]


def keep_visitor_cookie(keys: VisitorKeys) -> None:
    """Every page (from ``app.py``): give the browser its signed cookie when it has none that is valid, and
    take the cookie it holds as this session's visitor once it is set. Draws nothing once that is done."""
    current_visitor(keys)
    state = st.session_state
    offer = state.get(_OFFER, "")
    if not offer:
        return
    with st.sidebar:
        held = _component(name=COOKIE, cookie=offer, replace=bool(state.get(_REPLACE)), max_age=COOKIE_MAX_AGE_S,
                          key="visitor_cookie", default=None)  # fmt: skip
    if not held:
        return
    visitor_id = keys.verify(held)
    if visitor_id is None:
        state[_REPLACE] = True  # it holds one that is not ours (set by another tab meanwhile?): the next render replaces it
        return
    state[_KEY], state[_OFFER] = f"cookie:{visitor_id}", ""


__all__ = ["current_visitor", "keep_visitor_cookie", "visitor_keys"]
