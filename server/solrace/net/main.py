"""``solrace-server``: run one node.

Every flag has an environment variable, so containers and process managers configure
it the same way: ``SOLRACE_HOST``, ``SOLRACE_PORT``, ``SOLRACE_REDIS_URL``,
``SOLRACE_LOG_LEVEL``, ``SOLRACE_LOG_FORMAT``. Without a Redis URL the node runs on the
embedded store (the same store code on an in-process Redis) and says so first.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from solrace import __version__
from solrace.store import Store

from . import logs
from .node import Node
from .server import RaceServer

log = logging.getLogger("solrace.server")

DEFAULT_PORT = 8765


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="solrace-server",
        description="Run one solrace node: WebSocket races, /healthz and /metrics on one "
        "port. Every flag has an environment variable (SOLRACE_HOST, SOLRACE_PORT, "
        "SOLRACE_REDIS_URL, SOLRACE_LOG_LEVEL, SOLRACE_LOG_FORMAT, SOLRACE_KEY_PREFIX).",
    )
    parser.add_argument(
        "--host", default=env("SOLRACE_HOST", "127.0.0.1"), help="listen address ($SOLRACE_HOST)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(env("SOLRACE_PORT", str(DEFAULT_PORT))),
        help=f"WebSocket and HTTP port ($SOLRACE_PORT, default {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--redis-url",
        default=env("SOLRACE_REDIS_URL") or None,
        help="redis://host:port/db ($SOLRACE_REDIS_URL); omit for the embedded, non-durable store",
    )
    parser.add_argument(
        "--log-level",
        default=env("SOLRACE_LOG_LEVEL", "info"),
        choices=["debug", "info", "warning", "error"],
        help="$SOLRACE_LOG_LEVEL",
    )
    parser.add_argument(
        "--log-format",
        default=env("SOLRACE_LOG_FORMAT", "text"),
        choices=["text", "json"],
        help="one line per record, as text or JSON ($SOLRACE_LOG_FORMAT)",
    )
    parser.add_argument(
        "--key-prefix",
        default=env("SOLRACE_KEY_PREFIX", "solrace:"),
        help="prefix of every Redis key ($SOLRACE_KEY_PREFIX)",
    )
    return parser


async def run(args: argparse.Namespace) -> int:
    store = await Store.connect(args.redis_url, prefix=args.key_prefix)
    if store.embedded:
        log.warning(
            "store: embedded (in-process Redis): state is NOT durable and lives only as long "
            "as this process; set --redis-url or SOLRACE_REDIS_URL for Redis"
        )
    else:
        log.info("store: redis", extra={"url": _redact(args.redis_url)})
        if not await store.ping():
            log.error("redis does not answer; serving anyway, requests fail until it does")
    node = Node(store, name=f"{args.host}:{args.port}")
    server = RaceServer(node, args.host, args.port)
    await server.start()
    log.info("listening", extra={"url": server.url, "version": __version__})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.drain()
    log.info("stopped")
    return 0


def _redact(url: str) -> str:
    """Hide a password in a Redis URL before it reaches the logs."""
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.rpartition('@')[2]}"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    try:
        return asyncio.run(run(args))
    except OSError as exc:
        log.error("cannot start: %s", exc)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
