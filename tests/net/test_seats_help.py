"""``solrace-server --help`` says how ``--seats-per-address`` counts an IPv6 client.

A public room's seats count an IPv6 client by its /56 (``admission.SEAT_IPV6_PREFIX``:
a home line is delegated a /56 and held a seat per /64 of it), where connections count
it by its /64 (``admission.IPV6_PREFIX``). docs/server.md, docs/protocol.md §14 and
docs/fairness.md say /56; the flag's help said seats are "counted as connections are",
right after ``--max-connections-per-address`` says an IPv6 address counts by its /64.
"""

from __future__ import annotations

from solrace.net.admission import IPV6_PREFIX, SEAT_IPV6_PREFIX
from solrace.net.main import build_parser


def _help_of(flag: str) -> str:
    for action in build_parser()._actions:
        if flag in action.option_strings:
            return " ".join((action.help or "").split())
    raise AssertionError(f"no {flag} in solrace-server's parser")


def test_seats_help_names_the_ipv6_prefix_seats_count_by() -> None:
    assert SEAT_IPV6_PREFIX != IPV6_PREFIX
    text = _help_of("--seats-per-address")
    assert f"/{SEAT_IPV6_PREFIX}" in text, text
    assert "counted as connections are;" not in text, text
