"""What only a Redis Cluster can get wrong: slots, masters, cross-slot reads.

These run on the test cluster only (``SOLRACE_TEST_CLUSTER_URL``, three masters; the
parametrized suite runs everything else on it too). Rooms are chosen so that they
live on *different masters*, which is where a cross-slot command would be refused
and where the group commit must split its batch."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError
from solrace.store import Finish, Keys, Store, StoreUnavailable, TailRead, parse_cluster_url
from solrace.store._errors import redis_errors
from solrace.store.errors import StoreError

from tests.deploy.conftest import redis_cluster_sh
from tests.support.faults import fault_tail_reads
from tests.support.redis import CLUSTER_URL, connect_or_fail, delete_prefix, new_prefix

from .conftest import make_rooms, room_keys, triples


@pytest.fixture
async def cstore() -> AsyncIterator[Store]:
    prefix = new_prefix()
    store = await connect_or_fail("cluster", prefix)
    try:
        yield store
    finally:
        await store.close()
        await delete_prefix(prefix, CLUSTER_URL)


def _rc(store: Store) -> RedisCluster:
    client = store._redis  # the test asks the cluster where keys live
    assert isinstance(client, RedisCluster)
    return client


def _master_of(store: Store, key: str) -> str:
    node = _rc(store).get_node_from_key(key)
    assert node is not None
    return str(node.name)


async def rooms_on_every_master(store: Store, per_master: int = 1) -> list[str]:
    """Room ids, ``per_master`` on each master of the cluster (masters in name order),
    created (their meta key: the scripts write nothing to a room without one)."""
    await _rc(store).initialize()
    masters = sorted(n.name for n in _rc(store).get_primaries())
    assert len(masters) >= 3, f"the test cluster should have 3 masters, has {masters}"
    found: dict[str, list[str]] = {m: [] for m in masters}
    i = 0
    while any(len(rooms) < per_master for rooms in found.values()):
        room = f"room{i}"
        rooms = found[_master_of(store, store.keys.room(room).meta)]
        if len(rooms) < per_master:
            rooms.append(room)
        i += 1
    rooms = [room for m in masters for room in found[m]]
    await make_rooms(store, *rooms)
    return rooms


def test_every_key_of_a_room_hashes_to_the_room_slot() -> None:
    rk = Keys("solrace:").room("r_2147d18c011a.3bda1e00")
    keys = [*rk.fixed(), rk.log("racer-1.0"), rk.places("round-1"), rk.finish_time("round-1")]
    assert {key_slot(k.encode()) for k in keys} == {key_slot(b"room:r_2147d18c011a.3bda1e00")}
    # and the global keys do not (they are single-key commands only)
    other = Keys("solrace:")
    assert key_slot(other.listed.encode()) != key_slot(b"room:r_2147d18c011a.3bda1e00")


async def test_keys_a_race_writes_all_live_in_the_room_slot(cstore: Store) -> None:
    await cstore.create_room("r1", "CODE1", b"meta", listed=True, now_ms=1)
    await cstore.append_event("r1", b"joined", token=("ann", "a" * 64))
    finish = Finish("round-1", (b"first",), 1000)
    await cstore.append_move("r1", "ann.1", 0, b"m0", b"p0", finish, round_no=1)
    await cstore.append_event("r1", b"closed")
    keys = await room_keys(cstore, "r1")
    # meta code ver chain events tokens keys log places finish_at, and closed: a finish
    # closes its own log (append_move.lua)
    assert len(keys) == 11
    slots = {_rc(cstore).keyslot(k) for k in keys}
    assert slots == {_rc(cstore).keyslot(cstore.keys.room("r1").meta)}


async def test_tail_reads_rooms_on_every_master_at_once(cstore: Store) -> None:
    rooms = await rooms_on_every_master(cstore, per_master=2)
    node2 = await cstore.sibling()
    try:
        waiting = asyncio.create_task(cstore.tail(dict.fromkeys(rooms, 0), block_ms=3000))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # nothing yet: it polls, it does not return empty
        await node2.append_event(rooms[3], b"late")
        assert triples(await waiting) == [(rooms[3], 1, b"late")]
        for i, room in enumerate(rooms):
            await node2.append_event(room, f"e{i}".encode())
        got = triples(await cstore.tail(dict.fromkeys(rooms, 0), block_ms=0))
        expected = [(room, 1, f"e{i}".encode()) for i, room in enumerate(rooms)]
        expected[3] = (rooms[3], 1, b"late")
        expected.append((rooms[3], 2, b"e3"))
        assert sorted(got) == sorted(expected)
        # positions still count per room
        positions = {room: 1 for room in rooms}
        assert triples(await cstore.tail(positions, block_ms=0)) == [(rooms[3], 2, b"e3")]
    finally:
        await node2.close()


async def test_one_batch_commits_moves_of_rooms_on_different_masters(cstore: Store) -> None:
    rooms = await rooms_on_every_master(cstore, per_master=2)
    assert len({_master_of(cstore, cstore.keys.room(r).meta) for r in rooms}) >= 3
    before = cstore.flushes
    appends = [
        cstore.append_move(room, "ann.1", seq, f"{room}:{seq}".encode(), b"progress", round_no=1)
        for seq in range(3)
        for room in rooms
    ]
    results = await asyncio.gather(*appends)
    assert all(r.accepted for r in results)
    assert cstore.flushes == before + 1  # one batch, split per master inside
    for room in rooms:
        assert await cstore.move_log(room, "ann.1") == [f"{room}:{s}".encode() for s in range(3)]
        assert await cstore.version(room) == 3
    # a duplicate in the next batch is refused on its own master, the others accepted
    again = await asyncio.gather(
        *(
            cstore.append_move(room, "ann.1", 3 if i else 2, b"x", b"p", round_no=1)
            for i, room in enumerate(rooms)
        )
    )
    assert [r.accepted for r in again] == [False] + [True] * (len(rooms) - 1)
    assert again[0].log_length == 3


@pytest.fixture
def private_cluster(tmp_path: Path) -> Iterator[str]:
    """A cluster of three masters of the test's own (``redis+cluster://`` URL), for a
    test that disturbs the cluster itself: flushing the shared cluster's scripts made
    other tests' calls meet NOSCRIPT, which they survive only by resending."""
    ports = redis_cluster_sh("spare-ports", "3").split()
    cluster_dir = tmp_path / "cluster"
    try:
        yield redis_cluster_sh("start", str(cluster_dir), *ports[:3]).strip().splitlines()[-1]
    finally:
        redis_cluster_sh("stop", str(cluster_dir))


async def test_scripts_are_loaded_again_on_masters_that_forgot_them(private_cluster: str) -> None:
    store = await Store.connect(private_cluster, prefix=new_prefix())
    try:
        rooms = await rooms_on_every_master(store)
        await _rc(store).execute_command("SCRIPT FLUSH", target_nodes=RedisCluster.PRIMARIES)
        results = await asyncio.gather(
            *(store.append_move(room, "bob.1", 0, b"m", b"p", round_no=1) for room in rooms)
        )
        assert all(r.accepted for r in results)
        await _rc(store).execute_command("SCRIPT FLUSH", target_nodes=RedisCluster.PRIMARIES)
        assert await store.append_event(rooms[1], b"e") == 2
    finally:
        await store.close()


async def test_expire_room_reaches_keys_on_three_masters(cstore: Store) -> None:
    # the room, its join code and the listing: find a code whose key is on another
    # master than the room, so step 2 must go to several masters
    room = "exp1"
    room_master = _master_of(cstore, cstore.keys.room(room).meta)
    code = next(
        c
        for c in (f"C{i}" for i in range(1000))
        if _master_of(cstore, cstore.keys.code(c)) != room_master
    )
    await cstore.create_room(room, code, b"meta", listed=True, now_ms=1)
    await cstore.append_move(room, "ann.1", 0, b"m", b"p", round_no=1)
    await cstore.expire_room(room, 100.0)
    ttls = await room_keys(cstore, room)
    assert ttls and all(0 < ttl <= 100_000 for ttl in ttls.values()), ttls
    assert 0 < await _rc(cstore).pttl(cstore.keys.code(code)) <= 100_000
    assert await cstore.listed_rooms() == []


async def test_listing_holds_rooms_of_every_master(cstore: Store) -> None:
    rooms = await rooms_on_every_master(cstore)
    for i, room in enumerate(rooms):
        await cstore.create_room(room, f"L{i}", b"m", listed=True, now_ms=100 + i)
    assert await cstore.listed_rooms() == list(reversed(rooms))
    await cstore.unlist(rooms[0])
    assert await cstore.listed_rooms() == list(reversed(rooms[1:]))
    assert await cstore.room_for_code("L2") == rooms[2]


async def test_heads_and_leases_span_masters(cstore: Store) -> None:
    rooms = await rooms_on_every_master(cstore)
    for room in rooms:
        await cstore.append_event(room, b"e")
    heads = await cstore.heads(rooms)
    assert sorted(heads) == sorted(rooms) and all(v == 1 and c for v, c in heads.values())
    nodes = [f"node{i}" for i in range(12)]
    for node in nodes[::2]:
        await cstore.renew_lease(node, 10_000)
    assert await cstore.live_nodes(nodes) == set(nodes[::2])
    assert len({_master_of(cstore, cstore.keys.lease(n)) for n in nodes}) >= 2


async def test_a_slot_redis_refuses_withholds_only_its_own_rooms_from_the_tail(
    cstore: Store,
) -> None:
    """The tail reads every tailed room in one pipeline, an XREAD per slot: one slot
    Redis refused (left open by an interrupted reshard; here a stream key of another
    type) failed the whole poll, every poll — no room's events reached the node, and
    the node took it for an outage a second, re-arming every offline racer's grace
    (an audit: a grace of 30 s ended after 74 s). Only that slot's rooms wait now."""
    healthy, broken = (await rooms_on_every_master(cstore))[:2]
    await cstore.append_event(healthy, b"e1")
    await cstore._redis.set(cstore.keys.room(broken).events, "not a stream")
    got = await cstore.tail({healthy: 0, broken: 0}, block_ms=500)
    assert triples(got) == [(healthy, 1, b"e1")] and got.failed is None
    assert (await cstore.tail({broken: 0}, block_ms=100)).entries == []


async def test_delete_all_empties_the_prefix_on_every_master(cstore: Store) -> None:
    rooms = await rooms_on_every_master(cstore)
    for room in rooms:
        await cstore.append_event(room, b"e")
    assert await cstore.delete_all() == 3 * 4  # meta, ver, chain, events per room
    assert all([await cstore.version(room) == 0 for room in rooms])


async def test_durability_is_that_of_the_weakest_master(cstore: Store) -> None:
    found = await cstore.durability()
    # the test cluster (deploy/redis-cluster.sh without --conf) runs without AOF
    assert found.level == "none", found
    assert found.detail.startswith("every master")


def test_cluster_urls() -> None:
    assert parse_cluster_url("redis+cluster://a:1,b:2,[::1]:3") == (
        "redis://a:1/0",
        [("b", 2), ("::1", 3)],
    )
    assert parse_cluster_url("rediss+cluster://u:pw@h:7000/0?socket_timeout=2") == (
        "rediss://u:pw@h:7000/0?socket_timeout=2",
        [],
    )
    for bad in (
        "redis+cluster://",
        "redis+cluster://host",
        "redis+cluster://h:1/2",
        "redis://h:1",
        "redis+cluster://h:99999",
    ):
        with pytest.raises(ValueError):
            parse_cluster_url(bad)


@pytest.mark.parametrize("query", ["db=1", "db=0&db=3", "socket_timeout=2&db=15"])
def test_a_database_other_than_0_in_the_query_is_refused_as_in_the_path(query: str) -> None:
    """``redis+cluster://h:7101?db=1``: redis-py takes the query's database over the
    path's, and its cluster client refused it with a RedisClusterException — not a
    ValueError, so solrace-server printed a traceback for a mistyped URL."""
    url = f"redis+cluster://u:s3cret@127.0.0.1:7101?{query}"
    with pytest.raises(ValueError, match="a Redis Cluster has only database 0, not ") as refused:
        parse_cluster_url(url)
    assert "s3cret" not in str(refused.value)


def test_database_0_in_the_query_is_taken() -> None:
    assert parse_cluster_url("redis+cluster://h:1?db=0") == ("redis://h:1/0?db=0", [])


@pytest.mark.parametrize(
    "bad",
    [
        "redis+cluster://u:s3cret@host",  # a node without its port
        "redis+cluster://u:s3cret@h:1/2",  # a database other than 0
        "redis+cluster://u:s3cret@",  # no node
        "redis+cluster://u:s3cret@h:99999",
    ],
)
def test_a_cluster_urls_error_says_no_password(bad: str) -> None:
    """The URL an error quotes has its credentials hidden: it was quoted as given,
    password and all, into a line a terminal, a unit's journal or an issue keeps."""
    with pytest.raises(ValueError) as refused:
        parse_cluster_url(bad)
    assert "s3cret" not in str(refused.value) and "u:" not in str(refused.value)
    assert "redis+cluster://***@" in str(refused.value)


async def test_an_unreachable_cluster_is_unavailable_not_a_crash() -> None:
    store = await Store.connect("redis+cluster://127.0.0.1:1", prefix="t:", timeout=0.5)
    try:
        assert store.cluster
        assert not await store.ping()
        with pytest.raises(StoreUnavailable):
            await store.append_move("r", "a.1", 0, b"m", b"p", round_no=1)
        with pytest.raises(StoreUnavailable):
            await store.load_meta("r")
        assert (await store.durability()).level == "unknown"
    finally:
        await store.close()


async def test_a_cross_slot_mistake_is_a_store_error(cstore: Store) -> None:
    # The store never sends one; if a caller's bug did, it must surface as a
    # StoreError, not as redis-py's own exception.
    with pytest.raises(StoreError), redis_errors():
        await _rc(cstore).execute_command("MGET", "a{1}", "b{2}")


async def test_a_failing_master_fails_only_its_own_calls(
    cstore: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    rooms = await rooms_on_every_master(cstore)
    rc = _rc(cstore)
    dead = rc.get_node_from_key(cstore.keys.room(rooms[0]).meta)
    assert dead is not None

    original = ClusterNode.execute_pipeline

    async def execute_pipeline(node: ClusterNode, commands: list[Any]) -> bool:
        if node.name == dead.name:
            raise RedisConnectionError("connection lost (test)")
        return await original(node, commands)

    # the master of rooms[0] drops every pipeline, as a killed one does
    monkeypatch.setattr(ClusterNode, "execute_pipeline", execute_pipeline)
    results = await asyncio.gather(
        *(cstore.append_move(room, "ann.1", 0, b"m", b"p", round_no=1) for room in rooms),
        return_exceptions=True,
    )
    assert isinstance(results[0], StoreUnavailable)
    assert [r.accepted for r in results[1:] if not isinstance(r, BaseException)] == [True, True]
    monkeypatch.undo()
    # the slot map was marked stale: the next batch asks the cluster again, and the
    # retry of the failed move (same seq) is accepted; the others' retries are refused
    # with the log length, never applied twice
    again = await asyncio.gather(
        *(cstore.append_move(room, "ann.1", 0, b"m", b"p", round_no=1) for room in rooms)
    )
    assert [r.accepted for r in again] == [True, False, False]
    assert [r.log_length for r in again] == [1, 1, 1]


# ---------------------------------------------------------------- a master added


def _cli(port: int, *args: object) -> str:
    done = subprocess.run(
        ["redis-cli", "-p", str(port), *map(str, args)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _node_ids(port: int) -> dict[int, str]:
    """Each node's id by its port, as ``CLUSTER NODES`` on ``port`` says."""
    ids = {}
    for line in _cli(port, "cluster", "nodes").splitlines():
        fields = line.split()
        ids[int(fields[1].split(":")[1].split("@")[0])] = fields[0]
    return ids


def _slot_owners(port: int) -> str:
    """``CLUSTER SLOTS`` on ``port``: which master serves which slots, as it sees it."""
    return "\n".join(sorted(_cli(port, "cluster", "slots").split("\n")))


async def _ask_window_on_a_new_master(url: str, cluster_dir: Path, new: int) -> None:
    store = await Store.connect(url, prefix="added:", timeout=2.0)
    try:
        await make_rooms(store, "r")
        for seq in range(3):
            assert (
                await store.append_move("r", "1:1", seq, b"m%d" % seq, b"p", round_no=1)
            ).accepted
        rc = _rc(store)
        node = rc.get_node_from_key(store.keys.room("r").meta)
        assert node is not None
        slot, old = rc.keyslot(store.keys.room("r").meta), node.port
        # A master joins the running cluster: no slot yet, so no slot map names it.
        conf = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
        (cluster_dir / str(new)).mkdir()
        where = cluster_dir / str(new)
        server = ("redis-server", "--port", str(new), "--bind", "127.0.0.1", "--dir", str(where))
        daemon = ("--save", "", "--daemonize", "yes", "--pidfile", str(where / "redis.pid"))
        subprocess.run(
            [*server, *conf, *daemon],
            check=True,
            timeout=30,
        )
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", str(new), "ping"], capture_output=True).stdout:
                break
            time.sleep(0.05)
        done = subprocess.run(
            ["redis-cli", "--cluster", "add-node", f"127.0.0.1:{new}", f"127.0.0.1:{old}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        for _ in range(200):  # it knows every node and which slots each serves
            state_ok = "cluster_state:ok" in _cli(new, "cluster", "info")
            if state_ok and _slot_owners(new) == _slot_owners(old):
                break
            await asyncio.sleep(0.1)
        assert state_ok, "the new master never caught up with the cluster"
        ids = _node_ids(old)
        # The room's slot moves to it, by hand and held open: every key is there, the
        # slot is not yet its own (the window `redis-cli --cluster rebalance` passes
        # through for each slot it moves). Redis answers ASK to the new master.
        assert _cli(new, "cluster", "setslot", slot, "importing", ids[old]) == "OK"
        assert _cli(old, "cluster", "setslot", slot, "migrating", ids[new]) == "OK"
        keys = _cli(old, "cluster", "getkeysinslot", slot, 100).split()
        assert _cli(old, "migrate", "127.0.0.1", new, "", 0, 5000, "keys", *keys) == "OK"
        assert not _cli(old, "cluster", "getkeysinslot", slot, 100)
        # Meanwhile the store fails as in an outage, or answers right; never otherwise.
        calls = {
            "version": lambda: store.version("r"),
            "move_log": lambda: store.move_log("r", "1:1"),
            "tail": lambda: store.tail({"r": 0}, 0),
            "append_move": lambda: store.append_move("r", "1:1", 3, b"m3", b"p", round_no=1),
        }
        for name, call in calls.items():
            try:
                await call()
            except StoreUnavailable:
                pass
            except Exception as exc:  # what the test is about
                pytest.fail(f"{name} in the ASK window: {type(exc).__name__}: {exc}")
        for port in (new, old):
            _cli(port, "cluster", "setslot", slot, "node", ids[new])
        for _ in range(50):  # the move's outcome was unknown: the racer's retry
            try:
                await store.append_move("r", "1:1", 3, b"m3", b"p", round_no=1)
                break
            except StoreUnavailable:
                await asyncio.sleep(0.1)
        assert await store.move_log("r", "1:1") == [b"m0", b"m1", b"m2", b"m3"]
        moved = rc.get_node_from_key(store.keys.room("r").meta)
        assert moved is not None and moved.port == new
    finally:
        await store.close()


def test_a_room_moving_to_a_master_just_added_is_unavailable_for_a_moment_not_broken(
    tmp_path: Path,
) -> None:
    """A master added to a running cluster gets its first slots (a rebalance): while
    the room's slot is half-way, the store's calls are StoreUnavailable or right —
    redis-py followed an ASK only to nodes its slot map names, and a master without
    slots is named by none: AttributeError, a traceback in the tail loop and an
    ``internal`` refusal for a move (whose retry was then acknowledged unstored).
    On a private cluster (four spare ports, or SOLRACE_TEST_SPARE_PORTS)."""
    spare = os.environ.get("SOLRACE_TEST_SPARE_PORTS") or redis_cluster_sh("spare-ports", "4")
    ports = spare.split()
    cluster_dir = tmp_path / "cluster"
    try:
        url = redis_cluster_sh("start", str(cluster_dir), *ports[:3]).strip().splitlines()[-1]
        asyncio.run(_ask_window_on_a_new_master(url, cluster_dir, int(ports[3])))
    finally:
        redis_cluster_sh("stop", str(cluster_dir))


# ---------------------------------------------------------------- one master's reads held


async def _tail_until(
    store: Store, positions: dict[str, int], rooms: set[str]
) -> tuple[list[tuple[str, int, bytes]], list[TailRead]]:
    """Tail as a node does — each call from the versions read so far — until every room
    of ``rooms`` has been read whole by a call (none of them unread): the events read,
    in order, and each call's read. A call ends as soon as one master has events, so
    another master's rooms may be read by the next."""
    got: list[tuple[str, int, bytes]] = []
    reads: list[TailRead] = []
    waiting = set(rooms)
    while waiting:
        assert len(reads) < 20, reads
        read = await store.tail(positions, block_ms=500)
        reads.append(read)
        for room, version, data in triples(read):
            assert version == positions[room] + 1, (room, version, positions)
            positions[room] = version
            got.append((room, version, data))
        waiting -= {room for room in waiting if room not in read.unread}
    return got, reads


@pytest.mark.parametrize("fault", ["hang", "fail"])
async def test_a_master_whose_reads_hang_or_fail_holds_back_only_its_own_rooms(
    cstore: Store, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """The tail reads every tailed room in one call, one pipeline per master: one master
    that answered nothing (hung until the command timeout, 5 s) held the whole call that
    long, then failed it — no room's events came, on any master, each call; one whose
    connection failed failed every call at once. Now the call returns what the masters
    that answered read, names the rooms it could not read (read again next call, from
    the positions given then), and why; once the master answers again its rooms' events
    come, once each and in order."""
    rooms = await rooms_on_every_master(cstore)
    held, healthy = rooms[0], rooms[1:]
    node2 = await cstore.sibling()
    try:
        master = _master_of(cstore, cstore.keys.room(held).events)
        release, faulted = fault_tail_reads(monkeypatch, cstore, master, fault)
        positions = dict.fromkeys(rooms, 0)
        for room in rooms:
            await node2.append_event(room, b"e1")
        started = time.monotonic()
        got, reads = await _tail_until(cstore, positions, set(healthy))
        print(f"{fault}: the healthy rooms' events read in {time.monotonic() - started:.3f} s")
        assert faulted, "the held master was never read"
        assert sorted(got) == sorted((room, 1, b"e1") for room in healthy)
        assert all(held in read.unread for read in reads)
        assert any(read.failed is not None for read in reads) == (fault == "fail")
        await node2.append_event(healthy[0], b"e2")  # the master still holds
        got, reads = await _tail_until(cstore, positions, {healthy[0]})
        assert got == [(healthy[0], 2, b"e2")] and all(held in read.unread for read in reads)
        await node2.append_event(held, b"e2")
        release.set()  # the master answers again: what it held comes, once and in order
        got, reads = await _tail_until(cstore, positions, set(rooms))
        assert got == [(held, 1, b"e1"), (held, 2, b"e2")]
        assert reads[-1].failed is None
    finally:
        await node2.close()


async def test_a_tail_all_of_whose_masters_fail_raises(
    cstore: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a partial read is returned: a call no master answered fails, as on one
    Redis, so that the node's loop waits before reading again."""
    rooms = await rooms_on_every_master(cstore)
    room = rooms[0]
    master = _master_of(cstore, cstore.keys.room(room).events)
    fault_tail_reads(monkeypatch, cstore, master, "fail")
    with pytest.raises(StoreUnavailable):
        await cstore.tail({room: 0}, block_ms=100)
