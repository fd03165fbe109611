"""Certified deals: a ``winnable`` room deals only a seed a solver has won.

When a round's lobby opens, a node serving the room draws candidate seeds (the
round's seed, then ``round_seed(secret, round, 1)``, ``2``, ...) and solves them in
worker *processes* (:mod:`solrace.rooms.solver_workers`; the solver is pure Python,
and in a thread it would hold the GIL and delay every other room's moves), two at once
(:func:`first_won`), until one is won (at the asked difficulty). The
winning line is the certificate: ``deal_chosen`` announces that the deal is certified
(:func:`announced`: neither the line's length nor the band the solver found) on a
whole second after the walk began, not when the solver finished (:func:`on_the_step`:
nothing a racer sees follows the solver's time), the countdown commits to it with the
seed, ``race_over`` reveals it, and ``solrace verify`` replays it (docs/fairness.md).

Two nodes may certify the same round; ``decisions.deal_chosen`` keeps the first.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from solrace.protocol import BadMessage, ErrorCode
from solrace.protocol.limits import START_WAIT_S
from solrace.protocol.views import Phase
from solrace.race import decisions as decide_
from solrace.race.fairness import round_seed
from solrace.solver import SERVER_BUDGET, solve_deal
from solrace.store.errors import StoreUnavailable

from . import solver_workers
from .counters import Defect

if TYPE_CHECKING:
    from .node import Node
    from .room import LiveRoom

log = logging.getLogger("solrace.certify")

#: The solver's node budget per candidate seed (docs/winnability.md: the budget's
#: share of unknowns and the certification time it gives).
CERTIFY_BUDGET_NODES: Final = SERVER_BUDGET
#: Candidates tried before the room falls back to an uncertified deal (announced so).
MAX_CANDIDATES: Final = 100
#: Candidates of one round solved at once; the first won is the deal. A candidate the
#: solver leaves unknown costs the whole budget (most of a second in pure Python), and
#: one walk in twenty met one: solved one after another, those walks were the p95.
#: With a second candidate beside it, the next seed is usually won meanwhile.
CANDIDATES_IN_FLIGHT: Final = 2
#: How often a certification in progress looks again whether its round still wants a
#: deal (else its candidates are stopped: the lobby emptied, another node chose the
#: deal) — on a grid from the walk's start (:func:`next_look`), never when a candidate
#: ends — and whether a worker has become spare for a second candidate.
RECHECK_S: Final = 0.1
#: How long a node whose solver workers keep dying leaves a room that another node
#: serves too to that node's certification before it deals uncertified itself: the
#: first deal_chosen stands, and an instant uncertified one took the round from a
#: healthy node's certificate (a review). Well inside the START_WAIT_S a ``start``
#: waits for the deal.
SHARED_FALLBACK_S: Final = START_WAIT_S / 3

#: How long a candidate's worker may take to answer before it is taken for hung,
#: killed and started again (solver_workers.run): the candidate is then not won, and
#: the walk goes on. A candidate at CERTIFY_BUDGET_NODES took at most 3 s in every
#: variant measured (docs/winnability.md), so ten times that is a worker that will not
#: answer — stopped by a signal, stuck, frozen by its host — which a room waited for for
#: ever, "certifying" in its lobby (an audit).
CANDIDATE_LIMIT_S: Final = 30.0

#: ``deal_chosen`` is written a whole number of these seconds after the walk began
#: (:func:`on_the_step`), never when the solver happened to finish. A walk's time
#: follows the positions the solver searched on the dealt candidate (an audit,
#: docs/fairness.md: Spearman 0.5 between the two over 150 Yukon walks, 6 ms for a
#: deal won in ~100 positions, 75 ms for one in ~2,200), and a racer who times the lobby
#: learns that count — which, like the line's length the lobby no longer says, tells
#: apart the ways the last face-down cards may lie. One second is above a walk's p95
#: (0.05-0.7 s from machine to machine, docs/winnability.md), so nearly every
#: certified lobby hears its deal exactly 1 s after the walk began; a walk that takes
#: longer says only how many whole seconds it took.
ANNOUNCE_STEP_S: Final = 1.0

#: A requested difficulty accepts these solver bands.
_BANDS: Final = {"easy": ("easy",), "medium": ("medium",), "hard": ("hard", "very hard")}


def announced(found: Certificate, asked: str | None) -> dict[str, Any]:
    """What ``deal_chosen`` says of the deal ``found`` in a room that asked for
    difficulty ``asked``: whether it is certified and, for a certified one, the
    difficulty the room asked for — what its settings say already — and nothing the
    deal's cards decide. The line's length and the band the solver found name where
    cards lie: late in a race a racer knows all but a few cards' places and can solve
    each way they may lie. An audit (docs/tools/certificate_length.py: six Yukon
    deals, 5 cards still face down, 120 ways, each solved at the server's budget in
    32-418 ms) found the length announced kept 4 to 45 of the 120, the band 72 to 120;
    at 6 face down, length and band kept 8 to 54 of 720. Both are in the result, with
    the line, once the race is over."""
    certified = found.line is not None
    return {"certified": certified, "moves": None, "difficulty": asked if certified else None}


@dataclass(frozen=True)
class Certificate:
    """What certifying a round found: the candidate dealt and its winning line (None
    if no candidate was won within the limits: the deal is then not certified)."""

    attempt: int
    line: tuple[str, ...] | None
    difficulty: str | None


def try_candidate(
    variant: str,
    options: Mapping[str, Any],
    secret: bytes,
    round_no: int,
    attempt: int,
    difficulty: str | None,
    budget_nodes: int = CERTIFY_BUDGET_NODES,
    stop_slot: int | None = None,
) -> Certificate | None:
    """Solve candidate ``attempt`` of the round: its certificate if it is won at
    ``difficulty``, else None. Plain arguments, no I/O: it runs in a worker process,
    which stops it early once its ``stop_slot`` says nobody waits for it."""
    seed = round_seed(secret, round_no, attempt)
    stop = solver_workers.stopper(stop_slot)
    result = solve_deal(variant, seed, options, budget_nodes, should_stop=stop)
    bands = _BANDS.get(difficulty or "", ())
    if result.won and (not bands or result.difficulty in bands):
        return Certificate(attempt, result.moves, result.difficulty)
    return None


def certify(
    variant: str,
    options: Mapping[str, Any],
    secret: bytes,
    round_no: int,
    difficulty: str | None,
    budget_nodes: int = CERTIFY_BUDGET_NODES,
    candidates: int = MAX_CANDIDATES,
) -> Certificate:
    """Solve candidate seeds in order until one is won at ``difficulty`` (the whole
    search in one call, as the server makes it candidate by candidate)."""
    for attempt in range(candidates):
        found = try_candidate(variant, options, secret, round_no, attempt, difficulty, budget_nodes)
        if found is not None:
            return found
    return Certificate(0, None, None)


async def first_won(
    solve: Callable[[int], Awaitable[Certificate | None]],
    needed: Callable[[], bool],
    in_flight: int = CANDIDATES_IN_FLIGHT,
    candidates: int = MAX_CANDIDATES,
    spare: Callable[[], bool] = lambda: True,
    began: float | None = None,
) -> Certificate | None:
    """Solve candidates ``0, 1, …`` with ``solve``, up to ``in_flight`` at a time (more
    than one only while ``spare`` says a worker is free for it), until one is won: that
    one (the lowest attempt if several are won together), a certificate without a line
    when none of ``candidates`` is, or None when the round stopped being ``needed``. A
    candidate still running then is cancelled (on a worker: stopped, its result
    dropped).

    ``needed`` is looked at when the walk begins and then only on its grid, a whole
    RECHECK_S after ``began`` (loop time; None: now) — never when a candidate ends:
    a round stopped (its lobby's racers all away) and wanted again starts a new walk,
    whose deal comes later, so a look at the solver's times let a racer who drops and
    comes back at times of its choosing tell when they were (a review;
    :func:`_wanted_until_the_step` looks on the same grid).

    A stop is not "none won": nothing was learnt of the candidates stopped, and the
    round may be wanted again before the caller looks (its racer reconnected at once).
    Both were a certificate without a line, and such a round was dealt uncertified,
    "no winnable deal found", though its candidate would have been won (:func:`_run`)."""
    loop = asyncio.get_running_loop()
    began = loop.time() if began is None else began
    wanted = needed()
    look = next_look(began, loop.time())
    running: set[asyncio.Future[Certificate | None]] = set()
    attempt = 0
    try:
        while True:
            while (
                len(running) < in_flight
                and attempt < candidates
                and wanted
                and (not running or spare())
            ):
                running.add(asyncio.ensure_future(solve(attempt)))
                attempt += 1
            if not running:
                # Every candidate tried, none won; or not one started: unwanted.
                return Certificate(0, None, None) if attempt >= candidates else None
            done, running = await asyncio.wait(
                running, timeout=max(0.0, look - loop.time()), return_when=asyncio.FIRST_COMPLETED
            )
            won = [found for found in (task.result() for task in done) if found is not None]
            # A look due is made before a won candidate is taken. Taken together (the
            # loop busy over the look), the win came first and the look was skipped,
            # which a walk won earlier and waiting for the step made
            # (_wanted_until_the_step): that told whether the solver finished just
            # before the look (a review).
            if loop.time() >= look:
                look = next_look(began, loop.time())
                wanted = needed()
                if not wanted:
                    return None
            if won:
                return min(won, key=lambda found: found.attempt)
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)


class WorkersFailing(RuntimeError):
    """The solver workers keep dying before they answer (solver_workers.failing): no
    candidate can be solved now, so the round deals uncertified (:func:`_run`)."""


async def _solve(*args: Any) -> Certificate | None:
    """``try_candidate(*args)`` on a solver worker, awaited without blocking the loop.

    One candidate per job, not a whole certification: the workers serve every room of
    the node in turn, so a room whose deal is hard to certify (up to MAX_CANDIDATES
    candidates) holds the others up by one candidate at most (its second candidate in
    flight only goes to a spare worker), and a certification nobody needs any more
    (the room was left, another node chose the deal) stops its candidates in progress
    (cancelled, a candidate is stopped on its worker) instead of running to its end.

    Workers that keep dying (:func:`solver_workers.failing`) raise
    :class:`WorkersFailing` instead, before a candidate is handed to them: each
    candidate waited out their restarts' back-off (growing to 30 s) and died, a line
    logged each time, and a room got no deal for most of an hour (100 candidates)."""
    if solver_workers.failing():
        raise WorkersFailing("the solver workers keep dying")
    try:
        found: Certificate | None = await solver_workers.run(
            try_candidate, *args, limit_s=CANDIDATE_LIMIT_S
        )
    except solver_workers.WorkerLost as lost:
        if lost.stopped:
            return None  # stopped with the node: nothing to say
        if solver_workers.failing():
            raise WorkersFailing(str(lost)) from lost  # said once, by the workers
        # Killed from outside (a signal, the kernel out of memory): this candidate is
        # not known to be won; the next one runs on a worker started again.
        log.warning("a solver worker was lost: %s", lost)
        return None
    return found


def ensure(node: Node, room: LiveRoom) -> None:
    """Start certifying the room's round here if it needs it now (:func:`_needed`)
    and nobody here does. Called at every fold: a racer back online starts it again."""
    state = room.state
    if not _needed(room, state.round):
        return
    key = (room.room_id, state.round)
    if key not in node.certifying:
        task = asyncio.ensure_future(_run(node, room, state.round))
        task.add_done_callback(_retrieve)
        node.certifying[key] = task


def _retrieve(task: asyncio.Future[None]) -> None:
    """A certification that failed because Redis did not answer raises that to whoever
    waits for it (a ``start``: ``unavailable``, retried). Often nobody does — the
    solver finished during an outage — and the failure is no news: the next
    ``start`` certifies again. Retrieving it here keeps asyncio from logging it,
    with a traceback, as an exception never retrieved."""
    if not task.cancelled():
        task.exception()


async def ready(node: Node, room: LiveRoom) -> None:
    """Wait until the room's round has its deal (certifying it here if need be), up to
    START_WAIT_S in all: through a run that stopped and started again (:func:`_run`)
    too. Waiting for the first run only, a ``start`` sent by a host back from a dropped
    connection was refused ``not_ready`` when that run stopped, dealing nothing, though
    the run started again certified the deal at once."""
    ensure(node, room)
    key = (room.room_id, room.state.round)
    async with asyncio.timeout(START_WAIT_S):
        while (task := node.certifying.get(key)) is not None:
            await asyncio.shield(task)  # ended: out of node.certifying, or replaced
    await node.sync(room)


def next_look(began: float, now: float) -> float:
    """The first look after ``now`` on the grid of a walk that began at ``began``
    (loop time): a whole RECHECK_S after it. Strictly after: ``now`` on the grid itself
    — often, on uvloop, whose clock counts whole milliseconds — was divided a hair short
    of its step (0.3 / 0.1 < 3), and the look given was ``now`` again, so the walk
    looked at its round and waited for nothing over and over until the clock ticked:
    27 looks in a quarter of a second (CI)."""
    look = began + (math.floor((now - began) / RECHECK_S) + 1) * RECHECK_S
    while look <= now:
        look += RECHECK_S
    return look


def on_the_step(began: float, now: float, step: float) -> float:
    """When a walk that began at ``began`` and found its deal at ``now`` announces it
    (loop time): the first whole ``step`` after ``began`` that is not before ``now``
    (``now`` itself for a step of 0, as tests of other things set)."""
    if step <= 0:
        return now
    return began + max(1, math.ceil((now - began) / step)) * step


async def _wanted_until_the_step(node: Node, room: LiveRoom, round_no: int, began: float) -> bool:
    """Wait for the step the deal found now is announced on (:func:`on_the_step`),
    looking whether the round still wants it every RECHECK_S from ``began``, as the
    walk does while it solves: False (stop) if it does not at one of those looks.

    Not at the instant the solver finished, nor only at the step: a walk still solving
    stops at its recheck when its racers are away, and starts again once one is back,
    so a lobby's only racer who dropped at a time of its choosing and came back heard
    the deal on the step if the solver had finished before the drop, a step after its
    return if not — a threshold on the walk's time, probe after probe (a review)."""
    loop = asyncio.get_running_loop()
    due = on_the_step(began, loop.time(), node.announce_step_s)
    while (now := loop.time()) < due:
        await asyncio.sleep(min(due, next_look(began, now)) - now)
        if loop.time() < due and not _needed(room, round_no):
            return False
    return True


async def _chosen_elsewhere(room: LiveRoom, round_no: int, seconds: float) -> None:
    """Wait up to ``seconds`` while the round still wants its deal (folded from
    another node's deal_chosen, or everyone gone)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while _needed(room, round_no) and loop.time() < deadline:
        await asyncio.sleep(RECHECK_S)


def _retry_the_deal(
    node: Node,
    key: tuple[str, int],
    choose: Callable[[], Awaitable[None]],
    exc: StoreUnavailable,
) -> None:
    """Retry the round's ``deal_chosen`` write, which Redis failed, until Redis takes
    it — unless a retrier of the round's deal is at it already: any one deal found
    will do (the first stored stands). Each walk whose write failed started a retrier
    of its own, and while Redis kept failing, every ``start`` (refused ``unavailable``,
    asked again) and every fold started a walk: retriers piled up without bound, each
    writing every 2 s until Redis answered (an audit: 7 after 6 starts)."""
    writing = node.deal_writes.get(key)
    if writing is not None and not writing.done():
        return
    writing = node.keep_trying(choose, exc, "could not store a certified deal", {"room": key[0]})
    if writing is None:  # the room is gone, or the node stopped: nothing to write to
        return
    node.deal_writes[key] = writing

    def forget(task: asyncio.Future[Any]) -> None:
        if node.deal_writes.get(key) is task:
            del node.deal_writes[key]

    writing.add_done_callback(forget)


def _needed(room: LiveRoom, round_no: int) -> bool:
    """Whether the round wants its deal now: not chosen yet, and a racer of the lobby
    online (on any node: presence is folded room state). One everyone left expires:
    nothing more is written to it. One whose racers are all away waits, holding no
    worker, until one is back (:func:`ensure` then starts again): before, 40 rooms
    each created by a connection that hung up at once (Australian, winnable, hard:
    ~1.3 creates/s) certified through their creators' 30 s grace, and an honest
    room's deal, 0.0 s on an idle node, came after 29 s (its ``start`` refused
    ``not_ready`` at 15 s) — an audit."""
    state = room.state
    someone_online = any(racer.online for racer in state.racers.values())
    in_lobby = state.phase == Phase.LOBBY and someone_online
    return state.round == round_no and in_lobby and not state.deal_ready()


async def _run(node: Node, room: LiveRoom, round_no: int) -> None:
    """Certify the round and deal it. A walk stopped because the round was no longer
    wanted (:func:`first_won`: None) deals nothing; if the round is wanted again by the
    time its candidates are stopped (the racer's connection dropped and came back),
    the run starts again: the racer's return, folded meanwhile, found this run still
    in ``node.certifying`` and :func:`ensure` started none. Only then: a run cancelled
    (the node stops) or failed (Redis, a defect) is not started again from here, or a
    stopping node or a failing store would start runs without end; a fold does."""
    key = (room.room_id, round_no)
    stopped = False
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        settings = room.meta.settings
        failing = False
        try:
            found = await first_won(
                lambda attempt: _solve(
                    settings.variant,
                    dict(settings.options),
                    room.meta.secret,
                    round_no,
                    attempt,
                    settings.difficulty,
                ),
                # Until the deal is chosen (maybe by another node), or the round is gone.
                lambda: _needed(room, round_no),
                node.candidates_in_flight,
                spare=solver_workers.spare,
                began=began,
            )
        except WorkersFailing:
            # Dealt uncertified, announced so, as when no candidate is won: a room
            # waits for no worker that cannot live — unless another node serving it
            # may still certify it (SHARED_FALLBACK_S).
            if room.shared:
                await _chosen_elsewhere(room, round_no, SHARED_FALLBACK_S)
            log.warning(
                "the solver workers keep dying: dealing uncertified",
                extra={"room": room.room_id},
            )
            found, failing = Certificate(0, None, None), True
        if found is None:
            stopped = True
            return  # nobody wanted the deal a moment ago: nothing to deal (finally)
        # Said on the step, not when the solver finished: its time tells how hard the
        # deal was to win (ANNOUNCE_STEP_S). A ``start`` waits through it (ready).
        if not await _wanted_until_the_step(node, room, round_no, began):
            stopped = True
            return  # unwanted at a recheck, as a walk still solving would stop (finally)
        line = None if found.line is None else list(found.line)
        deal = announced(found, room.meta.settings.difficulty)
        if line is None and not failing and _needed(room, round_no):  # not for nobody
            log.warning("no winnable deal found: uncertified", extra={"room": room.room_id})

        async def choose() -> None:
            if _needed(room, round_no):
                await node.decide(
                    room,
                    lambda: decide_.deal_chosen(room.state, round_no, deal),
                    attempt=found.attempt,
                    line=None if line is None else tuple(line),
                )
                await node.tick(room)

        try:
            await choose()
        except StoreUnavailable as exc:
            # The deal is found; only its write failed. Whoever waits (a ``start``) is
            # told ``unavailable`` as before, and the write is retried until Redis
            # answers: nothing else would make it in a quiet lobby, which showed
            # "certifying a winnable deal…" until someone acted (and then solved again).
            _retry_the_deal(node, key, choose, exc)
            raise
    except (StoreUnavailable, asyncio.CancelledError):
        raise
    except Exception as exc:
        if not (isinstance(exc, BadMessage) and exc.code == ErrorCode.UNKNOWN_ROOM):
            # A defect: logged and counted as every other is (docs/server.md,
            # "Metrics"): it was logged only, and an alert on solrace_defects_total
            # missed it. Not a room lost meanwhile (Node.room_lost, history_broken):
            # said and closed there, with nothing left to deal.
            log.exception("certifying a deal failed", extra={"room": room.room_id})
            node.metrics.defects.labels(Defect.TASK).inc()
    finally:
        node.certifying.pop(key, None)
        if stopped and room.served() and _needed(room, round_no):
            ensure(node, room)  # as a fold here would (Node.schedule)
