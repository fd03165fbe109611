"""The Redis user docs/deploy.md tells an operator to create ("A Redis user for
solrace"), exactly as written there, on a private Redis and a private Redis Cluster: a
node logged in as it starts (its start-up checks pass) and serves a whole race — a
certified deal, moves, a finish, a resignation, the result archived — and no Redis it
uses refused any command (``ACL LOG`` stays empty: a refusal the node survives, such as
``INFO`` or ``CONFIG GET``, would show only there).

The operator audit found the documented ACL (``-@dangerous``) refused ``ROLE``, which a
node on a Redis Cluster sends before every finish (to learn whether the room's master
has a replica to wait for): every finishing move was refused ``unavailable``, for ever,
and the racer could never finish."""

from __future__ import annotations

import asyncio
import logging
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from solrace.protocol import race_id
from solrace.store import Store, _commit

from tests.deploy.conftest import REPO, redis_cluster_sh
from tests.net.conftest import SOLVABLE_SECRET
from tests.rooms.conftest import started_node, started_race
from tests.support.race import archived_result, winning_moves
from tests.support.redis import redis_process
from tests.support.server_process import solrace_server

PASSWORD = "PASSWORD"  # as the documented command writes it


def documented_acl() -> list[str]:
    """The rules of the ``ACL SETUSER solrace …`` line in docs/deploy.md."""
    text = (REPO / "docs" / "deploy.md").read_text()
    found = re.findall(r"^ACL SETUSER solrace (.+)$", text, flags=re.MULTILINE)
    assert len(found) == 1, found
    return shlex.split(found[0])


def _grant(ports: list[int]) -> None:
    for port in ports:
        with redis.Redis(port=port) as admin:
            admin.execute_command("ACL", "SETUSER", "solrace", "reset", *documented_acl())
            admin.execute_command("ACL", "LOG", "RESET")


def _refused(ports: list[int]) -> list[str]:
    """What each Redis refused the user since the grant: ``ACL LOG``."""
    seen = []
    for port in ports:
        with redis.Redis(port=port, decode_responses=True) as admin:
            for entry in admin.execute_command("ACL", "LOG"):
                record = dict(zip(entry[::2], entry[1::2], strict=True))
                seen.append(f"{port}: {record['reason']} {record['object']}")
    return seen


@contextmanager
def _standalone(tmp_path: Path) -> Iterator[tuple[str, list[int]]]:
    with redis_process(tmp_path / "redis") as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        yield f"redis://solrace:{PASSWORD}@127.0.0.1:{port}/0", [port]


@contextmanager
def _cluster(tmp_path: Path) -> Iterator[tuple[str, list[int]]]:
    ports = redis_cluster_sh("spare-ports", "3").split()
    directory = tmp_path / "cluster"
    try:
        redis_cluster_sh("start", str(directory), *ports)
        nodes = ",".join(f"127.0.0.1:{port}" for port in ports)
        yield f"redis+cluster://solrace:{PASSWORD}@{nodes}", [int(p) for p in ports]
    finally:
        redis_cluster_sh("stop", str(directory))


async def _race(url: str) -> None:
    """A whole race on a node logged in as ``url``'s user: Ann wins, Bob resigns."""
    store = await Store.connect(url, timeout=2.0)  # the default prefix, solrace:
    node = started_node(store)
    try:
        lobby, _started = await started_race(node)
        ann, bob = lobby.ann, lobby.bob
        moves = winning_moves(SOLVABLE_SECRET)
        for seq, move in enumerate(moves):
            reply = await ann.ask("move", seq=seq, move=move)
            assert reply.t == "moved", reply.d
        assert reply.d["status"] == "finished", reply.d
        assert (await bob.ask("resign")).t == "ok"
        over = await ann.until(lambda f: f.t == "race_over")
        assert ann.room is not None
        await archived_result(store, race_id(ann.room.room_id, str(over.d["commitment"])))
        # The start-up's SCAN of the leases (nodes of an earlier release) was answered.
        assert node.older_nodes == set()
    finally:
        await node.stop()
        await store.close()


@pytest.mark.parametrize("topology", ["standalone", "cluster"])
async def test_a_node_runs_a_whole_race_as_the_documented_redis_user(
    topology: str, tmp_path: Path
) -> None:
    start = _standalone if topology == "standalone" else _cluster
    with start(tmp_path) as (url, ports):
        await asyncio.to_thread(_grant, ports)
        # solrace-server's start-up checks (the user's access, the kind of Redis, its
        # eviction policy, the leases of older nodes: SCAN) pass, and it serves.
        async with solrace_server(args=["--redis-url", url]) as server:
            assert "durability: none" in server.log, server.log  # CONFIG GET is allowed
            assert "cannot check" not in server.log, server.log  # so is INFO
        await _race(url)
        assert await asyncio.to_thread(_refused, ports) == []


async def test_on_a_cluster_a_user_refused_info_still_finishes_and_is_told_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``+info`` a node cannot learn whether a room's master has a replica to
    wait for: its finishes are answered as on a master without one, and one warning
    says so (refused, the check must not refuse every finish as ``ROLE`` did)."""
    monkeypatch.setattr(_commit, "_said_refused", False)
    with _cluster(tmp_path) as (url, ports):
        await asyncio.to_thread(_grant, ports)
        for port in ports:
            with redis.Redis(port=port) as admin:
                admin.execute_command("ACL", "SETUSER", "solrace", "-info")
        with caplog.at_level(logging.WARNING, logger="solrace.store"):
            await _race(url)
    said = [r for r in caplog.records if "whether a master has a replica" in r.getMessage()]
    assert len(said) == 1, said
