"""Chaos with real processes (issue 10 item 5): a private Redis with deploy/redis.conf
(AOF, ``appendfsync always``), three ``solrace-server`` nodes and nginx in front as in
deploy/local.sh (tests/support/stack.py), and ten rooms of three bots racing through
nginx. Mid-race one node is killed with SIGKILL; once its racers are back, Redis is
killed with SIGKILL and, after an outage longer than a node's lease, restarted from its
append-only file.

What it proves (docs/deploy.md, "Chaos test"):

- every move a racer got ``moved`` for is in its move log afterwards, at the
  acknowledged ``seq`` — in the logs Redis holds and in the result every racer got;
- every race ends (all done, or at its time limit), with places 1..n, at most one
  winner, the first finisher first, and nobody forfeited by an outage;
- every racer the dead node served resumes with its token through the load balancer
  and races on; moves refused ``unavailable`` during the Redis outage are sent again
  with the same ``seq`` and move, and the retry is what is stored;
- ``solrace verify`` passes for every race;
- no node logs a traceback or lost writes; the surviving nodes drain and exit 0; no
  process is left behind.

Run it alone: ``.venv/bin/python -m pytest -n 0 tests/deploy/test_chaos.py -s`` (under a
minute; ``-s`` prints the figures; needs redis-server and nginx, which .ci/run
installs; ``SOLRACE_STACK_LOGS=DIR`` keeps every process's log)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from solrace.rooms.records import unpack, unpack_entries
from solrace.store import Store
from solrace_client import RaceClient
from solrace_client.bot import BotHooks, run_bot
from solrace_client.results import race_id
from solrace_client.roomview import RoomView

from tests.support.stack import BIN, Stack, local_stack

ROOMS = 10
RACERS = 3
#: Easy certified deals: the greedy bot wins most of them, so most rooms have a
#: winner (and racers finishing close together), some end with resignations.
DIFFICULTY = "easy"
#: The server's time limit: the backstop that ends a race whatever the bots do.
TIME_LIMIT_S = 90
#: Bots pause between moves (on top of the client's own pacing inside the server's
#: default rate limit) so that thirty of them leave CPU for the nodes, and resign after
#: MAX_MOVES: races last long enough for both faults and end well inside the limit.
#: An easy deal is won in about 100 moves: at 0.2 s a race lasts 20-30 s, long enough
#: for both faults (the rooms start together: StartTogether).
MOVE_DELAY_S = 0.2
MAX_MOVES = 220
#: Moves every room must have had acknowledged before the node is killed.
MOVES_BEFORE_KILL = 10
#: Longer than a node's lease (5 s): every lease has expired when Redis comes back.
REDIS_OUTAGE_S = 6.0
#: Statuses a racer may end with here: "left" would be a forfeit nobody asked for.
END_STATUSES = {"finished", "resigned", "stuck", "timeout"}


@dataclass
class Racer:
    """One bot and everything it was told: acknowledgements, connections, progress."""

    name: str
    room: str | None = None
    racer: int | None = None
    acks: list[tuple[int, str]] = field(default_factory=list)
    clients: list[RaceClient] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    #: When (time.monotonic) each line of ``said`` was said: a drop's moment.
    said_at: list[float] = field(default_factory=list)
    result: dict[str, Any] | None = None

    def hooks(
        self,
        joined: Callable[[dict[str, Any]], None] | None = None,
        before_start: Callable[[], Awaitable[None]] | None = None,
    ) -> BotHooks:
        def on_joined(reply: dict[str, Any]) -> None:
            self.room, self.racer = str(reply["room"]), int(reply["racer"])
            if joined is not None:
                joined(reply)

        return BotHooks(
            connected=self.clients.append,
            joined=on_joined,
            accepted=lambda seq, move: self.acks.append((seq, move)),
            say=self.hear,
            before_start=before_start,
        )

    def hear(self, line: str) -> None:
        self.said.append(line)
        self.said_at.append(time.monotonic())

    def losses(self, since: float) -> list[str]:
        """Each "connection lost (why)" this bot said, with when (s after ``since``)."""
        return [
            f"{at - since:+.1f} s {line}"
            for line, at in zip(self.said, self.said_at, strict=True)
            if line.startswith("connection lost")
        ]

    def count(self, prefix: str) -> int:
        return sum(line.startswith(prefix) for line in self.said)

    @property
    def view(self) -> RoomView | None:
        """The room as its bot sees it (one view across its connections)."""
        return self.clients[-1].view if self.clients else None

    @property
    def racing(self) -> bool:
        """Its race has started and is not over. From the view, not from what the bot
        said: a racer that resumes into a running race hears no ``started``."""
        return self.view is not None and self.view.phase == "racing" and self.result is None

    @property
    def drops(self) -> int:
        return self.count("connection lost")

    @property
    def resumes(self) -> int:
        return self.count("resumed on")

    @property
    def retried(self) -> set[tuple[int, str]]:
        """(seq, move) of every move refused ``unavailable`` (the bot says so)."""
        found = (re.match(r"move (\d+) (\S+): unavailable", line) for line in self.said)
        return {(int(m.group(1)), m.group(2)) for m in found if m}

    @property
    def standing(self) -> dict[str, Any]:
        assert self.result is not None, f"{self.name}: no result"
        mine = [s for s in self.result["standings"] if s["racer"] == self.racer]
        assert len(mine) == 1, self.result["standings"]
        return dict(mine[0])


class StartTogether:
    """Holds every host's ``start`` until each room is full, ready and has its deal,
    then lets them all go: the rooms race at the same time, whatever the spread of their
    certifications. Without it, on a loaded machine, one room's race was over (won in
    75 moves) before another's deal was certified, and "every racer racing" never held
    (seen in CI)."""

    def __init__(self, rooms: int) -> None:
        self.rooms = rooms
        self.held: set[str] = set()
        self.go = asyncio.Event()

    async def hold(self, host: Racer) -> None:
        while host.view is None or host.view.deal is None:
            await asyncio.sleep(0.05)
        self.held.add(host.name)
        if len(self.held) == self.rooms:
            self.go.set()
        await self.go.wait()


async def _race(
    stack: Stack, racers: list[Racer], room_index: int, together: StartTogether
) -> None:
    """One room, through the load balancer: its first racer creates it (private, three
    seats) and starts it once the others, who join by its code, are ready (and every
    other room is, ``together``)."""
    host, *guests = racers
    joined: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def play(racer: Racer, seed: int, **entry: Any) -> None:
        hooks = (
            racer.hooks(joined.set_result, lambda: together.hold(host))
            if racer is host
            else racer.hooks()
        )
        racer.result = await run_bot(
            stack.lb_url,
            name=racer.name,
            rng_seed=seed,
            max_moves=MAX_MOVES,
            move_delay=MOVE_DELAY_S,
            hooks=hooks,
            **entry,
        )

    settings = {
        "variant": "yukon",
        "private": True,
        "max_racers": RACERS,
        "time_limit_s": TIME_LIMIT_S,
        "difficulty": DIFFICULTY,
    }
    hosting = asyncio.create_task(
        play(host, room_index * 10, create=settings, host_start=True, min_racers=RACERS)
    )
    try:
        async with asyncio.timeout(30):
            code = str((await asyncio.shield(joined))["snapshot"]["code"])
    except BaseException:
        hosting.cancel()
        raise
    await asyncio.gather(
        hosting, *(play(g, room_index * 10 + i, code=code) for i, g in enumerate(guests, 1))
    )


async def _until(
    what: str,
    timeout: float,
    done: Callable[[], bool],
    stack: Stack,
    rooms: list[asyncio.Task[Any]],
    racers: list[Racer],
) -> None:
    """Wait for ``done``; fail at once, naming its error, if a room's bots stopped
    with one (a racer refused for good stops its bot: the wait would only time out).
    A failure says what each bot said last, then the processes' logs."""
    deadline = time.monotonic() + timeout
    while not done():
        for task in rooms:
            if task.done() and not task.cancelled() and task.exception() is not None:
                _fail(f"{what}: a room's bots stopped: {task.exception()!r}", racers, stack)
        if time.monotonic() > deadline:
            _fail(f"{what}: not within {timeout:.0f} s", racers, stack)
        await asyncio.sleep(0.1)


def _fail(what: str, racers: list[Racer], stack: Stack) -> None:
    said = "\n".join(f"{r.name} ({r.room}): {r.said[-6:]}" for r in racers)
    pytest.fail(f"{what}\n{said}\n{stack.logs()}")


@dataclass
class Records:
    """What Redis holds after the chaos."""

    #: Every racer's move log (round 1), by racer name.
    logs: dict[str, list[str]] = field(default_factory=dict)
    #: Every room's stored result (its ``race_over``), by room id.
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Every room's events (``{t, d}``), in version order, by room id.
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


async def _redis_records(stack: Stack, racers: list[Racer]) -> Records:
    store = await Store.connect(stack.redis_url, stack.prefix)
    try:
        records = Records()
        for r in racers:
            assert r.room is not None and r.racer is not None
            raw = await store.move_log(r.room, f"1:{r.racer}")
            records.logs[r.name] = [move for move, _at in unpack_entries(raw)]
            if r.room in records.results:
                continue
            assert r.result is not None, f"{r.name}: no result"
            stored = await store.load_result(race_id(r.room, r.result))  # the same id
            assert stored is not None, f"no stored result for room {r.room}"
            records.results[r.room] = dict(unpack(stored)["result"])
            events = await store.events_since(r.room, 0)
            assert [e.version for e in events] == list(range(1, len(events) + 1))
            records.events[r.room] = [unpack(e.data) for e in events]
        return records
    finally:
        await store.close()


async def _verify(race: str, config_dir: str) -> subprocess.CompletedProcess[str]:
    """``solrace verify RACE``, the console command, on the racers' saved results."""
    return await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "solrace"), "verify", race],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SOLRACE_CONFIG_DIR": config_dir, "COLUMNS": "200"},
    )


async def test_chaos_a_node_and_redis_killed_mid_race(monkeypatch: pytest.MonkeyPatch) -> None:
    began = time.monotonic()
    figures: dict[str, Any] = {"rooms": ROOMS, "racers": ROOMS * RACERS}
    async with local_stack(nodes=3) as stack:
        config_dir = str(stack.work / "client")
        monkeypatch.setenv("SOLRACE_CONFIG_DIR", config_dir)  # the bots save results here
        rooms = [[Racer(f"room{i}-{j}") for j in range(RACERS)] for i in range(ROOMS)]
        everyone = [r for room in rooms for r in room]
        together = StartTogether(ROOMS)
        tasks = [
            asyncio.create_task(_race(stack, room, i, together)) for i, room in enumerate(rooms)
        ]
        try:
            # ---------------------------------------------------------- racing
            await _until(
                "every racer racing",
                60,
                lambda: all(r.racing for r in everyone),
                stack,
                tasks,
                everyone,
            )
            racing_at = time.monotonic()
            figures["racing after s"] = round(racing_at - began, 1)
            await _until(
                f"{MOVES_BEFORE_KILL} moves acknowledged in every room",
                30,
                lambda: all(sum(len(r.acks) for r in room) >= MOVES_BEFORE_KILL for room in rooms),
                stack,
                tasks,
                everyone,
            )
            # ------------------------------- SIGKILL the busiest node, mid-race
            counts = [await stack.connections(i) for i in range(len(stack.nodes))]
            victim = max(range(len(counts)), key=counts.__getitem__)
            assert counts[victim] > 0, counts
            assert all(r.racing for r in everyone), "a race ended before the node was killed"
            await stack.nodes[victim].kill()
            killed_at = time.monotonic()
            figures["connections per node"] = counts
            await _until(
                f"the {counts[victim]} racers of the killed node resumed",
                60,
                lambda: (
                    sum(r.drops for r in everyone) >= counts[victim]
                    and all(r.resumes == r.drops for r in everyone)
                ),
                stack,
                tasks,
                everyone,
            )
            figures["all resumed after s"] = round(time.monotonic() - killed_at, 1)
            await asyncio.sleep(2)  # racing on the two nodes left
            # --------------------- SIGKILL Redis, mid-race; restart from its AOF
            # A room's bots may all be done by now (stuck or resigned on a short deal:
            # seen in CI, one room of ten). What follows holds for every room; the
            # Redis kill must hit races still running, and says how many it hit.
            racing_rooms = sum(all(r.racing for r in room) for room in rooms)
            figures["rooms racing when Redis was killed"] = racing_rooms
            assert racing_rooms >= ROOMS // 2, f"only {racing_rooms} rooms racing"
            acked_before = sum(len(r.acks) for r in everyone)
            redis_killed_at = time.monotonic()
            await stack.redis.kill()
            await asyncio.sleep(REDIS_OUTAGE_S)
            figures["redis outage s"] = REDIS_OUTAGE_S
            figures["redis load s"] = round(await stack.restart_redis(), 2)
            # ---------------------------------------------------- to the end
            async with asyncio.timeout(TIME_LIMIT_S + 60):
                await asyncio.gather(*tasks)
        except BaseException as exc:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if isinstance(exc, Exception) and not isinstance(exc, pytest.fail.Exception):
                said = "\n".join(f"{r.name}: {r.said[-6:]}" for r in everyone if r.result is None)
                pytest.fail(f"{exc!r}\n{said}\n{stack.logs()}")
            raise
        figures["races over after s"] = round(time.monotonic() - racing_at, 1)
        acked = sum(len(r.acks) for r in everyone)
        figures["moves acknowledged"] = acked
        figures["acknowledged after Redis came back"] = acked - acked_before
        figures["reconnects"] = sum(r.resumes for r in everyone)

        # ------------------------------------- every acknowledged move kept
        records = await _redis_records(stack, everyone)
        logs = records.logs
        retried = 0
        for r in everyone:
            log = logs[r.name]
            assert r.standing["log"] == log, f"{r.name}: the result's log is not Redis' log"
            for seq, move in r.acks:
                assert seq < len(log) and log[seq] == move, (
                    f"{r.name}: acknowledged move {seq} {move!r} is not in its log "
                    f"(there: {log[seq] if seq < len(log) else 'nothing'})"
                )
            # Sent again with the same seq and move until stored (unless the race ended).
            for seq, move in r.retried:
                assert seq >= len(log) or log[seq] == move, (
                    f"{r.name}: move {seq} {move!r} refused unavailable; {log[seq]!r} stored"
                )
                retried += seq < len(log)
        figures["moves refused unavailable, retried, stored"] = retried
        assert retried > 0, "the Redis outage refused no move: it proved nothing"

        # ------------------------------- every race over, at most one winner
        won = 0
        for room in rooms:
            result = room[0].result
            assert result is not None
            assert all(r.result == result for r in room), "the racers saw different results"
            assert records.results[str(room[0].room)] == result, "Redis stored another result"
            assert result["reason"] in ("all_done", "time_limit"), result["reason"]
            standings = result["standings"]
            assert [s["place"] for s in standings] == list(range(1, RACERS + 1)), standings
            assert {s["status"] for s in standings} <= END_STATUSES, standings
            finishers = sorted(
                (s for s in standings if s["status"] == "finished"), key=lambda s: s["elapsed_ms"]
            )
            assert standings[: len(finishers)] == finishers, "finishers first, fastest first"
            won += bool(finishers)
        ends = Counter(s["status"] for r in everyone for s in [r.standing])
        # A race may end at its time limit (a bot that waits): say who, and what it did.
        figures["racers timed out"] = {
            r.name: r.said[-4:] for r in everyone if r.standing["status"] == "timeout"
        }
        figures["racers' ends"] = dict(ends)
        figures["rooms won"] = won

        # --------- presence: every racer online again before its race ended
        marked_offline = 0
        for room_id, events in records.events.items():
            over = next(i for i, e in enumerate(events) if e["t"] == "race_over")
            online: dict[int, bool] = {}
            for e in events[:over]:
                if e["t"] == "presence":
                    online[e["d"]["racer"]] = e["d"]["online"]
                    marked_offline += not e["d"]["online"]
            away = [racer for racer, here in online.items() if not here]
            trail = [
                (v, e["t"], e["d"].get("racer"), e["d"].get("online", e["d"].get("status")))
                for v, e in enumerate(events, 1)
                if e["t"] in ("presence", "racer_left", "finished", "race_over", "started")
                or (e["t"] == "progress" and e["d"]["status"] != "playing")
            ]
            assert not away, f"room {room_id}: racers {away} still offline at the end: {trail}"
        figures["racers marked offline (dead node, expired leases), back online"] = marked_offline

        # ------------------- the killed node's racers resumed through nginx
        # Said whole when it fails: who dropped, when and why. A CI run once saw 14
        # drops against the killed node's 11 connections, and nothing said more.
        drops = sum(r.drops for r in everyone)
        assert drops == counts[victim], (
            f"others dropped too: {drops} drops, {counts[victim]} connections on the killed "
            f"node (node {victim + 1} of {counts}); times after the node's kill (Redis was "
            f"killed at {redis_killed_at - killed_at:+.1f} s):\n"
            + "\n".join(f"{r.name} ({r.room}): {r.losses(killed_at)}" for r in everyone if r.drops)
        )
        for r in everyone:
            assert r.resumes == r.drops, f"{r.name}: {r.said}"
            assert len(r.clients) == 1 + r.resumes, f"{r.name}: {r.said}"
            ports = {c.ws.remote_address[1] for c in r.clients}
            assert ports == {stack.lb_port}, f"{r.name} connected around nginx: {ports}"

        # --------------------------------------- solrace verify, every race
        for room in rooms:
            host = room[0]
            assert host.room is not None and host.result is not None
            done = await _verify(race_id(host.room, host.result), config_dir)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "OK: the deal was committed in advance and every move is legal" in done.stdout
    # ---------------------------------------------- the processes' own account
    # Redis came back from its append-only file, and every node knew it kept the promise.
    assert stack.redis.final.count("Ready to accept connections") == 2, stack.redis.final
    assert "DB loaded from append only file" in stack.redis.final, stack.redis.final
    for node in stack.nodes:
        assert "durability: aof-always" in node.final, node.final[:2000]
        assert "Traceback" not in node.final, f"{node.name}:\n{node.final[-5000:]}"
        assert "lost acknowledged writes" not in node.final, f"{node.name}:\n{node.final}"
    for managed in stack.started:
        assert not managed.leftovers, f"{managed.name} left processes: {managed.leftovers}"
    survivors = [n for n in stack.nodes if not n.killed]
    for node in survivors:
        assert node.returncode == 0, f"{node.name} did not drain and exit 0:\n{node.final[-5000:]}"
    figures["duration s"] = round(time.monotonic() - began, 1)
    print("chaos:", figures)
