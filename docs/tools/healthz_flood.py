"""What a flood of ``GET /healthz`` costs a node and its Redis: docs/performance.md,
"/healthz under a flood", measured.

    python docs/tools/healthz_flood.py --redis-url redis://127.0.0.1:6399/0 --seconds 10

A measuring tool, not part of the server. It starts a real ``solrace-server`` (on that
Redis, under a key prefix of its own, deleted afterwards) pinned to one core
(``--node-cpu``), pins itself to another (``--flood-cpu``), and for ``--seconds`` sends
``GET /healthz`` on ``--connections`` connections at once, each request on a
connection of its own (the node closes each after its answer), as fast as they are
answered. It prints the probes answered a second and their statuses, the node's CPU
time (user + system, from /proc) per probe and its share of its core, and the PINGs a
second Redis answered (``INFO commandstats``): the whole Redis's, so give it a Redis
nothing else uses (``redis-server --port 6399 --save ''``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

from redis.asyncio import Redis
from solrace.argtypes import real, whole
from solrace.store import Store


def _cpu_s(pid: int) -> float:
    """The CPU seconds (user + system) process ``pid`` has used."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _pings(url: str) -> int:
    client = Redis.from_url(url)
    try:
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    return int(stats.get("cmdstat_ping", {}).get("calls", 0))


async def _probe(port: int) -> int:
    """One ``GET /healthz``: its status (0 if nothing answered)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return 0
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head = await reader.read()
        return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
    except OSError:
        return 0
    finally:
        writer.close()


async def _flood(port: int, connections: int, seconds: float) -> collections.Counter[int]:
    statuses: collections.Counter[int] = collections.Counter()
    deadline = time.monotonic() + seconds

    async def one() -> None:
        while time.monotonic() < deadline:
            statuses[await _probe(port)] += 1

    await asyncio.gather(*(one() for _ in range(connections)))
    return statuses


async def _measure(args: argparse.Namespace, port: int, pid: int) -> None:
    while await _probe(port) != 200:  # the node is up and its Redis answers
        await asyncio.sleep(0.1)
    cpu, pings, began = _cpu_s(pid), await _pings(args.redis_url), time.monotonic()
    statuses = await _flood(port, args.connections, args.seconds)
    took = time.monotonic() - began
    cpu, pings = _cpu_s(pid) - cpu, await _pings(args.redis_url) - pings
    answered = sum(n for status, n in statuses.items() if status)
    print(f"probes: {answered / took:,.0f} a second, statuses {dict(statuses)}")
    each = cpu * 1e6 / max(answered, 1)
    print(f"node: {each:,.0f} µs of CPU a probe, {cpu / took:.0%} of its core")
    print(f"Redis: {pings / took:,.1f} PINGs a second ({pings} in {took:.1f} s)")


def build_parser() -> argparse.ArgumentParser:
    """The tool's command line (tests/test_docs_inline_commands.py parses the pages'
    commands with it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", required=True, help="a Redis nothing else uses")
    parser.add_argument("--seconds", type=real(0, above=True, unit=" s"), default=10.0)
    parser.add_argument("--connections", type=whole(1), default=50, help="probes at once")
    parser.add_argument("--node-cpu", type=whole(0), default=0, help="the node's core")
    parser.add_argument("--flood-cpu", type=whole(0), default=1, help="the flood's core")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prefix = f"solrace-flood:{uuid.uuid4().hex}:"
    argv = [sys.executable, "-m", "solrace.net.main", "--port", str(port)]
    argv += ["--redis-url", args.redis_url, "--key-prefix", prefix]
    node = subprocess.Popen(
        argv,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.sched_setaffinity(0, {args.node_cpu}),
    )
    os.sched_setaffinity(0, {args.flood_cpu})
    try:
        asyncio.run(_measure(args, port, node.pid))
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(30)

        async def clean() -> None:
            store = await Store.connect(args.redis_url, prefix)
            await store.delete_all()
            await store.close()

        asyncio.run(clean())


if __name__ == "__main__":
    main()
