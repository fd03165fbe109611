"""``solrace verify``: check that a finished race was fair, from its revealed data.

The server commits to the deal before the race (``commitment = sha256(seed ‖ salt)``)
and reveals seed, salt and every racer's move log in ``race_over``. This module checks,
with the same rules engine the server runs:

- the revealed seed and salt hash to the commitment (and, when the client saw it, that
  this is the commitment published at the countdown: a server could otherwise invent a
  matching pair after the fact), and that the settings are the ones that client saw in
  the room at the countdown (the commitment does not bind them);
- every racer's log is legal, move by move, on the deal of that seed;
- each standing's ``foundation``, ``moves``, ``score`` and ``status`` are what the
  replayed log gives ("finished" exactly when the game is won, "stuck" only when no
  move is left);
- the standings are in the order docs/rules.md prescribes;
- when the saving client raced, its log holds every move the server acknowledged to it.

Nothing here trusts the server: a tampered log, seed, salt or commitment fails.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from solrace.protocol import commitment, verify
from solrace.protocol.limits import MAX_ROOM_ID_LEN
from solrace.protocol.messages import ROOM_ID
from solrace.protocol.views import FINAL_STATUSES, end_reason, is_status
from solrace.quoting import json_quoted, quoted
from solrace.race.decisions import name_key
from solrace.rules import IllegalMoveError, RulesError, deal
from solrace.rules.log import apply_entry

from .printable import printable
from .results import Acknowledged, SavedResult, counted, race_id

__all__ = ["Acknowledged", "Report", "Verdict", "illegal_entry", "race_verdict", "verify_result"]


@dataclass(frozen=True)
class Verdict:
    """:func:`verify_result`'s answer in one line, for the race-over screen and the
    bot's end of race: ``ok`` only when every check passed."""

    ok: bool
    line: str


#: What the race-over screen says while :func:`race_verdict` runs (it replays every
#: log: 0.13 s measured for the most a race holds, 8 racers of 5,000 Yukon moves).
#: A settings key named as it is in a line (any other is quoted as JSON writes it).
_PLAIN_KEY: Final = re.compile(r"[a-z_]{1,40}")

CHECKING: Final = "… checking the reveal, every racer's log and the standings"


def race_verdict(saved: SavedResult, acknowledged: Acknowledged | None = None) -> Verdict:
    """Everything ``solrace verify`` checks, of a race just over, in one line fit for a
    terminal (its reason quotes what the server sent: control characters as ``?``);
    with ``acknowledged``, the racer's log is held to those moves, not to the ones
    ``saved`` holds."""
    if acknowledged is not None:
        saved = replace(saved, acknowledged=acknowledged)
    verdict = _verdict(saved)
    return Verdict(verdict.ok, printable(verdict.line))


def _verdict(saved: SavedResult) -> Verdict:
    """✔ only when the whole result verifies, ✘ and the first failing check's reason
    otherwise. The screen used to check the commitment alone, and showed a green ✔
    under standings that put a racer with 0 cards up first as "finished" (an audit with
    a hostile server): the commitment binds the deal, not what happened on it."""
    try:
        # The shape verify reads, checked as `solrace verify` checks a file it loads.
        checked = SavedResult.from_json(saved.to_json())
        report = verify_result(checked)
    except ValueError as exc:
        why = str(exc).removeprefix("not a saved race result: ")
        return Verdict(False, f"✘ NOT VERIFIED — the result is malformed: {why}")
    except Exception as exc:  # a shape no check foresaw: a hostile server's, not a crash
        return Verdict(False, f"✘ NOT VERIFIED — cannot check this result: {exc!r:.80}")
    if not report.ok:
        first = report.failures[0]
        return Verdict(False, f"✘ NOT VERIFIED — {first.what}: {first.detail}")
    if report.skipped:
        unchecked = ", ".join(s.partition(": ")[0] for s in report.skipped)
        return Verdict(True, f"✔ verified, but not checked here: {unchecked}")
    return Verdict(
        True,
        "✔ verified: the deal was committed at the countdown, every move is legal, "
        "the standings are the logs'",
    )


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    detail: str = ""


@dataclass
class Report:
    race: str
    checks: list[Check] = field(default_factory=list)
    #: Checks this result could not have made, and why (said, so a file that lacks
    #: what a check needs does not read as fully checked).
    skipped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def add(self, what: str, ok: bool, detail: str = "") -> bool:
        self.checks.append(Check(what, ok, detail))
        return ok


def verify_result(saved: SavedResult) -> Report:
    """Every check of a saved race; the report is OK only if all of them pass."""
    report = Report(saved.race)
    result = saved.result
    seed, salt, published = result.get("seed"), result.get("salt"), result.get("commitment")
    certificate = result.get("certificate")
    _check_commitment(report, seed, salt, published, saved.published_commitment, certificate)
    _check_settings(report, saved)
    _check_race_id(report, saved)
    if not isinstance(seed, int) or isinstance(seed, bool):
        report.add("deal", False, f"the seed {seed!r} is not an integer")
        return report
    try:
        deal(saved.variant, seed, saved.options)
    except (RulesError, ValueError) as exc:
        report.add("deal", False, f"cannot deal {saved.variant} with seed {seed}: {exc}")
        return report
    if saved.deal is None and saved.settings.get("deals") != "random":
        # Said, as a missing countdown commitment is: taken out of a file, it hid a
        # certified deal announced and none revealed behind a plain OK (a tamper audit).
        # A random room announces none (docs/protocol.md, Deal): nothing to hold.
        report.skipped.append(
            "announced deal: this file does not hold the deal the lobby announced "
            "(certified or not: saved by a spectator who came after the lobby, by "
            "solrace fetch, or by an older client), so the certificate revealed, or its "
            "absence, is not compared with it"
        )
    if certificate is not None:
        _check_certificate(report, saved, seed, certificate)
        _check_announced_deal(report, saved.deal, certificate)
    elif isinstance(saved.deal, Mapping) and saved.deal.get("certified") is True:
        # A server that announced a winnable deal and revealed no winning line: the
        # commitment then binds none, and the claim would go unchecked (an audit).
        report.add(
            "certificate",
            False,
            "the lobby announced a certified winnable deal but the result reveals no certificate",
        )
    standings = saved.standings
    if not standings:
        report.add("standings", False, "the result lists no racer")
    timed = [s for s in standings if s.get("times") is not None]
    if standings and not timed:
        report.skipped.append(
            "move times: no racer's log carries the times of its moves (a result saved "
            "before logs had them), so the finish and cards-up times the places rest on "
            "are taken as the standings give them"
        )
    for standing in standings:
        # A result has times for every log or for none: one without them among others
        # with them was taken out, and its standing's times would go unchecked.
        untimed = bool(timed) and standing.get("times") is None
        _check_racer(report, saved, seed, standing, untimed)
    _check_order(report, standings, saved.settings)
    _check_end_reason(report, result.get("reason"), standings)
    if saved.acknowledged is None:
        report.skipped.append(
            "acknowledged moves: this file does not hold the moves the server confirmed "
            "to a racer's own client as they were played (saved by a spectator, by "
            "solrace fetch, or by an older client), so every log is taken as the server "
            "revealed it"
        )
    else:
        _check_acknowledged(report, standings, saved.acknowledged)
    return report


def _check_settings(report: Report, saved: SavedResult) -> None:
    """The file's settings — variant, options, time limit, seats: what every other
    check replays and ranks by — are the ones its client saw in the room at the
    countdown. They are not under the commitment: ``undo: false`` where nobody undid,
    or a time limit cut to past the last move, verified OK (docs/fairness.md)."""
    seen = saved.countdown_settings
    if seen is None:
        report.skipped.append(
            "settings: this file does not hold the room's settings as seen at the "
            "countdown (saved by a spectator who came after it, by solrace fetch, or by "
            "an older client), so its variant, options, time limit and seats are taken as "
            "the file gives them"
        )
        return
    file = saved.settings
    keys = sorted(set(file) | set(seen), key=str)
    differ = [key for key in keys if file.get(key) != seen.get(key)]
    if not differ:
        report.add("settings", True, "the room's settings as seen at the countdown")
        return
    key = differ[0]
    # a key from the file: as JSON writes it where it is not a plain name
    name = key if isinstance(key, str) and _PLAIN_KEY.fullmatch(key) else json_quoted(key)
    more = f" (and {counted(len(differ) - 1, 'other')})" if len(differ) > 1 else ""
    report.add(
        "settings",
        False,
        f"{name} is {json_quoted(file.get(key))}, but the room's at the countdown was "
        f"{json_quoted(seen.get(key))}{more}",
    )


def _check_acknowledged(
    report: Report, standings: list[dict[str, Any]], acknowledged: Acknowledged
) -> None:
    """Each move the server acknowledged to this racer is in its revealed log at the
    seq it was acknowledged with (a seq is the move's place in the log:
    docs/protocol.md §11). Moves whose reply never came may be there or not."""
    mine = [s for s in standings if s.get("racer") == acknowledged.racer]
    what = f"racer {acknowledged.racer}"
    if not mine:
        report.add(
            f"{what}: acknowledged moves",
            False,
            f"{counted(len(acknowledged.moves), 'move')} acknowledged to this racer, "
            "who is not in the standings",
        )
        return
    what = f"racer {acknowledged.racer} ({mine[0].get('name')})"
    log = list(mine[0].get("log") or [])
    for seq, move in sorted(acknowledged.moves.items()):
        if seq < len(log) and log[seq] == move:
            continue
        revealed = (
            f"the log revealed has {quoted(log[seq])} there"
            if 0 <= seq < len(log)
            else f"the log revealed ends after {counted(len(log), 'move')}"
        )
        report.add(
            f"{what}: acknowledged moves",
            False,
            f"move {seq + 1} {quoted(move)} was acknowledged, but {revealed}",
        )
        return
    report.add(
        f"{what}: acknowledged moves",
        True,
        f"the log holds the {counted(len(acknowledged.moves), 'move')} acknowledged",
    )


def _check_end_reason(report: Report, reason: Any, standings: list[dict[str, Any]]) -> None:
    """The reason the race ended follows from how each racer's ended (the server's
    own rule, :func:`end_reason`): a race every racer finished or resigned said to have
    run out of time, or "abandoned", or given no reason, verified OK (a verify audit)."""
    expected = end_reason([str(s.get("status")) for s in standings])
    report.add(
        "end reason",
        reason == expected,
        f"{expected}, as the racers' statuses give"
        if reason == expected
        else f"{reason!r:.40}, but the racers' statuses give {expected}",
    )


def _check_race_id(report: Report, saved: SavedResult) -> None:
    """The race the file says it is — what ``verify`` prints and ``fetch`` asks the
    server for — is its room and commitment's: a race a cheater won, named as one they
    lost, verified OK as that race (a verify audit)."""
    if ROOM_ID.fullmatch(saved.room) is None:
        # No server names a room so, and race_id makes one of it (the first 64
        # characters, "_" for a "/"): the id of another room's race (a verify audit).
        report.add(
            "race id",
            False,
            f"the room {quoted(saved.room)} is no room id (1 to {MAX_ROOM_ID_LEN} letters, "
            "digits, '_' or '-')",
        )
        return
    expected = race_id(saved.room, saved.result)
    report.add(
        "race id",
        saved.race == expected,
        f"{saved.race} is its room and the first 8 digits of its commitment"
        if saved.race == expected
        else f"the file names race {saved.race}, but its room and commitment are race {expected}",
    )


def _check_certificate(report: Report, saved: SavedResult, seed: int, line: Any) -> None:
    """The certified deal's winning line must win the revealed deal, move by move."""
    if not isinstance(line, list):
        report.add("certificate", False, f"the certificate {line!r:.40} is not a list of moves")
        return
    board = deal(saved.variant, seed, saved.options)
    try:
        for i, entry in enumerate(line):
            apply_entry(board, entry, i)
    except (RulesError, ValueError, TypeError) as exc:
        report.add("certificate", False, f"the winning line fails on the deal: {exc}")
        return
    won = board.is_won()
    report.add(
        "certificate",
        won,
        f"the certified line wins the deal in {len(line)} moves"
        if won
        else f"the certified line ({len(line)} moves) does not win the deal",
    )


def _check_announced_deal(report: Report, deal: Any, line: list[str]) -> None:
    """What the lobby announced of the deal (when the saving client saw it) is the
    certificate revealed: a certified line — of its length, where the server announced
    one (an earlier release did; this one does not: the length names where cards lie,
    docs/fairness.md). A server that announced "certified, 20 moves" — or a random
    deal — and revealed another line verified OK (a verify audit). The difficulty band
    is the solver's, not checked here."""
    if not isinstance(deal, Mapping):
        return
    if deal.get("certified") is not True:
        report.add(
            "announced deal",
            False,
            "the lobby announced a deal not certified, but the result reveals a certificate",
        )
        return
    moves = deal.get("moves")
    if moves is None:
        report.add("announced deal", True, "the lobby announced a certified deal")
        return
    report.add(
        "announced deal",
        moves == len(line),
        f"the lobby announced a certified line of {len(line)} moves"
        if moves == len(line)
        else f"the lobby announced a certified line of {moves} moves, but the certificate "
        f"has {len(line)}",
    )


def _check_commitment(
    report: Report,
    seed: Any,
    salt: Any,
    published: Any,
    seen: str | None,
    certificate: Any = None,
) -> None:
    what = "sha256(seed ‖ salt ‖ sha256(certificate))" if certificate else "sha256(seed ‖ salt)"
    if isinstance(published, str) and verify(published, seed, salt, certificate):
        report.add("commitment", True, f"{what} = {str(published)[:16]}…")
    else:
        try:
            computed = f"{commitment(seed, salt, certificate)[:16]}…"
        except (ValueError, TypeError) as exc:  # said whole: cut, it said nothing
            computed = f"(cannot compute: {exc})"
        report.add(
            "commitment",
            False,
            f"{what} = {computed} but the race committed to {str(published)[:16]}…",
        )
    if seen is None:
        report.skipped.append(
            "published commitment: this file does not hold the commitment announced at "
            "the countdown (saved by a spectator who came after it, or by solrace fetch), "
            "so the one revealed is not compared with it"
        )
    else:
        report.add(
            "published commitment",
            seen == published,
            "the commitment announced at the countdown"
            + (" is the one revealed" if seen == published else f" was {seen[:16]}…"),
        )


def _check_racer(
    report: Report,
    saved: SavedResult,
    seed: int,
    standing: Mapping[str, Any],
    untimed: bool = False,
) -> None:
    who = f"racer {standing.get('racer')} ({standing.get('name')})"
    log = list(standing.get("log") or [])
    board = deal(saved.variant, seed, saved.options)
    #: The foundation count as dealt, then after each entry: when the count was reached.
    counts = [board.foundation_count()]
    for i, entry in enumerate(log):
        try:
            apply_entry(board, str(entry))
        except RulesError as exc:
            report.add(f"{who}: log", False, illegal_entry(log, i, exc))
            return
        counts.append(board.foundation_count())
    report.add(f"{who}: log", True, f"{counted(len(log), 'move')}, all legal")
    problems = _time_problems(standing, counts, saved.settings.get("time_limit_s"))
    if untimed:
        problems.append("times: missing, where the other racers' logs have theirs")
    facts = {
        "foundation": board.foundation_count(),
        "moves": board.move_count,
        "score": board.score,
    }
    for key, actual in facts.items():
        if standing.get(key) != actual:
            problems.append(f"{key} {standing.get(key)!r}, replay gives {actual}")
    status = standing.get("status")
    # Cut, as every value of the file a line quotes: a status of 100,000 characters
    # was quoted whole, three times, in one line (a tamper audit).
    said = quoted(status)
    if not is_status(status):
        problems.append(f"status {said} is no racer status")
    elif status not in FINAL_STATUSES:
        problems.append(f"status {said} in a race that is over")
    if status == "finished" and not isinstance(standing.get("elapsed_ms"), int):
        problems.append("status 'finished' with no finish time")
    if status != "finished" and standing.get("elapsed_ms") is not None:
        problems.append(f"a finish time ({standing.get('elapsed_ms')} ms) but status {said}")
    if (status == "finished") != board.is_won():
        problems.append(
            f"status {said} but the replayed game is {'won' if board.is_won() else 'not won'}"
        )
    if status == "stuck" and board.legal_moves():
        problems.append("status 'stuck' but the replayed game still has legal moves")
    report.add(
        f"{who}: standing",
        not problems,
        "; ".join(problems)
        or f"{status}, {counted(facts['foundation'], 'card')} up, "
        f"{counted(facts['moves'], 'move')}",
    )


def illegal_entry(log: Sequence[str], index: int, exc: RulesError) -> str:
    """The first entry of ``log`` the engine refuses (``log[index]``), said as
    ``verify``'s FAIL line and ``replay``'s ``!!`` line both say it: which entry of how
    many, and the engine's reason. They said it in two ways, replay's with the move
    twice (``log entry 4 '4:7>1' is illegal: illegal move 4:7>1: 3D cannot go…``)."""
    entry = str(log[index])
    if isinstance(exc, IllegalMoveError):
        why = exc.reason
    else:  # the engine's words may name it too, as it quotes it (solrace.quoting)
        why = str(exc).removeprefix(f"{quoted(entry)}: ")
    return f"entry {index + 1} of {len(log)} {quoted(entry)} is illegal: {why}"


def _time_problems(
    standing: Mapping[str, Any], counts: list[int], time_limit_s: Any = None
) -> list[str]:
    """The standing's times against its log's (``counts``: the foundation count as
    dealt, then after each entry): each entry's time on the race clock,
    in order, none at or after the room's time limit (the server takes no move then); a
    finish at the time of the last entry (the finishing move); the foundation count
    reached at the time of the last entry that changed it. So the order of the
    standings, which rests on these times, rests on the log's. A result saved before
    logs carried times has none to check."""
    times = standing.get("times")
    if times is None:
        return []
    moves = len(counts) - 1
    if not isinstance(times, list) or len(times) != moves:
        return [f"times: {len(times) if isinstance(times, list) else times!r} for {moves} moves"]
    if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in times):
        return ["times: not all race-clock milliseconds"]
    if times != sorted(times):
        return ["times: the log's moves are not in time order"]
    problems = []
    if isinstance(time_limit_s, int) and not isinstance(time_limit_s, bool):
        late = sum(t >= time_limit_s * 1000 for t in times)
        if late:
            problems.append(
                f"times: {late} of its moves at or after the {time_limit_s} s time limit "
                f"(the last at {times[-1] / 1000:.3f} s): no move is taken then"
            )
    last = times[-1] if times else None
    if standing.get("status") == "finished" and standing.get("elapsed_ms") != last:
        problems.append(f"finish time {standing.get('elapsed_ms')!r}, the last move's is {last}")
    changed = [t for i, t in enumerate(times) if counts[i + 1] != counts[i]]
    reached = changed[-1] if changed else None
    if standing.get("reached_ms") != reached:
        problems.append(
            f"cards-up time {standing.get('reached_ms')!r}, the log reached that count at {reached}"
        )
    return problems


def _check_order(
    report: Report, standings: list[dict[str, Any]], settings: Mapping[str, Any]
) -> None:
    """docs/rules.md: finishers first by finish time, each before the time limit; then
    by foundation (more first), then by the earlier time that count was reached, then
    in join order (racer ids); no more racers than the room seats."""
    problems: list[str] = []
    time_limit_s, seats = settings.get("time_limit_s"), settings.get("max_racers")
    if isinstance(seats, int) and len(standings) > seats:
        problems.append(f"{len(standings)} racers in a room of {seats} seats")
    places = [s.get("place") for s in standings]
    if places != list(range(1, len(standings) + 1)):
        problems.append(f"places are {places}, not 1..{len(standings)} in order")
    racers = Counter(str(s.get("racer")) for s in standings)
    twice = sorted(r for r, listed in racers.items() if listed > 1)
    if twice:
        problems.append(f"racer {', '.join(twice)} listed more than once")
    # One name per racer, as the server gives them (race.decisions.distinct_name).
    named: dict[str, list[str]] = {}
    for s in standings:
        named.setdefault(name_key(str(s.get("name"))), []).append(str(s.get("racer")))
    problems += [
        f"racers {' and '.join(ids)} share one name" for ids in named.values() if len(ids) > 1
    ]
    if isinstance(time_limit_s, int) and not isinstance(time_limit_s, bool):
        late = [
            f"{s.get('name')} at {int(s.get('elapsed_ms') or 0) / 1000:.3f} s"
            for s in standings
            if s.get("status") == "finished"
            and int(s.get("elapsed_ms") or 0) >= time_limit_s * 1000
        ]
        if late:
            problems.append(
                f"finished at or after the {time_limit_s} s time limit: {', '.join(late)}"
            )
    never = 1 << 62

    def rank(s: Mapping[str, Any]) -> tuple[int, int, int, int]:
        # Equal finish times keep the order they were stored in, which the file does
        # not hold (fetch checks it); equal cards up and times go in join order.
        if s.get("status") == "finished":
            return (0, int(s.get("elapsed_ms") or 0), 0, 0)
        reached = s.get("reached_ms")
        joined = s.get("racer")
        return (
            1,
            -int(s.get("foundation") or 0),
            never if reached is None else int(reached),
            joined if isinstance(joined, int) else 0,
        )

    ranks = [rank(s) for s in standings]
    if ranks != sorted(ranks):
        problems.append(
            "racers are not ranked by finish time, then cards up, then time, then join order"
        )
    report.add(
        "standings order", not problems, "; ".join(problems) or "as the rule book ranks them"
    )
