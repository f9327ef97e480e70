"""The client's address behind a reverse proxy: X-Forwarded-For is believed only from a trusted proxy, and only
its last address that is not a proxy's (addresses to its left are whatever the client wrote)."""

from __future__ import annotations

import pytest

from shrinkray.errors import OptionError
from shrinkray.runs.visitors import TRUSTED_PROXIES_ENV, client_address, trusted_proxies

PROXIES = trusted_proxies({TRUSTED_PROXIES_ENV: "10.0.0.0/8, 192.168.1.5"})


@pytest.mark.parametrize(
    ("peer", "forwarded", "proxies", "expected"),
    [
        ("203.0.113.7", None, (), "203.0.113.7"),  # no proxy: the connection's address
        ("10.1.2.3", "198.51.100.9", (), "10.1.2.3"),  # a proxy not trusted: its header is not believed
        ("10.1.2.3", "198.51.100.9", PROXIES, "198.51.100.9"),
        ("10.1.2.3", "6.6.6.6, 198.51.100.9, 192.168.1.5", PROXIES, "198.51.100.9"),  # a spoofed first hop ignored
        ("203.0.113.7", "198.51.100.9", PROXIES, "203.0.113.7"),  # a client's own header is not believed
        ("10.1.2.3", "", PROXIES, "10.1.2.3"),  # the proxy forwarded nothing
        ("10.1.2.3", "not-an-address", PROXIES, "10.1.2.3"),
        ("10.1.2.3", "10.9.9.9", PROXIES, "10.1.2.3"),  # only proxies on the way
        (None, "198.51.100.9", (), None),  # this machine, loopback not trusted
        (None, "198.51.100.9", trusted_proxies({TRUSTED_PROXIES_ENV: "127.0.0.1"}), "198.51.100.9"),  # nginx here
        (None, "2001:db8::1", trusted_proxies({TRUSTED_PROXIES_ENV: "::1"}), "2001:db8::1"),
    ],
)
def test_the_visitors_address(peer, forwarded, proxies, expected):
    assert client_address(peer, forwarded, proxies) == expected


def test_no_setting_trusts_no_proxy_and_a_malformed_one_is_refused_in_words():
    assert trusted_proxies({}) == ()
    with pytest.raises(OptionError) as caught:
        trusted_proxies({TRUSTED_PROXIES_ENV: "10.0.0.0/8, nginx"})
    assert "SHRINKRAY_TRUSTED_PROXIES holds 'nginx', which is not an IP address or network" in str(caught.value)
    assert "e.g. 127.0.0.1,10.0.0.0/8" in str(caught.value)
