"""Key layout: one hash slot per room, prefix in front, no way to break the tag."""

from __future__ import annotations

import pytest
from redis.crc import key_slot
from solrace.store import Keys


def test_room_keys_share_one_cluster_slot() -> None:
    rk = Keys("solrace:").room("r-42")
    names = [*rk.fixed(), rk.log("alice"), rk.places("race"), rk.finish_time("race")]
    assert all(n.startswith("solrace:{room:r-42}:") for n in names)
    assert len({key_slot(n.encode()) for n in names}) == 1
    assert rk.meta == "solrace:{room:r-42}:meta"
    assert rk.events == "solrace:{room:r-42}:events"
    assert rk.log("alice") == "solrace:{room:r-42}:log:alice"
    assert rk.places("race") == "solrace:{room:r-42}:places:race"
    assert rk.finish_time("race") == "solrace:{room:r-42}:finish_at:race"


def test_global_keys_carry_prefix_and_no_tag() -> None:
    keys = Keys("p:")
    assert keys.code("ABCD") == "p:code:ABCD"
    assert keys.listed == "p:rooms:listed"
    assert keys.result("race-1") == "p:result:race-1"
    assert "{" not in keys.code("ABCD") + keys.listed + keys.result("x")


@pytest.mark.parametrize("bad", ["", "a{b", "a}b", "a b", "x" * 201])
def test_bad_names_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        Keys().room(bad)
    with pytest.raises(ValueError):
        Keys().room("ok").log(bad)


def test_prefix_with_braces_is_refused() -> None:
    with pytest.raises(ValueError):
        Keys("{oops}:")


def test_the_leases_pattern_matches_this_prefix_only() -> None:
    """Store.older_nodes scans for ``<prefix>node:*``: a prefix's glob characters are
    escaped, so that ``a*:`` does not scan another deployment's ``ab:`` leases."""
    keys = Keys("a*[x]?\\:")
    assert keys.leases == "a\\*\\[x\\]\\?\\\\:node:*"
    assert keys.node_of(keys.lease("n-1")) == "n-1"


def test_a_key_whose_round_is_not_of_the_digits_0_to_9_has_no_round() -> None:
    """``'²'.isdigit()``: a keyset member ``log:²`` went to ``int()``, a ValueError in
    the middle of appending an event (store.append_event's trim); digits are 0-9
    (solrace.digits), as everywhere."""
    rk = Keys("p:").room("r")
    assert rk.round_of(rk.log("3:2")) == 3
    assert rk.round_of(rk.log("²:2")) is None
    assert rk.round_of(rk.places("١")) is None  # int() would read it as 1
