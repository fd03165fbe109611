"""What a room leaves in Redis once nobody can come back to it: every key of it,
its global join code included, expires with it. A soak audit (docs/store.md,
"Retention") found every ``code:<CODE>`` key on its 24-hour lifetime cap while the
room's own keys were on their hour or ten minutes: the code only ever got longer,
so each room left a key behind for a day. A room everyone has left is final — it
takes no join, no rematch, nothing that gives it a longer expiry — so its code
follows it down. Through the room core with fake peers on every store."""

from __future__ import annotations

from solrace.rooms.node import EMPTY_ROOM_TTL_S, Node

from .conftest import Backend, FakePeer


async def _code_ttl_ms(node: Node, code: str) -> int:
    return int(await node.store._redis.pttl(node.store.keys.code(code)))


async def test_a_raced_room_everyone_left_takes_its_code_with_it(backend: Backend) -> None:
    node = await backend.node()
    ann, bob = FakePeer(node), FakePeer(node)
    created = await ann.ask("create", variant="yukon", name="Ann", private=True)
    code = str(created.d["code"])
    assert (await bob.ask("join", code=code, name="Bob")).t == "joined"
    for peer in (ann, bob):
        assert (await peer.ask("ready", ready=True)).t == "ok"
    await ann.until(lambda f: f.t == "started", timeout=30)
    for peer in (ann, bob):
        assert (await peer.ask("resign")).t == "ok"
    await ann.until(lambda f: f.t == "race_over")
    assert (await ann.ask("leave")).t == "ok"
    # One racer left: a rematch may still give the room its day back (the code too).
    assert await _code_ttl_ms(node, code) > EMPTY_ROOM_TTL_S * 1000
    assert (await bob.ask("leave")).t == "ok"
    assert 0 < await _code_ttl_ms(node, code) <= EMPTY_ROOM_TTL_S * 1000


async def test_a_lobby_its_creator_left_takes_its_code_with_it(backend: Backend) -> None:
    node = await backend.node()
    ann = FakePeer(node)
    created = await ann.ask("create", variant="yukon", name="Ann")
    code = str(created.d["code"])
    assert (await ann.ask("leave")).t == "ok"
    assert 0 < await _code_ttl_ms(node, code) <= EMPTY_ROOM_TTL_S * 1000
    other = FakePeer(node)
    refused = await other.ask("join", code=code, name="Bob")
    assert refused.d.get("code") == "unknown_room", refused.d
