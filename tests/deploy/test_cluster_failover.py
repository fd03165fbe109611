"""A Redis Cluster master dies mid-race and its replica takes over (docs/deploy.md,
"Redis Cluster and failover"), at the store level where the outcome is exact.

A private cluster of three masters with one replica each (deploy/redis-cluster.sh,
AOF with appendfsync always, spare ports) takes a stream of moves for one room — as a
racer sends them, one at a time, retrying after ``unavailable`` with the same
sequence number. The room's master is SIGKILLed mid-stream. What must hold: the moves
in flight get ``StoreUnavailable`` (never a wrong answer), the retries with the same
sequence number succeed once the replica is promoted — a few seconds — and the log
then holds every acknowledged move exactly once, in order, with gap-free versions.
It also guards a redis-py gap the store works around: without retries, a pipeline
that cannot reach a node never refreshed the slot map, so the group commit kept
writing to the dead master forever.

A finish decides a place, so it is answered only once the replica holds it: with the
replica stopped (SIGSTOP) the finish waits, and the master killed right after the
answer, the promoted replica still has the finish and its place. A finish redirected
(MOVED) claims only the replicas of the master that ran it, none when it has none."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest
import redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from solrace.rooms.counters import Tally
from solrace.store import Finish, Store, StoreUnavailable
from solrace.store._commit import REPLICA_WAIT_MS

from tests.deploy.conftest import DEPLOY, redis_cluster_sh
from tests.net.conftest import SOLVABLE_SECRET
from tests.rooms.conftest import started_node, started_race
from tests.support.race import winning_moves
from tests.support.server_process import SERVER_SCRIPT

T = TypeVar("T")
MOVES = 120
KILL_AT = 40


async def _room_master(store: Store, room_id: str) -> tuple[RedisCluster, ClusterNode]:
    """The store's cluster client and the master of the room's keys (the test asks
    where the room lives, to stop or kill that master or its replica). The room is
    created (its meta key): the store writes nothing to a room without one."""
    await store.save_meta(room_id, b"meta")
    rc = store._redis
    assert isinstance(rc, RedisCluster)
    await rc.initialize()
    master = rc.get_node_from_key(store.keys.room(room_id).meta)
    assert master is not None
    return rc, master


async def _race_through_a_failover(url: str, cluster_dir: Path) -> dict[str, float]:
    store = await Store.connect(url, prefix="failover:", timeout=1.0)
    try:
        rc, master = await _room_master(store, "r")
        seq, unavailable, outage = 0, 0, 0.0
        killed_at = 0.0
        while seq < MOVES:
            if seq == KILL_AT and not killed_at:
                pid = int((cluster_dir / str(master.port) / "redis.pid").read_text())
                os.kill(pid, signal.SIGKILL)
                killed_at = time.monotonic()
            try:
                result = await store.append_move(
                    "r", "ann.1", seq, f"m{seq}".encode(), b"p", round_no=1
                )
            except StoreUnavailable:
                unavailable += 1
                assert time.monotonic() - (killed_at or time.monotonic()) < 30, "no failover"
                await asyncio.sleep(0.2)  # the retry_after_ms a racer gets
                continue
            if killed_at and not outage:
                outage = time.monotonic() - killed_at
            # Accepted, or refused because the lost reply's move had been applied:
            # either way the log now holds move `seq` exactly once.
            assert result.accepted or result.log_length == seq + 1
            seq += 1
        assert await store.move_log("r", "ann.1") == [f"m{i}".encode() for i in range(MOVES)]
        assert [e.version for e in await store.events_since("r", 0)] == list(range(1, MOVES + 1))
        promoted = rc.get_node_from_key(store.keys.room("r").meta)
        assert promoted is not None and promoted.name != master.name
        return {"unavailable": unavailable, "outage_s": outage}
    finally:
        await store.close()


def _pid(cluster_dir: Path, port: int) -> int:
    return int((cluster_dir / str(port) / "redis.pid").read_text())


async def _replica_port(rc: RedisCluster, master: ClusterNode) -> int:
    """The port of ``master``'s replica, once it is connected (ROLE, as the store asks)."""
    deadline = time.monotonic() + 20
    while True:
        role = await rc.execute_command("ROLE", target_nodes=master)
        if role[2]:
            return int(role[2][0][1])
        assert time.monotonic() < deadline, "the replica never connected"
        await asyncio.sleep(0.1)


@contextmanager
def _stopped(pid: int) -> Iterator[None]:
    """The process stopped (SIGSTOP: alive, answering nothing), continued afterwards."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _finish(racer: str, at_ms: int) -> Finish:
    return Finish("1", (f"{racer} 1st".encode(), f"{racer} 2nd".encode()), at_ms)


async def _finishes_through_a_failover(url: str, cluster_dir: Path) -> dict[str, float]:
    store = await Store.connect(url, prefix="finish:", timeout=1.0)
    try:
        rc, master = await _room_master(store, "r")
        replica = await _replica_port(rc, master)
        for racer in ("ann.1", "bob.1"):
            assert (await store.append_move("r", racer, 0, b"m0", b"p", round_no=1)).accepted

        # The replica does not answer: the finish waits REPLICA_WAIT_MS for it, then
        # is answered anyway, saying no replica holds it.
        with _stopped(_pid(cluster_dir, replica)):
            began = time.monotonic()
            ann = await store.append_move(
                "r", "ann.1", 1, b"1st", b"p", _finish("ann", 100), round_no=1
            )
            waited = time.monotonic() - began
        assert ann.accepted and ann.place == 1 and ann.replicas == 0, ann
        assert waited >= REPLICA_WAIT_MS / 1000 * 0.9, waited

        # The replica stopped again, Bob finishes: no answer while it is stopped...
        with _stopped(_pid(cluster_dir, replica)):
            bob = asyncio.ensure_future(
                store.append_move("r", "bob.1", 1, b"2nd", b"p", _finish("bob", 200), round_no=1)
            )
            await asyncio.sleep(0.3)
            assert not bob.done(), "a finish was answered before any replica held it"
        # ... and once it runs again, the answer comes: one replica holds the finish.
        second = await asyncio.wait_for(bob, 5)
        assert second.accepted and second.place == 2 and second.replicas == 1, second

        # The master dies right after that answer: the promoted replica has both places.
        os.kill(_pid(cluster_dir, master.port), signal.SIGKILL)
        killed_at = time.monotonic()
        while True:
            try:
                log = await store.move_log("r", "bob.1")
                break
            except StoreUnavailable:
                assert time.monotonic() - killed_at < 30, "no failover"
                await asyncio.sleep(0.2)
        assert log == [b"m0", b"2nd"]
        assert await store.move_log("r", "ann.1") == [b"m0", b"1st"]
        finished = [e.data for e in await store.events_since("r", 0) if e.data != b"p"]
        assert finished == [b"ann 1st", b"bob 2nd"], finished
        promoted = rc.get_node_from_key(store.keys.room("r").meta)
        assert promoted is not None and promoted.port == replica
        return {"waited_s": waited, "outage_s": time.monotonic() - killed_at}
    finally:
        await store.close()


def _with_replicated_cluster(tmp_path: Path, run: Callable[[str, Path], Awaitable[T]]) -> T:
    """``run(url, cluster_dir)`` on a private cluster of three masters with a replica
    each (AOF always, spare ports), stopped and removed afterwards."""
    ports = redis_cluster_sh("spare-ports", "6").split()
    cluster_dir = tmp_path / "cluster"
    conf = str(DEPLOY / "redis.conf")
    try:
        url = redis_cluster_sh("start", str(cluster_dir), *ports, "--replicas", "1", "--conf", conf)
        return asyncio.run(run(url.strip().splitlines()[-1], cluster_dir))
    finally:
        redis_cluster_sh("stop", str(cluster_dir))


def test_a_finish_is_answered_once_a_replica_holds_it_and_survives_a_failover(
    tmp_path: Path,
) -> None:
    seen = _with_replicated_cluster(tmp_path, _finishes_through_a_failover)
    assert 0 < seen["outage_s"] < 20, seen


def test_a_master_dies_its_replica_takes_over_and_retries_succeed(tmp_path: Path) -> None:
    seen = _with_replicated_cluster(tmp_path, _race_through_a_failover)
    # the moves in flight were refused as unavailable, for about the failover time
    # (cluster-node-timeout 2 s, then the election), not forever
    assert seen["unavailable"] >= 1
    assert 0 < seen["outage_s"] < 20, seen


async def _finish_with_the_replica_stopped(url: str, cluster_dir: Path) -> None:
    """A real node, two racers (fake peers): Ann's finishing move while the replica of
    her room's master is stopped is answered after REPLICA_WAIT_MS, a finish, and
    counted and logged as unreplicated; the other moves never waited."""
    store = await Store.connect(url, prefix="node-finish:", timeout=2.0)
    node = started_node(store)
    try:
        lobby, _started = await started_race(node)
        ann, bob = lobby.ann, lobby.bob
        moves = winning_moves(SOLVABLE_SECRET)
        for seq, move in enumerate(moves[:-1]):
            assert (await ann.ask("move", seq=seq, move=move)).d["status"] == "playing"
        assert ann.room is not None
        replica = await _replica_port(*await _room_master(store, ann.room.room_id))
        with _stopped(_pid(cluster_dir, replica)):
            began = time.monotonic()
            last = await ann.ask("move", seq=len(moves) - 1, move=moves[-1])
            waited = time.monotonic() - began
        assert last.t == "moved" and last.d["status"] == "finished", last.d
        assert waited >= REPLICA_WAIT_MS / 1000 * 0.9, waited
        counted = node.metrics
        assert isinstance(counted, Tally) and counted.finishes_unreplicated.value == 1
        # The replica answers again: Bob's first move does not wait.
        began = time.monotonic()
        assert (await bob.ask("move", seq=0, move=moves[0])).t == "moved"
        assert time.monotonic() - began < REPLICA_WAIT_MS / 1000 / 2
    finally:
        await node.stop()
        await store.close()


def test_a_node_answers_a_finish_when_no_replica_acknowledges_and_counts_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="solrace.moves"):
        _with_replicated_cluster(tmp_path, _finish_with_the_replica_stopped)
    assert "a finish is acknowledged before any replica holds it" in caplog.text


async def _master_ids(rc: RedisCluster) -> dict[int, str]:
    """Every master's port and node id (what ``CLUSTER SETSLOT`` names)."""
    masters = {}
    for master in rc.get_primaries():
        reply = await rc.execute_command("CLUSTER", "MYID", target_nodes=master)
        masters[master.port] = reply.decode() if isinstance(reply, bytes) else str(reply)
    return masters


def _migrate_keys(masters: dict[int, str], slot: int, source: int, target: int) -> None:
    """Start moving hash slot ``slot`` from the master on port ``source`` to the one on
    ``target`` and move its keys (the resharding steps of the Redis Cluster tutorial),
    but leave the slot marked as migrating: the source now answers ASK for it.
    ``masters``: every master's port and node id."""
    with redis.Redis(port=source) as src, redis.Redis(port=target) as dst:
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", masters[source])
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", masters[target])
        keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
        assert keys, "the room's keys should be in its slot"
        src.execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *keys)


def _move_slot(masters: dict[int, str], slot: int, source: int, target: int) -> None:
    """Move hash slot ``slot`` and its keys from ``source`` to ``target`` for good: a
    client holding the old slot map gets MOVED for it."""
    _migrate_keys(masters, slot, source, target)
    _finish_move(masters, slot, target)


def _finish_move(masters: dict[int, str], slot: int, target: int) -> None:
    """End a slot's migration: every master learns that ``target`` owns it."""
    for port in masters:
        with redis.Redis(port=port) as master:
            master.execute_command("CLUSTER", "SETSLOT", slot, "NODE", masters[target])


async def _finishes_after_a_slot_moved(url: str, cluster_dir: Path) -> None:
    store = await Store.connect(url, prefix="moved:", timeout=2.0)
    try:
        rc, old = await _room_master(store, "r")
        for racer in ("ann.1", "bob.1", "cat.1"):
            assert (await store.append_move("r", racer, 0, b"m0", b"p", round_no=1)).accepted
        masters = await _master_ids(rc)
        new = next(port for port in sorted(masters) if port != old.port)
        slot = rc.keyslot(store.keys.room("r").meta)
        places = tuple(f"{n} place".encode() for n in (1, 2, 3))

        # The store's slot map still names the old master: the finish gets MOVED and
        # goes to the new one, whose replica answers nothing.
        await asyncio.to_thread(_move_slot, masters, slot, old.port, new)
        new_master = next(m for m in rc.get_primaries() if m.port == new)
        with _stopped(_pid(cluster_dir, await _replica_port(rc, new_master))):
            ann = await store.append_move(
                "r", "ann.1", 1, b"1st", b"p", Finish("1", places, 100), round_no=1
            )
        # Stored once, on the new master, and no replica of it holds it: the answer
        # says so (a WAIT on the old master's connection had said 1).
        assert ann.accepted and ann.place == 1 and ann.replicas == 0, ann
        # The new master's replica running, the next finish is confirmed by it.
        bob = await store.append_move(
            "r", "bob.1", 1, b"2nd", b"p", Finish("1", places, 200), round_no=1
        )
        assert bob.accepted and bob.place == 2 and bob.replicas == 1, bob
        where = rc.get_node_from_key(store.keys.room("r").meta)
        assert where is not None and where.port == new

        # The slot half moved back (its keys moved, the new master answering ASK): a
        # multi-key script cannot run on a master still importing the slot unless it
        # holds every key (a finish creates some), so redis-py's redirections end in
        # TRYAGAIN and the finish is refused as unavailable, nothing stored...
        await asyncio.to_thread(_migrate_keys, masters, slot, new, old.port)
        cat_finish = Finish("1", places, 300)
        with pytest.raises(StoreUnavailable):
            await store.append_move("r", "cat.1", 1, b"3rd", b"p", cat_finish, round_no=1)
        # ... and once the move is complete, the racer's retry is stored once and
        # confirmed by the replica of the master that ran it.
        await asyncio.to_thread(_finish_move, masters, slot, old.port)
        cat = await store.append_move("r", "cat.1", 1, b"3rd", b"p", cat_finish, round_no=1)
        assert cat.accepted and cat.place == 3 and cat.replicas == 1, cat
        for racer, last in (("ann.1", b"1st"), ("bob.1", b"2nd"), ("cat.1", b"3rd")):
            assert await store.move_log("r", racer) == [b"m0", last]
        finished = [e.data for e in await store.events_since("r", 0) if e.data != b"p"]
        assert finished == list(places), finished
    finally:
        await store.close()


def test_a_finish_redirected_to_another_master_claims_only_that_masters_replicas(
    tmp_path: Path,
) -> None:
    """A finish sent with a stale slot map is redirected to the slot's new master
    (MOVED). Whether a replica holds it can only be asked of the master that ran it —
    never of the old one, whose replicas say nothing of this write. While the slot is
    being migrated the finish is refused as unavailable, and its retry lands once."""
    _with_replicated_cluster(tmp_path, _finishes_after_a_slot_moved)


async def _finishes_moved_to_a_master_without_replicas(url: str, cluster_dir: Path) -> None:
    store = await Store.connect(url, prefix="moved-bare:", timeout=2.0)
    try:
        rc, old = await _room_master(store, "r")
        for racer in ("ann.1", "bob.1"):
            assert (await store.append_move("r", racer, 0, b"m0", b"p", round_no=1)).accepted
        masters = await _master_ids(rc)
        new = next(port for port in sorted(masters) if port != old.port)
        new_master = next(m for m in rc.get_primaries() if m.port == new)
        # The new master loses its replica for good (killed: by its own account, ROLE,
        # it then has none), while the room's old master keeps its own.
        os.kill(_pid(cluster_dir, await _replica_port(rc, new_master)), signal.SIGKILL)
        deadline = time.monotonic() + 20
        while (await rc.execute_command("ROLE", target_nodes=new_master))[2]:
            assert time.monotonic() < deadline, "the master still lists its killed replica"
            await asyncio.sleep(0.1)
        assert (await rc.execute_command("ROLE", target_nodes=old))[2], "old has its replica"

        # The store's slot map still names the old master, which has a replica: the
        # finish goes there with a WAIT, gets MOVED, and the new master has no replica
        # to ask. Stored once the ordinary way, and no replica is claimed (None: none
        # could be asked), rather than a WAIT's answer from the old master's replica.
        slot = rc.keyslot(store.keys.room("r").meta)
        await asyncio.to_thread(_move_slot, masters, slot, old.port, new)
        places = tuple(f"{n} place".encode() for n in (1, 2))
        ann = await store.append_move(
            "r", "ann.1", 1, b"1st", b"p", Finish("1", places, 100), round_no=1
        )
        assert ann.accepted and ann.place == 1 and ann.replicas is None, ann
        where = rc.get_node_from_key(store.keys.room("r").meta)
        assert where is not None and where.port == new
        # The slot map now current, the next finish asks the new master directly.
        bob = await store.append_move(
            "r", "bob.1", 1, b"2nd", b"p", Finish("1", places, 200), round_no=1
        )
        assert bob.accepted and bob.place == 2 and bob.replicas is None, bob
        for racer, last in (("ann.1", b"1st"), ("bob.1", b"2nd")):
            assert await store.move_log("r", racer) == [b"m0", last]
        finished = [e.data for e in await store.events_since("r", 0) if e.data != b"p"]
        assert finished == list(places), finished
    finally:
        await store.close()


def test_a_finish_redirected_to_a_master_without_replicas_claims_none(tmp_path: Path) -> None:
    """A finish sent with a stale slot map to a master that has a replica is redirected
    (MOVED) to the slot's new master, which has none: it is stored there once, the
    ordinary way, and its answer claims no replica — neither the old master's (which
    says nothing of this write) nor a count of 0 (nobody could be asked)."""
    _with_replicated_cluster(tmp_path, _finishes_moved_to_a_master_without_replicas)


async def _an_evicting_master_is_named(url: str, cluster_dir: Path) -> None:
    store = await Store.connect(url, prefix="evicting:")
    try:
        found = await store.eviction()
        assert (found.policy, found.detail) == (
            "noeviction",
            "every master: maxmemory-policy noeviction: Redis never deletes a key",
        )
        rc = store._redis
        assert isinstance(rc, RedisCluster)
        await rc.initialize()
        master = sorted(rc.get_primaries(), key=lambda n: n.name)[1]
        await rc.config_set("maxmemory-policy", "allkeys-lru", target_nodes=master)
        found = await store.eviction()
        assert (found.policy, found.node, found.detail) == (
            "allkeys-lru",
            master.name,
            f"master {master.name}: maxmemory-policy allkeys-lru: Redis may delete a race's keys",
        )
        assert await store.replica() is None  # every master is one; replicas are not asked
    finally:
        await store.close()
    done = await asyncio.to_thread(
        subprocess.run,
        [str(SERVER_SCRIPT), "--port", "0", "--redis-url", url],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"solrace-server: --redis-url: {master.name} evicts keys (maxmemory-policy "
        "allkeys-lru): a race's state could vanish; set maxmemory-policy noeviction"
    )


def test_a_cluster_with_one_evicting_master_is_refused_naming_it(tmp_path: Path) -> None:
    """A room lives on one master: any master that evicts keys may lose races. The
    policy is read from each master's INFO (CONFIG may be forbidden)."""
    _with_replicated_cluster(tmp_path, _an_evicting_master_is_named)
