"""The store decodes replies the same under RESP2 and RESP3 (the URL may choose either)."""

from __future__ import annotations

import pytest
from solrace.store import Finish, Store, token_digest

from tests.support.redis import REDIS_URL, new_prefix

from .conftest import _delete_prefix, make_rooms, pairs, triples


@pytest.mark.parametrize("protocol", [2, 3])
async def test_same_results_under_both_protocols(protocol: int) -> None:
    prefix = new_prefix()
    sep = "&" if "?" in REDIS_URL else "?"
    store = await Store.connect(f"{REDIS_URL}{sep}protocol={protocol}", prefix=prefix)
    try:
        await make_rooms(store, "r")
        assert await store.append_event("r", b"e1") == 1
        move = await store.append_move(
            "r", "a", 0, b"m", b"e2", Finish("race", (b"fin",), 1000), round_no=1
        )
        assert (move.accepted, move.version, move.place) == (True, 2, 1)
        assert pairs(await store.events_since("r", 0)) == [(1, b"e1"), (2, b"e2"), (3, b"fin")]
        assert triples(await store.tail({"r": 0, "s": 0}, block_ms=100)) == [
            ("r", 1, b"e1"),
            ("r", 2, b"e2"),
            ("r", 3, b"fin"),
        ]
        await store.append_event("r", b"e3", token=("a", token_digest("t")))
        assert await store.racer_for_token("r", token_digest("t")) == "a"
        await store.create_room("r", "C", b"meta", listed=True, now_ms=5)
        assert await store.listed_rooms() == ["r"]
        await store.expire_room("r", 60)
        assert await store.move_log("r", "a") == [b"m"]
    finally:
        await store.close()
        await _delete_prefix(prefix)
