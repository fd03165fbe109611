"""Render the terminal client mid-race to an SVG (and, with cairosvg, a PNG).

    python docs/tools/screenshot.py docs/screenshot.svg --png docs/screenshot.png

A documentation tool, not part of the client (the client never imports the server).
Starts an in-process server (on the embedded engine, in a throw-away data directory),
opens the real app headless at 80×24, lets two bot opponents join and play, plays a few
moves, picks a card so the legal destinations light up, and saves the screen. Nothing
is written to the user's config or data directory.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from solrace.net.server import RaceServer
from solrace.rooms.node import Node
from solrace.rules import Move
from solrace.rules.moves import TABLEAU, TO_FOUNDATION
from solrace.store import Store
from solrace_client.boardview import board_from_view
from solrace_client.connection import RaceClient
from solrace_client.tui.app import SolraceApp
from solrace_client.tui.widgets import LobbyScreen, PlayScreen

#: A room secret with a friendly round-1 deal (the one the test suite plays).
SECRET = bytes([2]) * 32


def choose(view: dict[str, Any], rng: random.Random) -> str | None:
    """A plausible move: to a foundation if possible, else one that turns a card up."""
    board = board_from_view(view)
    moves = board.legal_moves()
    if not moves:
        return None
    up = [m for m in moves if m.kind == TO_FOUNDATION]
    if up:
        return str(up[0])

    def uncovers(m: Move) -> bool:
        column = view["tableau"][m.src]
        return m.kind == TABLEAU and m.number == len(column["up"]) and column["down"] > 0

    useful = [m for m in moves if uncovers(m)]
    return str(rng.choice(useful or moves))


async def bot(url: str, code: str, name: str, moves: int, seed: int) -> RaceClient:
    client = await RaceClient.connect(url)
    await client.join(code, name)
    await client.ready()
    await client.next_event("started", timeout=30)
    while client.board is None:
        await client.next_event("board", timeout=10)
    rng = random.Random(seed)
    for _ in range(moves):
        move = choose(client.board, rng)
        if move is None:
            break
        await client.move(move)
        await asyncio.sleep(0.01)
    return client


async def wait(pilot: Any, predicate: Any, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("the screenshot race did not get going")
        await pilot.pause(0.05)


async def shoot(svg: Path, size: tuple[int, int] = (80, 24)) -> None:
    scratch = tempfile.TemporaryDirectory(prefix="solrace-screenshot-")
    store = await Store.start_embedded(scratch.name, prefix="screenshot:")
    node = Node(store, room_secret=lambda: SECRET, countdown_ms=300)
    server = RaceServer(node, "127.0.0.1", 0)
    await server.start()
    app = SolraceApp(
        server.url, action="create", name="Ann", params={"variant": "yukon"}, save=False
    )
    try:
        async with app.run_test(size=size) as pilot:
            await wait(pilot, lambda: isinstance(app.screen, LobbyScreen) and app.state.code)
            code = str(app.state.code)
            bots = [
                asyncio.create_task(bot(server.url, code, "Bob", 30, 1)),
                asyncio.create_task(bot(server.url, code, "Cy", 12, 2)),
            ]
            racers = app.state.racers
            await wait(pilot, lambda: sum(r.get("ready") is True for r in racers.values()) == 2)
            await pilot.press("s")
            await wait(pilot, lambda: isinstance(app.screen, PlayScreen) and app.controller.view)
            rng = random.Random(3)
            for n in range(1, 6):
                move = choose(dict(app.controller.view or {}), rng)
                if move is None:
                    break
                app.send_move(move)
                # The view has the reply as it arrives; the board on screen once the
                # app has taken it too.
                await wait(
                    pilot,
                    lambda n=n: (
                        app.state.next_seq == n and app.controller.view == app.state.my_board
                    ),
                )
            clients = await asyncio.gather(*bots)
            await pilot.pause(0.5)
            # Pick a group that has somewhere to go, so its destinations light up.
            board = app.controller.board
            moves = [m for m in board.legal_moves() if m.kind == TABLEAU] if board else []
            if moves:
                longest = max(moves, key=lambda m: m.number)
                app.column(longest.src)
                for _ in range(longest.number - 1):
                    app.cursor("up")
                app.activate()
            await pilot.pause(0.3)
            app.save_screenshot(str(svg))
            for client in clients:
                await client.close()
            if app.client is not None:
                await app.client.close()
    finally:
        await server.drain()  # closes the store: the engine stops
        scratch.cleanup()


def _cairosvg() -> Any:
    """cairosvg, or exit with one line: called before the race, which takes seconds and
    writes the SVG, so that a --png that cannot be written is said at once. (Without
    the cairo library, cairocffi fails with OSError rather than ImportError.)"""
    try:
        return importlib.import_module("cairosvg")
    except (ImportError, OSError):
        sys.exit(
            "screenshot: --png needs cairosvg (pip install cairosvg), or leave --png out "
            "and convert the SVG yourself"
        )


def to_png(cairosvg: Any, svg: Path, png: Path) -> None:
    # The SVG asks for Fira Code; name a monospace font that has the card suits and
    # block characters, so the picture keeps the terminal's grid.
    text = svg.read_text(encoding="utf-8")
    for family in ('"Fira Code"', "Fira Code, monospace"):
        text = text.replace(family, '"DejaVu Sans Mono", monospace')
    cairosvg.svg2png(bytestring=text.encode(), write_to=str(png), output_width=1600)


def _size(text: str) -> tuple[int, int]:
    """An argparse type: ``COLSxROWS``, as large as the UI's smallest screen or more,
    and no larger than a screen is (``99999999x99999999`` was taken, and the app laid
    out on it ran for as long as it was let)."""
    cols, sep, rows = text.lower().partition("x")
    if not (sep and cols.isdigit() and rows.isdigit()):
        raise argparse.ArgumentTypeError(f"not COLSxROWS: {text!r} (e.g. 80x24)")
    if int(cols) < 40 or int(rows) < 12:
        raise argparse.ArgumentTypeError(f"at least 40x12, got {text}")
    if int(cols) > 500 or int(rows) > 200:
        raise argparse.ArgumentTypeError(f"at most 500x200, got {text}")
    return int(cols), int(rows)


def _writable(text: str) -> Path:
    """An argparse type: a file path whose directory exists (checked before the run)."""
    path = Path(text)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"no such directory: {path.parent}")
    return path


def build_parser() -> argparse.ArgumentParser:
    """The tool's command line (tests/test_docs_inline_commands.py parses the pages'
    commands with it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("svg", type=_writable, help="where to write the SVG screenshot")
    parser.add_argument("--png", type=_writable, help="also write a PNG (needs cairosvg)")
    parser.add_argument(
        "--size", type=_size, default="80x24", help="terminal size, COLSxROWS: 40x12 to 500x200"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cairosvg = _cairosvg() if args.png else None
    try:
        asyncio.run(shoot(args.svg, args.size))
    except OSError as exc:  # e.g. the file cannot be written after all
        sys.exit(f"screenshot: {exc.filename or args.svg}: {exc.strerror or exc}")
    print(f"wrote {args.svg}")
    if args.png:
        to_png(cairosvg, args.svg, args.png)
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
