"""Racer tokens: stored only as SHA-256 digests, with the racer's racer_joined (one
atomic step), looked up by digest."""

from __future__ import annotations

import pytest
from solrace.store import SeatClaim, Store, token_digest
from solrace.store.errors import VersionConflict

from .conftest import with_rooms


@pytest.fixture
async def store(store: Store) -> Store:
    """The conftest's store, with the rooms these tests write to made."""
    return await with_rooms(store)


async def test_set_and_lookup(store: Store) -> None:
    alice, bob = "alice-secret-token-0123456789", "bob-secret-token-9876543210"
    await store.append_event("r", b"alice joins", 0, token=("alice", token_digest(alice)))
    await store.append_event("r", b"bob joins", 1, token=("bob", token_digest(bob)))
    assert await store.racer_for_token("r", token_digest(alice)) == "alice"
    assert await store.racer_for_token("r", token_digest(bob)) == "bob"
    assert await store.racer_for_token("r", token_digest("guess")) is None
    assert await store.racer_for_token("other-room", token_digest(alice)) is None
    stored = await store._redis.hgetall(store.keys.room("r").tokens)
    assert all(alice.encode() not in v and bob.encode() not in v for v in stored.values())


async def test_a_token_is_stored_only_with_its_event(store: Store) -> None:
    """A join that loses the compare-and-append to another writes no token: it would
    land on the racer id the other join took."""
    await store.append_event("r", b"alice joins", 0, token=("2", token_digest("alice")))
    with pytest.raises(VersionConflict):
        await store.append_event("r", b"bob joins", 0, token=("2", token_digest("bob")))
    assert await store.racer_for_token("r", token_digest("alice")) == "2"
    assert await store.racer_for_token("r", token_digest("bob")) is None


async def test_token_can_be_replaced(store: Store) -> None:
    await store.append_event("r", b"joins", token=("alice", token_digest("old")))
    await store.append_event("r", b"joins again", token=("alice", token_digest("new")))
    assert await store.racer_for_token("r", token_digest("old")) is None
    assert await store.racer_for_token("r", token_digest("new")) == "alice"


@pytest.mark.parametrize("bad", ["plain-token", "A" * 64, "0" * 63, ""])
async def test_clear_tokens_are_refused(store: Store, bad: str) -> None:
    with pytest.raises(ValueError):
        await store.append_event("r", b"joins", token=("alice", bad))
    assert await store.version("r") == 0  # refused before anything was written


def test_token_digest() -> None:
    assert token_digest("abc") == token_digest(b"abc")
    assert token_digest("abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


async def test_a_seat_claim_names_its_room_for_a_while(store: Store) -> None:
    """The room a client-proposed token is being seated in, found by its digest alone
    (a resume whose create/join/quick reply was lost), and only for a while: the key
    expires, and holds the digest, never the token."""
    token = "proposed-by-the-client-0123456789"
    assert await store.claimed_seat(token_digest(token)) is None
    assert await store.claim_seat(token_digest(token), "r_1", at_ms=1_234, ttl_s=300)
    assert await store.claimed_seat(token_digest(token)) == SeatClaim("r_1", 1_234)
    # Taken once: another request proposing the token, for this room or another,
    # finds it held and writes nothing.
    assert not await store.claim_seat(token_digest(token), "r_1", at_ms=1_300, ttl_s=300)
    assert not await store.claim_seat(token_digest(token), "r_2", at_ms=1_300, ttl_s=300)
    assert await store.claimed_seat(token_digest(token)) == SeatClaim("r_1", 1_234)
    assert await store.claimed_seat(token_digest("another")) is None
    key = store.keys.seat(token_digest(token))
    assert 0 < await store._redis.ttl(key) <= 300
    assert token not in key
    await store.release_seat_claim(token_digest(token))  # its request was refused
    assert await store.claimed_seat(token_digest(token)) is None
    assert await store.claim_seat(token_digest(token), "r_2", at_ms=2_000, ttl_s=300)
    assert await store.claimed_seat(token_digest(token)) == SeatClaim("r_2", 2_000)
    with pytest.raises(ValueError):  # a raw token is never a key
        await store.claim_seat(token, "r_1", at_ms=0, ttl_s=300)
