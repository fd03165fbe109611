"""``GET /metrics`` (solrace/net/metrics.py) exports exactly the series docs/server.md
names: prometheus_client's ``*_created`` gauges, one per counter and histogram, each
repeating its counter's HELP, were 13 undocumented series (the operator audit)."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from solrace.net.server import RaceServer
from solrace.rooms.node import Node
from solrace.store import Store

from tests.support.redis import REDIS_URL

DOCS = Path(__file__).resolve().parents[2] / "docs" / "server.md"


def _documented() -> set[str]:
    """Every ``solrace_…`` series docs/server.md names (suffix ``_total`` dropped: the
    family's name, as the parser gives it)."""
    names = set(re.findall(r"`(solrace_[a-z_]+)", DOCS.read_text()))
    return {name.removesuffix("_total") for name in names}


async def test_metrics_exports_the_documented_families_and_no_created_series() -> None:
    store = await Store.connect(REDIS_URL)  # not contacted: metrics read the node only
    try:
        text = RaceServer(Node(store, name="metrics"), "127.0.0.1", 0).metrics.render().decode()
    finally:
        await store.close()
    assert "_created" not in text
    families = {f.name for f in text_string_to_metric_families(text)}
    assert families == _documented(), (families - _documented(), _documented() - families)
