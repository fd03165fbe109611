"""Helpers for race tests: winning move lists, and the leak recorder."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from solrace.protocol import Envelope
from solrace.race import RacerGame
from solrace.race.fairness import round_seed
from solrace.rules import deal
from solrace_client import RaceClient

from .solver import solve

CARD = re.compile(r"^[A2-9TJQK][CDHS]$")


def winning_moves(secret: bytes, variant: str = "yukon", round_no: int = 1) -> list[str]:
    board = deal(variant, round_seed(secret, round_no))
    moves = solve(board)
    assert moves is not None, "the test deal is no longer solvable by the test solver"
    return [str(m) for m in moves]


async def play_until_done(client: RaceClient, moves: Iterable[str]) -> dict[str, Any]:
    reply: dict[str, Any] = {}
    for move in moves:
        reply = await client.move(move)
        if reply["status"] != "playing":
            break
    return reply


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _numbers(value: Any) -> Iterable[int]:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _numbers(item)


def _canon(view: Mapping[str, Any]) -> str:
    return json.dumps(view, sort_keys=True)


def check_no_leaks(
    frames: list[Envelope],
    result: Mapping[str, Any],
    settings: Mapping[str, Any],
    racer: int | None = None,
) -> int:
    """Fail if any frame before ``race_over`` carries the seed or salt, or a card that
    was face down at the time in the game it is shown for.

    Every board view in a frame must equal the engine's view of one of the states its
    racer's game actually passed through (replayed from the revealed seed and logs), so
    it shows exactly the face-up cards of a real moment; outside board views, no frame
    may name a card at all. ``racer`` is the recipient's racer id (None for a
    spectator): its ``moved`` boards must be states of its own game. Returns the
    number of frames checked.
    """
    seed, salt = result["seed"], result["salt"]
    variant, options = settings["variant"], settings["options"]
    allowed: dict[int, set[str]] = {}
    for standing in result["standings"]:
        game = RacerGame(variant, seed, options)
        views = {_canon(game.view()), _canon(game.board_view())}
        for i, entry in enumerate(standing["log"]):
            game.apply(entry, i)
            views.add(_canon(game.view()))
            views.add(_canon(game.board_view()))
        allowed[standing["racer"]] = views
    checked = 0
    for envelope in frames:
        if envelope.t == "race_over":
            break
        data = dict(envelope.d)
        if envelope.t == "error":
            data.pop("message", None)  # refusal reasons name the player's own visible cards
        views: list[tuple[int, Any]] = []
        if envelope.t == "moved":
            assert racer is not None, "a spectator received a moved reply"
            views.append((racer, data.pop("board")))
        elif envelope.t == "board":
            views.append((data["racer"], data.pop("view")))
        elif envelope.t in ("joined", "watching"):
            snapshot = dict(data.pop("snapshot"))
            you = snapshot.pop("you", None)
            if you and you.get("board"):
                views.append((you["racer"], you["board"]))
            data["snapshot"] = snapshot
        for owner, view in views:
            text = _canon(view)
            assert text in allowed[owner], f"a {envelope.t} frame shows a board no game had"
        leaked = [s for s in _strings(data) if CARD.match(s)]
        assert not leaked, f"{envelope.t} frame names cards {leaked}"
        assert seed not in set(_numbers(data)), f"{envelope.t} frame carries the seed"
        assert salt not in set(_strings(data)), f"{envelope.t} frame carries the salt"
        checked += 1
    return checked


async def racing(
    *urls: str, names: tuple[str, ...] = ("Ann", "Bob"), **settings: Any
) -> list[RaceClient]:
    """Racers (one per name; the i-th connects to ``urls[i % len(urls)]``) in a new
    Yukon room created by the first, everyone ready, started, each holding its board."""
    clients = await lobby(*urls, names=names, **settings)
    await clients[0].start()
    for client in clients:
        await client.wait_started()
    return clients


async def lobby(
    *urls: str, names: tuple[str, ...] = ("Ann", "Bob"), **settings: Any
) -> list[RaceClient]:
    """Racers in a new Yukon room's lobby, all but the host ready."""
    clients = [await RaceClient.connect(urls[i % len(urls)]) for i in range(len(names))]
    await clients[0].create("yukon", names[0], **settings)
    for client, name in zip(clients[1:], names[1:], strict=True):
        await client.join(clients[0].code or "", name)
    for client in clients[1:]:
        await client.ready()
    # Wait until the host has seen every ready flag (they may come through other nodes).
    for _ in clients[1:]:
        await clients[0].wait_for(lambda e: e.t == "ready_changed")
    return clients


async def close_all(*clients: RaceClient) -> None:
    for client in clients:
        await client.close()
