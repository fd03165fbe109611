"""What grows on a long-running node and in Redis: docs/store.md, "Retention", measured.

    python docs/tools/soak.py --redis-url redis://127.0.0.1:6379/0 --phases 4 --per-phase 500

A measuring tool, not part of the server. It starts a real ``solrace-server``
(``solrace.net.main``, under a key prefix of its own, deleted afterwards, behind
``--trusted-proxies loopback`` so that ``X-Forwarded-For`` names thousands of simulated
client addresses, two in five of them IPv6) in a child process this same file runs with
a debug hook, and drives it with the client library: races of two racers playing a few
random moves and resigning (a third rematched once, a third watched by a spectator, a
third with a racer dropping and resuming on a new connection), quick races, lobbies
created and abandoned, a private lobby joined and left in a loop, refused requests
(frames that are not msgpack, text frames, a flood past the rate limit, unknown rooms).
Between phases it samples the node's RSS, the sizes of its long-lived containers and
its ``gc`` objects by type (the hook: ``SIGUSR1`` in the node, which walks the Node,
RaceServer and Admission two levels deep, summing what each room holds), ``DBSIZE`` and
``used_memory`` of the database, and the series ``/metrics`` holds; after the last
phase and ``--settle`` seconds (disconnect graces run out), the TTL of every key under
the prefix. ``--idle-room-s`` has the node forget idle rooms sooner than its ten minutes
(``rooms/node.py``, ``IDLE_ROOM_MS``), so that a short run sees what the sweep leaves;
countdowns are 0.3 s. One JSON line per sample goes to ``--out``; a summary to stdout.
Run it on a database nothing else writes (``DBSIZE`` and ``used_memory`` are the
database's and the server's).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

#: Objects the node's hook walks from: filled in by the child's patched constructors.
CAUGHT: dict[str, Any] = {}


# ----------------------------------------------------------------- the node (child)
def _install_hooks() -> None:
    """Catch the node's Node and RaceServer as they are built; short countdowns."""
    from solrace.net import server as net_server
    from solrace.rooms import node as node_mod

    node_init = node_mod.Node.__init__
    server_init = net_server.RaceServer.__init__

    def caught_node(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("countdown_ms", 300)
        node_init(self, *args, **kwargs)
        CAUGHT["node"] = self

    def caught_server(self: Any, *args: Any, **kwargs: Any) -> None:
        server_init(self, *args, **kwargs)
        CAUGHT["admission"] = self.admission

    if "SOAK_IDLE_ROOM_MS" in os.environ:
        node_mod.IDLE_ROOM_MS = int(os.environ["SOAK_IDLE_ROOM_MS"])
    node_mod.Node.__init__ = caught_node  # type: ignore[method-assign]
    net_server.RaceServer.__init__ = caught_server  # type: ignore[method-assign]


def _sizes(obj: Any, name: str, depth: int, out: dict[str, int], seen: set[int]) -> None:
    """The length of every container attribute of ``obj`` (and of solrace objects it
    holds, ``depth`` levels down); a dict's values' containers summed as ``name[*]``."""
    if id(obj) in seen or not hasattr(obj, "__dict__"):
        return
    seen.add(id(obj))
    for key, value in list(vars(obj).items()):
        path = f"{name}.{key}"
        if isinstance(value, dict | set | list | collections.deque):
            out[path] = len(value)
            if isinstance(value, dict) and depth > 0:
                summed: collections.Counter[str] = collections.Counter()
                for item in list(value.values()):
                    inner: dict[str, int] = {}
                    _sizes(item, f"{path}[*]", 0, inner, set())
                    summed.update(inner)
                out.update(summed)
        elif depth > 0 and (type(value).__module__ or "").startswith("solrace"):
            _sizes(value, path, depth - 1, out, seen)


def _dump(*_: Any) -> None:
    out: dict[str, int] = {}
    for name, obj in CAUGHT.items():
        _sizes(obj, name, 2, out, set())
    gc.collect()
    counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
    record = {"sizes": out, "gc": dict(counts.most_common(40)), "gc_total": counts.total()}
    with open(os.environ["SOAK_DUMP"], "a") as f:
        f.write(json.dumps(record) + "\n")


def run_node(argv: list[str]) -> int:
    _install_hooks()
    from solrace.net import main as net_main

    signal.signal(signal.SIGUSR1, _dump)  # run between two bytecodes of the loop's thread
    return net_main.main(argv)


# ----------------------------------------------------------------- the driver
STATS: collections.Counter[str] = collections.Counter()
#: Every race that ended (its race_over seen): (race id, how it was played).
ENDED: list[tuple[str, str]] = []
ERRORS: collections.Counter[str] = collections.Counter()


def _address(rng: random.Random) -> str:
    STATS["addresses"] += 1
    if rng.random() < 0.4:
        groups = [rng.randrange(1, 0xFFFF) for _ in range(4)]
        return "2a01:{:x}:{:x}:{:x}::{:x}".format(*groups)
    return ".".join(str(n) for n in (rng.randrange(11, 99), *rng.choices(range(256), k=2), 7))


async def _connect(url: str, address: str, **kwargs: Any) -> Any:
    from solrace_client import RaceClient

    return await RaceClient.connect(url, additional_headers={"X-Forwarded-For": address}, **kwargs)


async def _play(client: Any, rng: random.Random, moves: int) -> None:
    from solrace_client import ServerError
    from solrace_client.boardview import board_from_view

    with contextlib.suppress(ServerError, TimeoutError):
        if client.board is None:
            await client.next_event("board", timeout=10)
    for _ in range(moves):
        legal = [] if client.board is None else board_from_view(client.board).legal_moves()
        if not legal:
            break
        try:
            reply = await client.move(str(rng.choice(legal)))
        except ServerError:
            break
        if reply["status"] != "playing":
            break
    with contextlib.suppress(ServerError):
        await client.resign()


async def _round(a: Any, b: Any, rng: random.Random, how: str) -> None:
    from solrace.protocol.fairness import race_id

    await asyncio.gather(a.ready(), b.ready())
    await a.wait_started(timeout=30)
    await b.wait_started(timeout=30)
    await asyncio.gather(_play(a, rng, rng.randrange(3, 25)), _play(b, rng, rng.randrange(3, 25)))
    over = await a.next_event("race_over", timeout=30)
    ENDED.append((race_id(a.room, over.d.get("commitment")), how))
    STATS["races"] += 1


async def _close(*clients: Any) -> None:
    for client in clients:
        with contextlib.suppress(Exception):
            await client.close()


async def race(url: str, rng: random.Random) -> None:
    ip_a, ip_b = _address(rng), _address(rng)
    a, b = await _connect(url, ip_a), await _connect(url, ip_b)
    spectator = None
    resumed = False
    try:
        deals = "random" if rng.random() < 0.9 else "winnable"
        await a.create("yukon", "A", deals=deals, private=rng.random() < 0.3)
        await b.join(a.code, "B")
        if rng.random() < 0.3:
            spectator = await _connect(url, _address(rng))
            await spectator.watch(code=a.code)
            STATS["spectators"] += 1
        if rng.random() < 0.3:  # b drops and resumes on a new connection
            room, token = b.room, b.token
            await b.ws.close()
            b = await _connect(url, ip_b)
            await b.resume(room, token, since=None)
            STATS["resumes"] += 1
            resumed = True
        how = f"{deals}{' watched' if spectator else ''}{' resumed' if resumed else ''}"
        await _round(a, b, rng, how)
        if spectator is not None and rng.random() < 0.5:
            await spectator.leave()
        if rng.random() < 0.3:
            await asyncio.gather(a.rematch(), b.rematch())
            await _round(a, b, rng, how + " rematch")
            STATS["rematches"] += 1
        if rng.random() < 0.5:  # else they hang up: their graces end it
            await asyncio.gather(a.leave(), b.leave())
    finally:
        await _close(a, b, spectator)


async def quick(url: str, rng: random.Random) -> None:
    a, b = await _connect(url, _address(rng)), await _connect(url, _address(rng))
    try:
        await a.quick("yukon", "QA")
        await b.quick("yukon", "QB")
        if a.room != b.room:  # someone else's quick lobby took one: leave both
            await asyncio.gather(a.leave(), b.leave())
            return
        await _round(a, b, rng, "quick")
        STATS["quick"] += 1
    finally:
        await _close(a, b)


async def lobby(url: str, rng: random.Random) -> None:
    a = await _connect(url, _address(rng))
    try:
        await a.create("yukon", "L", private=rng.random() < 0.7, deals="random")
        STATS["lobbies"] += 1
        if rng.random() < 0.5:
            await a.leave()  # else abandoned: offline, its grace, gone
    finally:
        await _close(a)


async def churn(url: str, rng: random.Random) -> None:
    """A guest joins a private lobby and leaves it in a loop while its host stays."""
    from solrace_client import ServerError

    host, guest = await _connect(url, _address(rng)), await _connect(url, _address(rng))
    try:
        await host.create("yukon", "H", private=True, deals="random")
        for _ in range(30):
            try:
                await guest.join(host.code, "G")
            except ServerError as err:
                STATS[f"churn refused {err.code}"] += 1
                break
            await guest.leave()
            STATS["churn joins"] += 1
        await host.leave()
    finally:
        await _close(host, guest)


async def refused(url: str, rng: random.Random) -> None:
    from solrace_client import ServerError

    kind = rng.randrange(5)
    client = await _connect(url, _address(rng), pace=None)
    try:
        if kind == 0:
            await client.send_raw(b"\xc1\xc1 not msgpack")
        elif kind == 1:
            await client.send_raw("a text frame")
        elif kind == 2:
            for _ in range(80):  # past the burst: closed 1008
                await client.send_raw(b"\x82\xa1t\xa4ping\xa2id\x01")
        elif kind == 3:
            with contextlib.suppress(ServerError):
                await client.join("ZZZZZZ", "X")
            with contextlib.suppress(ServerError):
                await client.watch(room="r_nonexistent", since=5)
        else:
            with contextlib.suppress(ServerError):
                await client.resume("r_nonexistent", "0" * 43, since=3)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.closed, 1.0)
        STATS["refused"] += 1
    finally:
        await _close(client)


KINDS = {race: 6, quick: 1, lobby: 2, refused: 1, churn: 1}


async def _one(url: str, rng: random.Random) -> None:
    kind = rng.choices(list(KINDS), list(KINDS.values()))[0]
    try:
        await kind(url, rng)
    except Exception as exc:
        ERRORS[f"{kind.__name__}: {type(exc).__name__}: {str(exc)[:80]}"] += 1


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1])
    return 0


async def _sample(pid: int, port: int, redis: Any, dump: Path, label: str) -> dict[str, Any]:
    before = dump.stat().st_size if dump.exists() else 0
    os.kill(pid, signal.SIGUSR1)
    for _ in range(100):
        await asyncio.sleep(0.1)
        if dump.exists() and dump.stat().st_size > before:
            break
    await asyncio.sleep(0.3)  # the line written whole
    hook = json.loads(dump.read_text().splitlines()[-1])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as reply:
        metrics = reply.read().decode()
    series = [line for line in metrics.splitlines() if line and not line.startswith("#")]
    return {
        "label": label,
        "stats": dict(STATS),
        "rss_kb": _rss_kb(pid),
        "dbsize": await redis.dbsize(),
        "used_memory": (await redis.info("memory"))["used_memory"],
        "metric_series": len(series),
        **hook,
    }


def _kind(key: str, prefix: str, ttl: int) -> str:
    """A key's kind: ``meta``, ``log``, ``result``, ``code:<=600`` (by TTL), ..."""
    rest = key[len(prefix) :]
    if rest.startswith("{"):
        return rest.split("}", 1)[1].split(":")[1]
    kind = rest.split(":")[0]
    if kind == "code":
        return "code:" + ("<=600" if ttl <= 600 else "<=3600" if ttl <= 3600 else ">3600")
    return kind


async def _ttls(redis: Any, prefix: str) -> dict[str, Any]:
    """Keys under ``prefix`` without a TTL by kind, and (count, min, max TTL) of the rest."""
    no_ttl: collections.Counter[str] = collections.Counter()
    ttls: dict[str, list[int]] = collections.defaultdict(list)
    async for raw in redis.scan_iter(match=f"{prefix}*", count=1000):
        ttl = await redis.ttl(raw)
        kind = _kind(raw.decode(), prefix, ttl)
        if ttl < 0:
            no_ttl[kind] += 1
        else:
            ttls[kind].append(ttl)
    return {"no_ttl": no_ttl, "ttl": {k: (len(v), min(v), max(v)) for k, v in ttls.items()}}


async def drive(args: argparse.Namespace) -> None:
    import redis.asyncio as aioredis
    from solrace_client import RaceClient

    prefix = f"soak-{uuid.uuid4().hex[:8]}:"
    redis = aioredis.from_url(args.redis_url)
    work = Path(tempfile.mkdtemp(prefix="solrace-soak-"))
    dump, log = work / "dump.jsonl", work / "node.log"
    env = dict(os.environ, SOAK_DUMP=str(dump))
    if args.idle_room_s is not None:
        env["SOAK_IDLE_ROOM_MS"] = str(int(args.idle_room_s * 1000))
    command = [sys.executable, __file__, "--node", "--port", str(args.port)]
    command += ["--redis-url", args.redis_url, "--key-prefix", prefix]
    command += ["--trusted-proxies", "loopback", "--log-level", "warning"]
    with log.open("w") as log_file:
        node = subprocess.Popen(command, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    url = f"ws://127.0.0.1:{args.port}"
    out = Path(args.out).open("w")  # noqa: SIM115 (closed in the finally below)
    try:
        for _ in range(100):
            await asyncio.sleep(0.2)
            with contextlib.suppress(OSError):
                await (await RaceClient.connect(url)).close()
                break

        async def record(label: str) -> None:
            sample = await _sample(node.pid, args.port, redis, dump, label)
            out.write(json.dumps({**sample, "errors": dict(ERRORS)}) + "\n")
            out.flush()
            keep = ("rss_kb", "dbsize", "used_memory", "metric_series", "gc_total")
            print(label, {k: sample[k] for k in keep}, dict(STATS), flush=True)
            rooms = {k: v for k, v in sample["sizes"].items() if v}
            print("   ", rooms, flush=True)

        await record("start")
        gate = asyncio.Semaphore(args.parallel)

        async def one(seed: int) -> None:
            async with gate:
                await _one(url, random.Random(seed))

        for phase in range(args.phases):
            started = time.monotonic()
            await asyncio.gather(*(one(phase * 100_000 + i) for i in range(args.per_phase)))
            await record(f"phase {phase} ({time.monotonic() - started:.0f} s)")
        await asyncio.sleep(args.settle)
        await record("settled")
        ttls = await _ttls(redis, prefix)
        out.write(json.dumps({"label": "ttl", **ttls}) + "\n")
        print("keys without a TTL:", dict(ttls["no_ttl"]))
        print("keys with one (count, min s, max s):", ttls["ttl"])
        missing: collections.Counter[str] = collections.Counter()
        for race, how in ENDED:
            if not await redis.exists(f"{prefix}result:{race}"):
                missing[how] += 1
        out.write(json.dumps({"label": "unarchived", **missing}) + "\n")
        distinct = len({race for race, _ in ENDED})
        print(f"races ended: {distinct} ({len(ENDED)} race_over seen), without a result:")
        print("   ", dict(missing) or "none")
        print("errors:", dict(ERRORS) or "none")
    finally:
        node.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.wait(20)
        if node.poll() is None:
            node.kill()
        async for raw in redis.scan_iter(match=f"{prefix}*", count=1000):
            await redis.delete(raw)
        await redis.aclose()
        out.close()
        print("node log:", log)


def build_parser() -> argparse.ArgumentParser:
    """The tool's command line (tests/test_docs_inline_commands.py parses the pages'
    commands with it)."""
    from solrace.argtypes import real, whole

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    # solrace.argtypes, as every solrace command reads a number: one clear line for a
    # bad one (``type=int`` said "invalid int value"; --phases 0 or --idle-room-s -1 ran).
    parser.add_argument("--port", type=whole(1, 65535), default=8799)
    parser.add_argument("--phases", type=whole(1), default=4)
    parser.add_argument("--per-phase", type=whole(1), default=500)
    parser.add_argument("--parallel", type=whole(1), default=12)
    parser.add_argument("--settle", type=real(0, unit=" s"), default=45.0)
    parser.add_argument("--idle-room-s", type=real(0, unit=" s"), default=None)
    parser.add_argument("--out", default="soak.jsonl")
    return parser


def main() -> None:
    if sys.argv[1:2] == ["--node"]:
        sys.exit(run_node(sys.argv[2:]))
    asyncio.run(drive(build_parser().parse_args()))


if __name__ == "__main__":  # solver workers (spawn) import this module again
    main()
