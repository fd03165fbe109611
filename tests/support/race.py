"""Helpers for race tests: winning move lists, and the leak recorder."""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from solrace.net.server import RaceServer
from solrace.protocol import Envelope
from solrace.race import RacerGame
from solrace.race.fairness import round_seed
from solrace.rooms.node import Node
from solrace.rules import deal
from solrace.rules.cards import CARDS_PER_DECK, NAMES
from solrace.store import Store
from solrace_client import RaceClient, ServerError

from tests.store.conftest import room_keys

from .solver import solve

CARD = re.compile(r"^[A2-9TJQK][CDHS]$")


def winning_moves(secret: bytes, variant: str = "yukon", round_no: int = 1) -> list[str]:
    """A winning line of the deal of ``secret``'s round ``round_no`` (a new list: the
    caller may change it)."""
    return list(_winning_line(secret, variant, round_no))


@functools.cache
def _winning_line(secret: bytes, variant: str, round_no: int) -> tuple[str, ...]:
    """Solved once per deal and test process: the search is deterministic, and solving
    the same few test deals again in every test was 13 % of the room core tests' CPU
    (tests/rooms/test_core.py on uvloop and Redis: 17.5 s, 15.3 s once cached)."""
    board = deal(variant, round_seed(secret, round_no))
    moves = solve(board)
    assert moves is not None, "the test deal is no longer solvable by the test solver"
    return tuple(str(m) for m in moves)


async def play_until_done(client: RaceClient, moves: Iterable[str]) -> dict[str, Any]:
    reply: dict[str, Any] = {}
    for move in moves:
        reply = await client.move(move)
        if reply["status"] != "playing":
            break
    return reply


async def play_until_refused(
    client: RaceClient, line: Iterable[str]
) -> tuple[list[str], list[str]]:
    """Play ``line`` from the client's next seq on (a racer who knows a revealed deal
    replaying its winning line): the statuses of the moves taken, and the code of the
    one refused (it stops there, or once the game is over)."""
    played: list[str] = []
    refused: list[str] = []
    for move in list(line)[client.seq :]:
        try:
            played.append((await client.move(move))["status"])
        except ServerError as exc:
            refused.append(exc.code)
            break
        if played[-1] != "playing":
            break
    return played, refused


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


class _History:
    """One racer's game replayed from the revealed seed and log: the views of every
    state it passed through, the move count after each entry, and the card names the
    player had seen after each entry (seen cards stay known: undo takes nothing back)."""

    def __init__(self, variant: str, seed: int, options: Mapping[str, Any], log: list[str]):
        game = RacerGame(variant, seed, options, track_seen=True)
        self.owner_views = {_canon(game.view())}
        self.full_views = [game.board_view()]
        self.move_counts = [0]
        self.seen = [self._names(game)]
        for i, entry in enumerate(log):
            game.apply(entry, i)
            self.owner_views.add(_canon(game.view()))
            self.full_views.append(game.board_view())
            self.move_counts.append(game.board.move_count)
            self.seen.append(self._names(game))

    @staticmethod
    def _names(game: RacerGame) -> set[str]:
        return {NAMES[c % CARDS_PER_DECK] for c in game.seen or ()}

    def entries_for(self, moves: int) -> int:
        """How many log entries give ``moves`` (move counts only grow along a log)."""
        return max(i for i, m in enumerate(self.move_counts) if m <= moves)


def fair_match(shown: Mapping[str, Any], full: Mapping[str, Any]) -> bool:
    """Whether a fair view is ``full`` with some identities withheld (None) and some
    foundation cards counted as withheld, and nothing else changed."""
    if set(shown) - {"withheld_foundation"} != set(full):
        return False
    for key in ("variant", "options", "stock", "recycles"):
        if shown[key] != full[key]:
            return False

    def cards_match(a: list[Any], b: list[Any]) -> bool:
        return len(a) == len(b) and all(x is None or x == y for x, y in zip(a, b, strict=True))

    if len(shown["tableau"]) != len(full["tableau"]):
        return False
    for col, ref in zip(shown["tableau"], full["tableau"], strict=True):
        if col["down"] != ref["down"] or not cards_match(col["up"], ref["up"]):
            return False
    if not cards_match(shown["waste"], full["waste"]):
        return False
    withheld = 0
    for suit, ranks in full["foundations"].items():
        got = shown["foundations"][suit]
        pairs = zip(got, ranks, strict=True) if isinstance(ranks, list) else [(got, ranks)]
        for a, b in pairs:
            if a > b:
                return False
            withheld += b - a
    return withheld == shown.get("withheld_foundation", 0)


def _withholds(view: Mapping[str, Any]) -> bool:
    """Whether a fair view hides some of its cards (as None, or as withheld
    foundation cards)."""
    hidden = [c for col in view["tableau"] for c in col["up"] if c is None]
    hidden += [c for c in view["waste"] if c is None]
    return bool(hidden) or bool(view.get("withheld_foundation"))


def _shown_names(view: Mapping[str, Any]) -> set[str]:
    names = {c for col in view["tableau"] for c in col["up"] if c is not None}
    names |= {c for c in view["waste"] if c is not None}
    for suit, ranks in view["foundations"].items():
        for count in ranks if isinstance(ranks, list) else [ranks]:
            names |= {"A23456789TJQK"[r] + suit for r in range(count)}
    return names


def check_no_leaks(
    frames: list[Envelope],
    result: Mapping[str, Any],
    settings: Mapping[str, Any],
    racer: int | None = None,
    *,
    open_boards: bool = False,
) -> int:
    """Fail if any frame before ``race_over`` carries the seed or salt, or a card its
    recipient may not learn.

    On a racer's own connection (``racer``), its boards (``moved``, ``joined``, its own
    ``board``) must each equal the racer's view of a state its game really passed
    through, and it gets no other racer's board. Any other connection — a spectator,
    which may be a racer watching from a second connection — gets boards that are a
    real state of their racer's game withholding nothing, and every card shown must
    be one that EVERY racer still racing at that point of the stream has already seen
    in its own game (who races, and how far, is read from the events the
    connection received before the frame) — unless the round's spectating is open
    (``open_boards``: every racer agreed to whole boards). Outside board views, no
    frame may name a card at all. Returns the number of frames checked.
    """
    seed, salt = result["seed"], result["salt"]
    variant, options = settings["variant"], settings["options"]
    undo = bool(options.get("undo", False))
    games = {
        s["racer"]: _History(variant, seed, options, list(s["log"])) for s in result["standings"]
    }
    entries: dict[int, int] = dict.fromkeys(games, 0)
    status: dict[int, str] = dict.fromkeys(games, "playing")
    version = 0

    def still_racing(r: int) -> bool:
        return status[r] == "playing" or (status[r] == "stuck" and undo)

    checked = 0
    for envelope in frames:
        if envelope.t == "race_over":
            break
        data = dict(envelope.d)
        if envelope.v is not None and envelope.v > version:
            version = envelope.v
            if envelope.t in ("progress", "finished"):
                r = data["racer"]
                entries[r] = max(entries[r], games[r].entries_for(data["moves"]))
                status[r] = data.get("status", "finished")
            elif envelope.t == "racer_left" and data["racer"] in status:
                status[data["racer"]] = "left"
            elif envelope.t == "started":  # every racer still in the room races now
                for r, now in status.items():
                    status[r] = "playing" if now in ("waiting", "playing") else now
        if envelope.t == "error":
            data.pop("message", None)  # refusal reasons name the player's own visible cards
        own: list[tuple[int, Any]] = []
        fair: list[tuple[int, Any]] = []
        if envelope.t == "moved":
            assert racer is not None, "a spectator received a moved reply"
            own.append((racer, data.pop("board")))
        elif envelope.t == "board":
            target = own if racer is not None and data["racer"] == racer else fair
            target.append((data["racer"], data.pop("view")))
        elif envelope.t in ("joined", "watching", "resync"):
            snapshot = dict(data.pop("snapshot"))
            you = snapshot.pop("you", None)
            if you and you.get("board"):
                own.append((you["racer"], you["board"]))
            if envelope.t != "joined" or snapshot["version"] > version:
                version = snapshot["version"]
                for info in snapshot["racers"]:
                    if info["racer"] in games:
                        r = info["racer"]
                        entries[r] = games[r].entries_for(info["moves"])
                        counting_down = snapshot["phase"] == "countdown"
                        waiting = counting_down and info["status"] == "waiting"
                        status[r] = "playing" if waiting else info["status"]  # (or left)
            data["snapshot"] = snapshot
        for owner, view in own:
            assert racer == owner, f"racer {racer} got racer {owner}'s own board"
            assert _canon(view) in games[owner].owner_views, (
                f"a {envelope.t} frame shows a board no game had"
            )
        for about, view in fair:
            assert racer is None, f"racer {racer}'s connection got racer {about}'s board"
            # A card shown only as withheld still leaks: moved onto a shown card it
            # has the rank and colour the rules demand, and its column says where it
            # lies in every racer's deal. A fair board withholds nothing, or is not sent.
            assert not _withholds(view), (
                f"a {envelope.t} frame shows racer {about}'s board with cards withheld"
            )
            assert any(fair_match(view, full) for full in games[about].full_views), (
                f"a {envelope.t} frame shows a board no game had"
            )
            for r in games:
                if still_racing(r) and not open_boards:
                    unseen = _shown_names(view) - games[r].seen[entries[r]]
                    assert not unseen, (
                        f"racer {about}'s board shows {sorted(unseen)}, "
                        f"not yet seen by racer {r} who is still racing"
                    )
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


async def archived_result(store: Store, race: str, timeout: float = 10) -> bytes:
    """The race's archived result, once saved: the node archives it after it has sent
    the race_over, so a client can see the end a moment before the archive holds it."""
    async with asyncio.timeout(timeout):
        while (kept := await store.load_result(race)) is None:
            await asyncio.sleep(0.02)
    return kept


#: Snapshots of a room tried before giving up (snapshot_room): its node's writes
#: settle within a few.
_SNAPSHOT_TRIES = 20


def _store_of(server: RaceServer | Node) -> Store:
    """The store of a server's node, or of a node driven without sockets (tests/rooms)."""
    return server.store if isinstance(server, Node) else server.node.store


async def snapshot_room(server: RaceServer | Node, room_id: str) -> dict[str, bytes]:
    """Every key of the room, dumped (DUMP) at one instant, as a snapshot of Redis holds
    it: in one transaction (a room's keys share a slot), taken again if the room's keys
    changed between their listing and it. Dumped one by one, a write of the node in
    between (a lobby's deal_chosen) gave a stream at one version and a version key at
    the next, no snapshot Redis takes: restored, the room's history had a gap, and it
    was lost (Node.history_broken; before, "the room is busy" for good, CI)."""
    store = _store_of(server)
    raw = store._redis  # the test saves and restores the real keys
    for _ in range(_SNAPSHOT_TRIES):
        keys = sorted(await room_keys(store, room_id))
        async with raw.pipeline(transaction=True) as pipe:
            for key in keys:
                pipe.dump(key)
            dumped: list[bytes | None] = await pipe.execute()
        if None not in dumped and sorted(await room_keys(store, room_id)) == keys:
            return {key: value for key, value in zip(keys, dumped, strict=True) if value}
    raise AssertionError(f"the keys of room {room_id} kept changing: no snapshot")


async def restore_room(server: RaceServer | Node, room_id: str, snapshot: dict[str, bytes]) -> None:
    """Redis restarted from ``snapshot`` (:func:`snapshot_room`): the room's keys as they
    were then, the keys written since gone (a store rewind) — all at once, in one
    transaction (a room's keys share a slot), as a restart gives them. Restored key by
    key, a node's own writes landing in between (its racers' offline after a race) left
    the version key ahead of the stream, no rewind Redis makes, and every decision of
    the room conflicted: ``unavailable``, for good (CI, twice)."""
    raw = _store_of(server)._redis
    stale = set(await snapshot_room(server, room_id)) - set(snapshot)
    async with raw.pipeline(transaction=True) as pipe:
        for key in stale:
            pipe.delete(key)
        for key, dumped in snapshot.items():
            pipe.restore(key, 0, dumped, replace=True)
        await pipe.execute()


async def restore_store(
    server: RaceServer, room_id: str, snapshot: dict[str, bytes], race: str
) -> None:
    """The whole store restored from ``snapshot`` (:func:`snapshot_room`), taken before
    ``race`` ended: the room's keys as they were then (:func:`restore_room`), and the
    race's archived result, saved after its race_over, gone with them, as a restart
    from one snapshot (or the embedded store's restore) gives it. With :func:`restore_room`
    alone the archive stays (on a Cluster, the room's shard rewound, not the archive's):
    a node taking the room up then ends the round itself (Node._archived_already)."""
    store = server.node.store
    await archived_result(store, race)  # saved after the race_over: there, then gone
    await restore_room(server, room_id, snapshot)
    await store._redis.delete(store.keys.result(race))
