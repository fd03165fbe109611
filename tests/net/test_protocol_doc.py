"""docs/protocol.md says exactly what the server does, for the points a client written
from the document alone got wrong (issue 11, item 10). Each test names the sentence it
holds the server to, checks the sentence is still in the document, and checks the
server against it on real nodes."""

from __future__ import annotations

import asyncio
import json
import random
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from solrace.protocol import (
    CLIENT_MESSAGES,
    SUBPROTOCOL,
    Envelope,
    limits,
    parse_client_message,
)
from solrace.race.decisions import COUNTDOWN_MS
from solrace.rules import VARIANTS, variant_class
from solrace.rules.moves import MAX_COLUMNS
from solrace_client import RaceClient, ServerError
from solrace_client.boardview import board_from_view
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Subprotocol

from tests.support.race import lobby, play_until_done, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster

DOC = " ".join((Path(__file__).parents[2] / "docs" / "protocol.md").read_text().split())


def says(sentence: str) -> None:
    """The document says ``sentence`` (white space folded)."""
    assert " ".join(sentence.split()) in DOC, f"docs/protocol.md no longer says: {sentence}"


async def test_the_http_400_body_is_as_documented(cluster: Cluster) -> None:
    says(
        "exactly `Failed to open a WebSocket connection: unsupported_version: offered "
        "solrace.v0; this server speaks solrace.v1.` (and a newline)"
    )
    server = await cluster.node()
    with pytest.raises(InvalidStatus) as refused:
        await connect(server.url, subprotocols=["solrace.v0"])  # type: ignore[list-item]
    assert refused.value.response.status_code == 400
    assert bytes(refused.value.response.body or b"") == (
        b"Failed to open a WebSocket connection: unsupported_version: offered solrace.v0; "
        b"this server speaks solrace.v1.\n"
    )


async def test_a_bad_option_is_named_by_a_dotted_path(cluster: Cluster) -> None:
    says("inside `options`, a dotted path: `options.undo`")
    server = await cluster.node()
    client = await RaceClient.connect(server.url)
    with pytest.raises(ServerError) as bad:
        await client.create("yukon", "Ann", options={"undo": "x" * 40})
    assert bad.value.code == "bad_message" and bad.value.data["field"] == "options.undo"
    for options, field in (({"undo": 3}, "options.undo"), ({"dro": 3}, "options.dro")):
        with pytest.raises(ServerError) as refused:  # the engine's refusals name it too
            await client.create("yukon", "Ann", options=options)
        assert refused.value.code == "bad_options" and refused.value.data["field"] == field
    await client.close()


async def _racing_pair(
    server_url: str, variant: str = "yukon", **settings: Any
) -> tuple[RaceClient, RaceClient]:
    """Ann creates a room (``variant``, ``settings``), Bob joins; the race has started."""
    ann, bob = await RaceClient.connect(server_url), await RaceClient.connect(server_url)
    await ann.create(variant, "Ann", **settings)
    await bob.join(ann.code or "", "Bob")
    await bob.ready()
    await ann.start()
    await ann.wait_started()
    await bob.wait_started()
    return ann, bob


async def test_a_move_onto_its_own_column_is_bad_notation(cluster: Cluster) -> None:
    says("and so is a tableau move onto its own column (`1:1>1`, not a move in any position)")
    server = await cluster.node()
    ann, bob = await _racing_pair(server.url)
    with pytest.raises(ServerError) as same:
        await ann.move("1:1>1")
    assert same.value.code == "bad_notation" and same.value.data["seq"] == 0
    says(
        "a well-shaped move the engine cannot read (a column past 10, the most any variant "
        "has: `11:1>2`) is also `bad_notation`, while a column this variant lacks but "
        "another has (`8:1>2` in Yukon) is `illegal_move`"
    )
    assert max(variant_class(v)().columns for v in VARIANTS) == MAX_COLUMNS == 10
    for move, code in (("11:1>2", "bad_notation"), ("8:1>2", "illegal_move")):
        with pytest.raises(ServerError) as refused:
            await ann.move(move)
        assert refused.value.code == code, move
    for client in (ann, bob):
        await client.close()


async def test_a_racer_done_racing_gets_wrong_phase(cluster: Cluster) -> None:
    says(
        "A racer whose status is no longer `playing` or `stuck` (resigned, finished, "
        "timed out) gets `wrong_phase` for `move`, and for `resign` unless it resigned: "
        "its `resign` again is `ok`"
    )
    server = await cluster.node()
    ann, bob = await _racing_pair(server.url)
    await ann.resign()
    with pytest.raises(ServerError) as moved:
        await ann.move("D")
    assert moved.value.code == "wrong_phase"
    await ann.resign()  # a retry whose reply was lost finds it made: ok
    for client in (ann, bob):
        await client.close()


async def test_a_private_room_watched_by_id_is_unknown(cluster: Cluster) -> None:
    says("watching one by `room` id answers `unknown_room`, as for a room that does not exist.")
    server = await cluster.node()
    ann, eve = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann", private=True)
    with pytest.raises(ServerError) as by_id:
        await eve.watch(room=ann.room)
    assert by_id.value.code == "unknown_room"
    assert (await eve.watch(code=ann.code))["room"] == ann.room  # by code it works
    for client in (ann, eve):
        await client.close()


async def test_the_countdown_may_come_before_the_ok_to_start(cluster: Cluster) -> None:
    says("The `countdown` event may reach the host **before** the `ok` reply to its `start`")
    server = await cluster.node()
    orders = set()
    for _ in range(3):
        ann, bob = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
        await ann.create("yukon", "Ann")
        await bob.join(ann.code or "", "Bob")
        await bob.ready()
        await ann.start()
        await ann.next_event("countdown")
        kinds = [e.t for e in ann.received if e.t in ("countdown", "ok")]
        orders.add(tuple(kinds[-2:]))
        for client in (ann, bob):
            await client.close()
    assert ("countdown", "ok") in orders  # what the document warns of does happen


FRAMES = {
    "str": b"\xdb" + struct.pack(">I", 100_000) + b"ab",
    "bin": b"\xc6" + struct.pack(">I", 100_000) + b"ab",
    "ext": b"\xc9" + struct.pack(">I", 100_000) + b"\x01ab",
    "array": b"\xdd" + struct.pack(">I", 100_000) + b"\x01",
    "map": b"\xdf" + struct.pack(">I", 100_000) + b"\x01",
    "nesting": b"\x81\xa1d" + b"\x81\xa1a" * 6 + b"\xc0",
}


@pytest.mark.parametrize(
    ("kind", "close"),
    [
        ("str", 1007),
        ("bin", 1007),
        ("ext", 1007),
        ("array", 1009),
        ("map", 1009),
        ("nesting", 1009),
    ],
)
async def test_huge_truncated_declarations_close_as_documented(
    cluster: Cluster, kind: str, close: int
) -> None:
    says(
        "including a string, `bin` or `ext` whose declared length is huge but whose bytes "
        "are not there (1007, not 1009). An array or map header declaring more items than "
        "the limits allow, or nesting too deep, is closed 1009 (`too_large`)"
    )
    server = await cluster.node()
    client = await RaceClient.connect(server.url)
    await client.send_raw(FRAMES[kind])
    await asyncio.wait_for(client.closed, 5)
    assert client.close_code == close
    assert client.ws.close_reason == {1007: "bad_frame", 1009: "too_large"}[close]


def test_the_rate_limit_row_names_the_server_flags() -> None:
    says("the defaults of `solrace-server --rate-per-s/--rate-burst`")
    assert re.search(r"20 messages/s sustained, bursts of 40", DOC)


async def test_a_racer_stuck_without_undo_is_done_racing(cluster: Cluster) -> None:
    says(
        "A racer **`stuck` in a room with undo off** is done racing: it has no move, and the "
        "race ends without waiting for it (its standing is by the cards it put up). Every "
        '`move` it sends, an `undo` included, is `wrong_phase` "you are not racing now"'
    )
    server = await cluster.node()
    # Russian has no stock: random moves soon leave a racer with none (an audit's
    # racers were stuck after 12 and 13 moves).
    ann, bob = await _racing_pair(
        server.url, "russian", private=True, deals="random", options={"undo": False}
    )
    rng, status = random.Random(1), "playing"
    for _ in range(2_000):  # Bob races on, so the race is not over while Ann plays
        moves = board_from_view(ann.board or {}).legal_moves()
        status = (await ann.move(str(rng.choice(moves))))["status"]
        if status != "playing":
            break
    assert status == "stuck"
    for move in ("undo", "D"):
        with pytest.raises(ServerError) as refused:
            await ann.move(move)
        assert (refused.value.code, refused.value.message) == (
            "wrong_phase",
            "you are not racing now",
        )
    await ann.resign()  # while Bob races, a stuck racer may still resign
    for client in (ann, bob):
        await client.close()


def test_the_keepalive_and_the_non_reading_client_are_the_constants() -> None:
    """The numbers §1 and §13 give a client in another language are the server's
    (tests/net/test_session.py holds the server to them on the wire)."""
    interval, timeout = limits.KEEPALIVE_INTERVAL_S, limits.KEEPALIVE_TIMEOUT_S
    says(
        f"The server sends a WebSocket ping every {interval:g} s "
        "(`limits.KEEPALIVE_INTERVAL_S`) and closes a connection that has not answered it "
        f"with a pong within {timeout:g} s (`KEEPALIVE_TIMEOUT_S`): close **1011**, reason "
        "`keepalive ping timeout`"
    )
    says(f"must answer every ping within {timeout:g} s")
    says(f"a WebSocket ping left unanswered for {timeout:g} s")
    mib = limits.MAX_UNREAD_BYTES / 2**20
    says(f"at once when more than {mib:g} MiB (`limits.MAX_UNREAD_BYTES`) wait")
    assert interval + timeout == limits.STUCK_OUTPUT_S
    says(f"otherwise {limits.STUCK_OUTPUT_S:g} s (`limits.STUCK_OUTPUT_S`, the keepalive's")
    says(f"output that has not\nmoved for {limits.STUCK_OUTPUT_S:g} s")
    node_mib = limits.MAX_UNREAD_BYTES_PER_NODE / 2**20
    says(f"or when the node's connections together leave more than {node_mib:g} MiB\n")
    says("(`limits.MAX_UNREAD_BYTES_PER_NODE`, `solrace-server --max-unread-mib`")


async def test_a_race_left_by_all_but_one_in_the_countdown_starts_with_one(
    cluster: Cluster,
) -> None:
    says(
        "A racer who leaves during the countdown may leave only one racer: the countdown "
        "is not called off, and the race starts with that one racer"
    )
    says("`wrong_phase` (checked first: a non-host's `start` in the countdown")
    says(f"the race starts {COUNTDOWN_MS // 1000} s later (`start_at_ms`")
    server = await cluster.node(countdown_ms=COUNTDOWN_MS)  # the real one, 3 s
    ann, bob = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann")
    await bob.join(ann.code or "", "Bob")
    await bob.ready()
    await ann.start()
    await ann.next_event("countdown")
    with pytest.raises(ServerError) as early:
        await bob.start()  # not the host, in the countdown: the phase is checked first
    assert early.value.code == "wrong_phase"
    await bob.leave()
    await ann.next_event("started", timeout=10)
    statuses = {r["name"]: r["status"] for r in ann.view.racers.values()}
    assert (ann.view.phase, statuses) == ("racing", {"Ann": "playing", "Bob": "left"})
    for client in (ann, bob):
        await client.close()


def _json_examples() -> list[dict[str, Any]]:
    """Every message the ```json blocks and the inline `{"t": …}` examples show."""
    text = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()
    found: list[dict[str, Any]] = []
    decoder = json.JSONDecoder()
    for block in re.findall(r"^```json\n(.*?)^```$", text, re.M | re.S):
        rest = block.strip()
        while rest:
            message, end = decoder.raw_decode(rest)
            found.append(message)
            rest = rest[end:].strip()
    found += [json.loads(inline) for inline in re.findall(r'`(\{"t": [^`]*\})`', text)]
    return found


def _shape_errors(shown: Any, sent: Any, where: str) -> list[str]:
    """Where the example ``shown`` has other fields than the server's ``sent``: a map
    with a "…" key is elided (its fields must be among the sent ones), a list is
    checked by its first item."""
    if isinstance(shown, dict) and isinstance(sent, dict):
        keys, real = set(shown) - {"…"}, set(sent)
        wrong = keys - real if "…" in shown else keys ^ real
        errors = [f"{where}: {sorted(wrong)} (the server sends {sorted(real)})"] if wrong else []
        for key in keys & real:
            errors += _shape_errors(shown[key], sent[key], f"{where}.{key}")
        return errors
    if isinstance(shown, list) and isinstance(sent, list) and shown and sent:
        return _shape_errors(shown[0], sent[0], f"{where}[0]")
    return []


async def test_every_json_example_is_what_the_server_takes_and_sends(cluster: Cluster) -> None:
    """A client written from the document copies its examples: each request example is
    one the server accepts, and each reply, event, notice and snapshot example has
    exactly the fields the server sends in its place (a third-party audit found the
    `race_over` example without `certificate`, and a snapshot's settings without the
    resolved options)."""
    examples = _json_examples()
    for shown in examples:
        if shown.get("t") in CLIENT_MESSAGES:
            request = Envelope(shown["t"], id=shown.get("id"), d=shown.get("d") or {})
            parse_client_message(request)

    server = await cluster.node()
    ann, bob, cy = await lobby(server.url, names=("Ann", "Bob", "Cy"))
    watcher, eve = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
    await watcher.watch(code=ann.code)
    await cy.leave()  # racer_left
    await ann.start()
    for client in (ann, bob):
        await client.wait_started()
    snapshot = (await bob.resume())["snapshot"]  # a racer's, during the race
    with pytest.raises(ServerError):
        await ann.move("1:5>2")  # illegal_move: column 1 holds one card
    with pytest.raises(ServerError) as refused:
        await eve.create("yukon", "Ann", max_racers=9)
    await bob.resign()
    assert (await play_until_done(ann, winning_moves(SOLVABLE_SECRET)))["status"] == "finished"
    await watcher.next_event("race_over", timeout=10)
    await ann.ping()
    await ann.rematch()
    await watcher.next_event("room_reset", timeout=10)

    sent: dict[str, Any] = {"snapshot": snapshot}
    for client in (watcher, ann, bob, cy, eve):  # the `board` example is a spectator's
        for message in client.received:
            key = message.t if message.t != "error" else f"error {message.d['code']}"
            sent.setdefault(key, message.d)
    errors: list[str] = []
    unmatched: list[str] = []
    for shown in examples:
        t = shown.get("t", "snapshot")
        if t in CLIENT_MESSAGES:
            continue
        d: dict[str, Any] = (shown.get("d") or {}) if t != "snapshot" else shown
        key = t if t != "error" else f"error {d['code']}"
        if key not in sent:
            unmatched.append(key)
            continue
        errors += _shape_errors(d, sent[key], key)
    assert not errors, "\n".join(errors)
    assert unmatched == ["error unavailable"]  # needs a store outage: tests/net/test_faults.py
    # The bad_message example is the server's reply, word for word.
    bad = next(e for e in examples if e.get("d", {}).get("field") == "max_racers")
    assert refused.value.data == bad["d"]
    for client in (ann, bob, cy, watcher, eve):
        await client.close()


async def test_ready_false_naming_open_spectating_agrees_to_nothing(cluster: Cluster) -> None:
    """An audit's client sent ``ready: false`` with ``spectators: "open"``, which the
    table seemed to refuse ("Elsewhere refused"): the server takes it, as agreeing to
    nothing, and refuses the field only in a room without open spectating."""
    says(
        "this racer agrees that spectators see whole boards (with `ready: false` it agrees "
        "to nothing). In a room without open spectating refused (`bad_message`)"
    )
    server = await cluster.node()
    ann, bob = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann", private=True, spectators="open")
    await ann.ready(True, spectators="open")
    await ann.ready(False, spectators="open")
    assert (await ann.next_event("ready_changed")).d.get("open_boards") is True
    changed = await ann.next_event("ready_changed")
    assert changed.d == {"racer": 1, "ready": False}  # no open_boards: no agreement
    await bob.create("yukon", "Bob", private=True)
    with pytest.raises(ServerError) as refused:
        await bob.ready(False, spectators="open")
    assert refused.value.code == "bad_message"
    for client in (ann, bob):
        await client.close()


@pytest.mark.parametrize(("rate", "header"), [(None, "20 40"), (2.0, "2 4")])
async def test_the_handshake_says_the_connections_rate_limit(
    cluster: Cluster, rate: float | None, header: str
) -> None:
    says(
        "`Solrace-Rate-Limit: 20 40` by default, `Solrace-Rate-Limit: 2 4` on a server run "
        "with `--rate-per-s 2 --rate-burst 4`"
    )
    server = await cluster.node(rate=rate, burst=None if rate is None else 4.0)
    async with connect(server.url, subprotocols=[Subprotocol(SUBPROTOCOL)]) as ws:
        assert ws.response is not None
        assert ws.response.headers.get_all("Solrace-Rate-Limit") == [header]
