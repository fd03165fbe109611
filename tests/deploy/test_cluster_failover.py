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
writing to the dead master forever."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

from redis.asyncio.cluster import RedisCluster
from solrace.store import Store, StoreUnavailable

from tests.deploy.conftest import DEPLOY

SCRIPT = DEPLOY / "redis-cluster.sh"
MOVES = 120
KILL_AT = 40


def _sh(*args: str) -> str:
    done = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def _race_through_a_failover(url: str, cluster_dir: Path) -> dict[str, float]:
    store = await Store.connect(url, prefix="failover:", timeout=1.0)
    try:
        rc = store._redis  # the test asks where the room lives, to kill that master
        assert isinstance(rc, RedisCluster)
        await rc.initialize()
        master = rc.get_node_from_key(store.keys.room("r").meta)
        assert master is not None
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


def test_a_master_dies_its_replica_takes_over_and_retries_succeed(tmp_path: Path) -> None:
    ports = _sh("spare-ports", "6").split()
    cluster_dir = tmp_path / "cluster"
    conf = str(DEPLOY / "redis.conf")
    try:
        url = _sh("start", str(cluster_dir), *ports, "--replicas", "1", "--conf", conf)
        url = url.strip().splitlines()[-1]
        seen = asyncio.run(_race_through_a_failover(url, cluster_dir))
    finally:
        _sh("stop", str(cluster_dir))
    # the moves in flight were refused as unavailable, for about the failover time
    # (cluster-node-timeout 2 s, then the election), not forever
    assert seen["unavailable"] >= 1
    assert 0 < seen["outage_s"] < 20, seen
