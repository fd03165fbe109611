"""What latency costs a racer: docs/fairness.md, "Latency", measured.

    python docs/tools/latency.py --redis-url redis://127.0.0.1:6379/0 0 50 150 300

A measuring tool, not part of the client. For each round trip given (ms) it starts a
real ``solrace-server`` (on that Redis, under a key prefix of its own, deleted
afterwards), a proxy in front of it that delays each direction by half the round trip
(``tests/support/flaky_link.py``), and two real terminal apps, headless: "Near"
connects directly and creates a Yukon room, "Far" joins it through the proxy. Both
play the round's certified line — the tool reads the room's secret from the store,
finds which candidate was dealt and solves it as the server did — each move 0.3 s
(``--think``) after the app's screen shows the board the racer's last move produced.
It prints the server's finish times, the gap, and when each racer's board came.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # tests.support

from solrace.argtypes import real, whole  # noqa: E402
from solrace.race.fairness import round_seed  # noqa: E402
from solrace.rooms.certify import try_candidate  # noqa: E402
from solrace.rooms.records import RoomMeta  # noqa: E402
from solrace.rules import deal, view  # noqa: E402
from solrace.rules.log import apply_entry  # noqa: E402
from solrace.store import Store  # noqa: E402
from solrace_client.tui.app import SolraceApp  # noqa: E402

from tests.support.flaky_link import FlakyLink  # noqa: E402

SERVER = Path(sys.executable).parent / "solrace-server"


async def until(done: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("the race did not get there in time")
        await asyncio.sleep(0.002)


@asynccontextmanager
async def server(redis_url: str, prefix: str, port: int) -> AsyncIterator[str]:
    """``solrace-server`` with its default settings, on ``redis_url`` under ``prefix``."""
    proc = await asyncio.create_subprocess_exec(
        str(SERVER),
        *("--port", str(port), "--redis-url", redis_url, "--key-prefix", prefix),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    log = b""
    try:
        while not (found := re.search(rb"url\W+(ws://[^\"\s]+)", log)):
            line = await asyncio.wait_for(proc.stderr.readline(), 20)
            if not line:
                raise RuntimeError(f"solrace-server exited: {log.decode()}")
            log += line
        yield found.group(1).decode()
    finally:
        proc.terminate()
        await proc.wait()


def line_of(secret: bytes, options: dict[str, Any], first: object) -> list[dict[str, Any]]:
    """The certified line of the deal whose first board is ``first``, as the owner's
    boards after each move (the moves are in ``[1:]``'s ``"move"``)."""
    attempt = next(
        a
        for a in range(100)
        if view(deal("yukon", round_seed(secret, 1, a), options), owner=True) == first
    )
    found = try_candidate("yukon", options, secret, 1, attempt, None)
    assert found is not None and found.line is not None
    board = deal("yukon", round_seed(secret, 1, attempt), options)
    steps: list[dict[str, Any]] = [{"move": None, "board": view(board, owner=True)}]
    for move in found.line:
        apply_entry(board, move)
        steps.append({"move": move, "board": view(board, owner=True)})
    return steps


async def play(app: SolraceApp, steps: list[dict[str, Any]], think_s: float) -> None:
    """Each move ``think_s`` after the screen shows the board the last one produced."""
    for step in steps[1:]:
        await asyncio.sleep(think_s)
        app.send_move(step["move"])
        want = step["board"]
        await until(
            lambda want=want: app.controller.view == want or app.state.my_status != "playing"
        )
        if app.state.my_status != "playing":
            return


async def race(args: argparse.Namespace, rtt_ms: int) -> str:
    prefix = f"solrace-latency:{uuid.uuid4().hex}:"
    store = await Store.connect(args.redis_url, prefix)
    try:
        async with server(args.redis_url, prefix, args.server_port) as url:
            port = int(url.rsplit(":", 1)[1])
            async with FlakyLink(port, seed=1, port=args.proxy_port) as link:
                link.latency_s = rtt_ms / 2000
                return await _race(args, store, url, link)
    finally:
        await store.delete_all()
        await store.close()


async def _race(args: argparse.Namespace, store: Store, url: str, link: FlakyLink) -> str:
    near = SolraceApp(url, action="create", name="Near", params={"variant": "yukon"}, save=False)
    async with near.run_test(size=(100, 30)):
        await until(lambda: near.state.code is not None and near.state.phase == "lobby")
        meta = RoomMeta.decode(await store.load_meta(near.state.room or "") or b"")
        params = {"code": near.state.code}
        far = SolraceApp(link.url, action="join", name="Far", params=params, save=False)
        async with far.run_test(size=(100, 30)):
            await until(lambda: len(near.state.racers) == 2 and far.state.me is not None)
            far.toggle_ready()
            await until(
                lambda: all(
                    r.get("ready")
                    for r in near.state.racers.values()
                    if r["racer"] != near.state.me
                )
            )
            came: dict[str, float] = {}

            async def board_came(app: SolraceApp) -> None:
                await until(lambda: app.controller.view is not None and app.state.phase == "racing")
                came[app.name_] = time.time() * 1000

            waits = [asyncio.create_task(board_came(app)) for app in (near, far)]
            near.start_race()
            await asyncio.gather(*waits)
            steps = line_of(meta.secret, dict(meta.settings.options), near.controller.view)
            await asyncio.gather(*(play(app, steps, args.think) for app in (near, far)))
            await until(lambda: near.state.phase == "finished")
            result = near.state.result or {}
            done = {s["name"]: (s.get("elapsed_ms") or 0) / 1000 for s in result["standings"]}
            start = near.state.start_at_ms or 0
            down = [sum(c["down"] for c in step["board"]["tableau"]) for step in steps]
            turned = sum(after < before for before, after in itertools.pairwise(down))
            return (
                f"moves {len(steps) - 1} (cards turned up {turned})  near {done['Near']:.2f} s"
                f"  far {done['Far']:.2f} s  gap {done['Far'] - done['Near']:+.2f} s"
                f"  board after start: near {came['Near'] - start:.0f} ms,"
                f" far {came['Far'] - start:.0f} ms"
            )


def build_parser() -> argparse.ArgumentParser:
    """The tool's command line (tests/test_docs_inline_commands.py parses the pages'
    commands with it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # solrace.argtypes: one clear line for a bad number, as every solrace command says it
    parser.add_argument("rtt_ms", type=whole(0), nargs="+", help="round trips to measure, ms")
    parser.add_argument("--redis-url", required=True, help="a Redis the server may use")
    parser.add_argument(
        "--think", type=real(0, unit=" s"), default=0.3, help="seconds a move (0.3)"
    )
    parser.add_argument("--server-port", type=whole(0, 65535), default=0, help="(0: any free port)")
    parser.add_argument("--proxy-port", type=whole(0, 65535), default=0, help="(0: any free port)")
    return parser


async def main() -> None:
    args = build_parser().parse_args()
    for rtt in args.rtt_ms:
        print(f"RTT {rtt:>3} ms  {await race(args, rtt)}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
