"""Who a visitor of the app is: a signed cookie, with the client's address as the fallback.

Runs are taken in turn per visitor and each visitor has a cap on live runs (:mod:`shrinkray.runs.fairness`),
so the app needs a name for "the same visitor" that a visitor cannot change at will to get more turns:

- The app gives each browser a cookie holding a random visitor id and its HMAC-SHA256 under a server secret
  (:class:`VisitorKeys`). A cookie whose signature does not match (edited, forged, from another server) is
  ignored, and the browser gets a new one: nobody can pick someone else's id or mint ids without the secret.
- A session whose browser presented no valid cookie (its first visit, cookies off, a script) is the visitor of
  its client address for its whole life; its browser gets a cookie for its next sessions (tabs, reloads).
- The command line and the Python API are one visitor, ``local``.

The secret is 32 random bytes in ``visitor.key`` in the run store's folder, made once with mode 0600 (every
replica sharing the store shares it) and refused, like the store itself, when it is a link, another user's or
writable by others. Deleting it makes every cookie invalid (each browser then gets a new identity).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from shrinkray.errors import OptionError
from shrinkray.runs.store import StoreNotPrivate, refuse_unless_private

#: The cookie's name, and how long a browser keeps it (seconds).
COOKIE = "shrinkray_visitor"
COOKIE_MAX_AGE_S = 365 * 86400
#: The secret's file in the run store's folder.
KEY_FILE = "visitor.key"
KEY_BYTES = 32

_ID = re.compile(r"[A-Za-z0-9_-]{22}")
_CONTEXT = b"shrinkray-visitor-v1:"


@dataclass(frozen=True)
class Visitor:
    """A session's visitor: ``key`` names it for the queue and the store (``cookie:<id>``, ``address:<ip>``);
    ``set_cookie`` is the signed cookie to give the browser ("" when the one it sent is valid)."""

    key: str
    set_cookie: str = ""


class VisitorKeys:
    """Signs and checks visitor cookies with the secret kept in ``root`` (the run store's folder)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.path = Path(root) / KEY_FILE
        self._key = _load_or_make(self.path)

    def _mac(self, visitor_id: str) -> str:
        digest = hmac.new(self._key, _CONTEXT + visitor_id.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def sign(self, visitor_id: str) -> str:
        """The cookie value for ``visitor_id``: ``<id>.<signature>``."""
        if not _ID.fullmatch(visitor_id):
            raise ValueError("a visitor id is 22 URL-safe characters")
        return f"{visitor_id}.{self._mac(visitor_id)}"

    def verify(self, cookie: object) -> str | None:
        """The visitor id a cookie carries when its signature is this server's, else None."""
        if not isinstance(cookie, str) or len(cookie) > 200:
            return None
        visitor_id, dot, mac = cookie.strip().partition(".")
        if not dot or not _ID.fullmatch(visitor_id):
            return None
        return visitor_id if hmac.compare_digest(mac.encode(), self._mac(visitor_id).encode()) else None

    def new_cookie(self) -> tuple[str, str]:
        """A new visitor: (its id, its signed cookie)."""
        visitor_id = secrets.token_urlsafe(16)
        return visitor_id, self.sign(visitor_id)

    def identify(self, cookie: str | None, address: str | None) -> Visitor:
        """The visitor of a session that sent ``cookie`` (or none) from ``address`` (or an unknown one)."""
        visitor_id = self.verify(cookie)
        if visitor_id is not None:
            return Visitor(f"cookie:{visitor_id}")
        _new_id, signed = self.new_cookie()
        return Visitor(f"address:{(address or '').strip()[:100] or 'unknown'}", set_cookie=signed)


#: Reverse proxies whose ``X-Forwarded-For`` is believed (addresses or networks, comma-separated): behind one,
#: every cookieless visitor otherwise has the proxy's address and they all share one cap.
TRUSTED_PROXIES_ENV = "SHRINKRAY_TRUSTED_PROXIES"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted_proxies(environ: Mapping[str, str] | None = None) -> tuple[Network, ...]:
    """The networks of ``SHRINKRAY_TRUSTED_PROXIES`` (none when unset); a malformed entry is refused in words."""
    raw = (os.environ if environ is None else environ).get(TRUSTED_PROXIES_ENV, "")
    networks = []
    for entry in filter(None, (part.strip() for part in raw.split(","))):
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise OptionError(
                f"{TRUSTED_PROXIES_ENV} holds {entry[:60]!r}, which is not an IP address or network",
                "Give addresses or networks separated by commas, e.g. 127.0.0.1,10.0.0.0/8",
            ) from None
    return tuple(networks)


def _trusted(address: str, proxies: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip.version == net.version and ip in net for net in proxies)


def client_address(peer: str | None, forwarded_for: str | None, proxies: tuple[Network, ...]) -> str | None:
    """The visitor's address: the connection's own (``peer``; None is this machine), or, when that is a trusted
    proxy, the last address in ``X-Forwarded-For`` that is not one (proxies append, so addresses left of it are
    whatever the client wrote and are not believed). None when the peer is this machine and it is not trusted."""
    local = peer is None and any(_trusted(loopback, proxies) for loopback in ("127.0.0.1", "::1"))
    if not local and (peer is None or not _trusted(peer, proxies)):
        return peer
    hops = [hop.strip() for hop in (forwarded_for or "").split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop if _is_address(hop) else peer
    return peer


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _load_or_make(path: Path) -> bytes:
    """The secret: read when it exists (after checking it is private), else made once with mode 0600."""
    if not os.path.lexists(path):
        data = secrets.token_bytes(KEY_BYTES)
        with contextlib.suppress(FileExistsError):  # another process (a replica) made it first: read theirs
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
    refuse_unless_private(path, "The visitors' secret")
    if hasattr(os, "getuid") and os.lstat(path).st_mode & 0o077:
        raise StoreNotPrivate(f"The visitors' secret {path} can be read by other users",
                              f"Make it private (chmod 600 {path}), or delete it to make a new one")  # fmt: skip
    with open(path, "rb") as handle:
        key = handle.read(4096)
    if len(key) < 16:  # cut short by a crash while it was being made: a new one (old cookies become invalid)
        os.unlink(path)
        return _load_or_make(path)
    return key


__all__ = ["COOKIE", "COOKIE_MAX_AGE_S", "Visitor", "VisitorKeys"]
