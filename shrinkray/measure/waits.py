"""How long a visitor waits for a file to download on named connections (3G, 4G, cable...).

The profiles and their sources are data (``connections.toml``). The model is the one the issue
and the web-performance tools use for a single request: ``bytes * 8 / bandwidth + one round trip``.
It leaves out TCP slow start and TLS set-up, which add the same few round trips to every file, so
the ratio between two files is what it says.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

from shrinkray.errors import OptionError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the tomli backport (a dependency there)
    import tomli as tomllib  # type: ignore[no-redef]

_DATA = "connections.toml"


@dataclass(frozen=True)
class Connection:
    """A named connection: its download bandwidth (bits per second) and round-trip time."""

    id: str
    name: str
    down_bps: int
    rtt_ms: float
    source: str
    checked: str

    def describe(self) -> str:
        """'4G (9 Mbps, 170 ms)'."""
        mbps = self.down_bps / 1e6
        return f"{self.name} ({mbps:g} Mbps, {self.rtt_ms:g} ms)"


@functools.cache
def _load() -> tuple[str, tuple[Connection, ...]]:
    raw = tomllib.loads(resources.files("shrinkray.measure").joinpath(_DATA).read_text(encoding="utf-8"))
    found = []
    for cid, entry in raw["connections"].items():
        found.append(Connection(cid, str(entry["name"]), int(entry["down_bps"]), float(entry["rtt_ms"]),
                                str(entry["source"]), str(entry["checked"])))  # fmt: skip
    return str(raw["default"]), tuple(found)


def connections() -> tuple[Connection, ...]:
    """Every profile, slowest first as listed in the data file."""
    return _load()[1]


def get_connection(cid: str | None = None) -> Connection:
    """A profile by id (``4g``, ``3g``...); the default profile without one."""
    wanted = (cid or _load()[0]).strip().lower()
    for connection in connections():
        if connection.id == wanted:
            return connection
    known = ", ".join(c.id for c in connections())
    raise OptionError(f"'{cid}' is not a known connection", f"Choose one of: {known}")


def download_seconds(size_bytes: int, connection: Connection) -> float:
    """Seconds to download ``size_bytes`` on ``connection``: transfer time plus one round trip."""
    if size_bytes < 0:
        raise ValueError("a size cannot be negative")
    return size_bytes * 8 / connection.down_bps + connection.rtt_ms / 1000
