"""The bot on real servers (Redis and embedded): two bots race to the end, through the
library and through ``solrace bot``; a bot survives its server node dying mid-race;
and its strategies, offline."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import re
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from solrace.rooms import moves
from solrace.rooms.records import log_name
from solrace.rules import deal, parse_move, view
from solrace.rules.log import apply_entry
from solrace.store.errors import StoreUnavailable
from solrace_client import RaceClient
from solrace_client.boardview import board_from_view
from solrace_client.bot import BotCannotStart, BotError, BotHooks, run_bot
from solrace_client.cli import main
from solrace_client.errors import EXIT_INTERRUPTED, EXIT_TERMINATED
from solrace_client.results import load_result, race_id
from solrace_client.session import Session
from solrace_client.strategy import STRATEGIES, Choice, Memory, position_key
from solrace_client.tui.news import News
from solrace_client.verify import verify_result

from tests.net.conftest import Cluster
from tests.support.faults import StoreFaults
from tests.support.server_process import solrace_server
from tests.support.terminal import signals_as_a_shell_gives

from .conftest import SEED, bot_entered, bot_race


async def _hosting(
    server: str, hooks: BotHooks | None = None, **options: Any
) -> tuple[asyncio.Task[dict[str, Any]], dict[str, Any]]:
    """A bot that creates a two-racer Yukon room and starts the race as its host (its
    task, whose result is the race's), and the ``joined`` reply it got: the room's code
    for a second racer, its racer id and room."""
    create = {"variant": "yukon", "max_racers": 2}
    return await bot_entered(server, hooks, create=create, host_start=True, **options)


async def test_two_bots_race_to_the_end_and_save_a_verifiable_result(
    cluster: Cluster, config_dir: Path
) -> None:
    server = await cluster.node()
    result, joined = await bot_race(server.url, max_moves=400)
    assert result["reason"] == "all_done"
    assert result["seed"] == SEED  # the cluster's fixed deal: the greedy bot wins it
    standings = result["standings"]
    assert [s["name"] for s in standings] == ["Ann", "Bob"]
    winner = standings[0]
    assert (winner["place"], winner["status"], winner["foundation"]) == (1, "finished", 52)
    assert standings[1]["status"] in ("stuck", "resigned", "finished")
    saved = load_result(race_id(joined["room"], result))
    assert saved.path is not None and saved.path.parent == config_dir / "races"
    assert saved.code == joined["code"] and saved.settings["variant"] == "yukon"
    assert saved.published_commitment == result["commitment"]
    assert verify_result(saved).ok


async def test_a_rematch_before_the_bot_is_done_leaves_its_saved_race_whole(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The view folds frames as they arrive: a rematch's room_reset folded while the
    bot closed its session (here: held until it has) cleared the commitment seen at the
    countdown and the deal, and the bot saved the race without them (verify then skips
    its commitment check). It saves them as the round ended."""
    close = Session.close

    async def slow_close(session: Session) -> None:
        async with asyncio.timeout(10):
            while session.view.phase != "lobby":
                await asyncio.sleep(0.01)
        await close(session)

    monkeypatch.setattr(Session, "close", slow_close)
    server = await cluster.node()
    task, joined = await _hosting(server.url, max_moves=400)
    bob = await RaceClient.connect(server.url)
    await bob.join(joined["code"], "Bob")
    await bob.ready()
    await bob.next_event("started")
    await bob.resign()
    over = await bob.next_event("race_over", timeout=30)
    await bob.rematch()
    result = await asyncio.wait_for(task, 30)
    assert result == over.d
    saved = load_result(race_id(joined["room"], result))
    assert saved.published_commitment == result["commitment"]
    assert saved.deal is not None and saved.deal["certified"]
    assert verify_result(saved).ok
    await bob.close()


async def test_solrace_bot_joins_by_code_plays_and_prints_the_standings(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console command: exit status 0 when the race is over, standings printed."""
    server = await cluster.node()
    host, joined = await _hosting(server.url, name="Host", rng_seed=3, max_moves=300)
    code = joined["code"]
    argv = ["bot", code.lower(), "--server", server.url, "--name", "Cli", "--delay", "0"]
    argv += ["--max-moves", "300", "--seed", "4"]
    status = await asyncio.wait_for(asyncio.to_thread(main, argv), 30)
    result = await asyncio.wait_for(host, 10)
    out = capsys.readouterr().out
    assert status == 0
    assert "race over" in out and "Host" in out
    assert re.search(r"│ Cli +│ ◀ │", out), out  # the mark in its own column
    rid = race_id(joined["room"], result)
    assert f"solrace verify {rid}" in out
    assert {s["name"] for s in result["standings"]} == {"Host", "Cli"}


async def test_a_hosting_bot_is_not_ready_until_min_racers_are_in(cluster: Cluster) -> None:
    """An audit: ``solrace bot --create --racers 8 --min-racers 8`` was ready at once,
    so the room started at 2/8 when a second bot joined and readied (a room starts once
    everyone, its host included, is ready), and six bots were refused. The host now
    readies only once ``min_racers`` are in, and unreadies if one leaves."""
    server = await cluster.node()
    host, joined = await bot_entered(
        server.url,
        create={"variant": "yukon", "max_racers": 3},
        name="Host",
        host_start=True,
        min_racers=3,
        max_moves=300,
        save=False,
    )
    code = joined["code"]
    bob, cy = await RaceClient.connect(server.url), await RaceClient.connect(server.url)
    await bob.join(code, "Bob")
    await bob.ready()
    await asyncio.sleep(1)  # time for the host to ready (and the room to start) if it would
    assert bob.view.phase == "lobby"
    host_id = bob.view.host
    assert host_id is not None and not bob.view.racers[host_id].get("ready")
    await cy.join(code, "Cy")
    await cy.ready()
    for client in (bob, cy):
        await client.wait_started()
        await client.resign()
    result = await asyncio.wait_for(host, 60)
    assert sorted(s["name"] for s in result["standings"]) == ["Bob", "Cy", "Host"]
    for client in (bob, cy):
        await client.close()


async def test_an_interrupted_bot_leaves_its_lobby_and_a_quick_race_is_not_matched_with_it(
    cluster: Cluster,
) -> None:
    """A newcomer audit: Ctrl-C on ``solrace bot --quick`` in the lobby left the bot in
    it, ready, and the next quick racer's race started against nobody (then a ``left``
    racer). Interrupted, the bot leaves first."""
    server = await cluster.node()
    ghost, joined = await bot_entered(server.url, quick_variant="yukon", name="Ghost", save=False)
    room = joined["room"]
    ghost.cancel()  # what Ctrl-C does to the command's task
    with pytest.raises(asyncio.CancelledError):
        await ghost
    live = server.node.rooms[room]
    assert not live.state.racers  # it left: the lobby is empty, unlisted
    assert room not in await server.node.store.listed_rooms()


async def _bot_process(url: str, code: str) -> asyncio.subprocess.Process:
    """``solrace bot CODE -v`` as a shell starts it (SIGINT at its default action: a
    background job of a non-interactive shell ignores it)."""
    return await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "solrace"),
        *("bot", code, "--server", url, "--name", "Bot", "-v", "--delay", "0.5"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=signals_as_a_shell_gives,
    )


async def _said(proc: asyncio.subprocess.Process, words: bytes) -> bytes:
    """What the process wrote to standard error, up to the line holding ``words``."""
    assert proc.stderr is not None
    said = b""
    while words not in said:
        line = await asyncio.wait_for(proc.stderr.readline(), 20)
        assert line, said
        said += line
    return said


@pytest.mark.parametrize(
    ("sig", "status", "line"),
    [
        (signal.SIGTERM, EXIT_TERMINATED, "solrace: terminated"),
        (signal.SIGINT, EXIT_INTERRUPTED, "solrace: interrupted"),
    ],
)
@pytest.mark.parametrize("phase", ["lobby", "racing"])
async def test_a_signalled_bot_leaves_its_race_and_says_so_in_one_line(
    sig: signal.Signals, status: int, line: str, phase: str
) -> None:
    """``kill PID`` (SIGTERM) of ``solrace bot`` against a real solrace-server killed it
    where it stood (status -15, not a word): the server saw it offline and held its
    seat for the 30 s grace — a bot saves no race for ``solrace resume``, so nothing
    could take it back, and in a lobby a ready ghost is what a quick race was matched
    with (the Ctrl-C audit above). It now ends as Ctrl-C does: it leaves the race
    (the others see ``racer_left``, reason ``left``, at once), says one line, and
    exits 143 (128 + SIGTERM; Ctrl-C 130), no traceback, in the lobby or mid-race."""
    async with solrace_server("redis") as server:
        ann = await RaceClient.connect(server.url)
        await ann.create("yukon", "Ann", private=True)
        proc = await _bot_process(server.url, str((ann.snapshot or {})["code"]))
        try:
            said = await _said(proc, b"joined room")
            if phase == "racing":
                await ann.wait_for(lambda e: e.t == "ready_changed" and e.d["racer"] == 2)
                await ann.ready()
                await ann.start()
                said += await _said(proc, b"bot: started")
            proc.send_signal(sig)
            assert proc.stderr is not None
            said += await asyncio.wait_for(proc.stderr.read(), 10)
            assert await asyncio.wait_for(proc.wait(), 10) == status, said
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        left = await ann.wait_for(lambda e: e.t in ("racer_left", "presence"), 5)
        assert (left.t, left.d.get("reason")) == ("racer_left", "left"), left
        await ann.close()
    assert said.decode().splitlines()[-1] == line, said
    assert b"Traceback" not in said
    assert "Traceback" not in server.log and " ERROR " not in server.log, server.log


async def test_a_bot_resumes_on_another_node_when_its_node_dies(cluster: Cluster) -> None:
    first, second = await cluster.node(), await cluster.node()
    servers = [first.url, second.url]
    moved: list[dict[str, Any]] = []
    said: list[str] = []
    tenth = asyncio.Event()

    def on_moved(reply: dict[str, Any]) -> None:
        moved.append(reply)
        if len(moved) == 10:
            tenth.set()

    ann, joined = await bot_entered(
        servers,
        BotHooks(moved=on_moved, say=said.append),
        create={"variant": "yukon"},
        name="Ann",
        host_start=True,
        rng_seed=1,
        move_delay=0.02,
    )
    code = joined["code"]
    bob = asyncio.create_task(
        run_bot(
            servers,
            code=code,
            name="Bob",
            strategy="random",
            rng_seed=2,
            move_delay=0.02,
            max_moves=90,
        )
    )
    await asyncio.wait_for(tenth.wait(), 15)
    await cluster.kill(first)  # mid-race: every connection to it drops
    async with asyncio.timeout(40):
        result, other = await asyncio.gather(ann, bob)
    assert result == other
    assert any(line.startswith(f"resumed on {second.url}") for line in said), said
    mine = next(s for s in result["standings"] if s["name"] == "Ann")
    assert mine["status"] == "finished"
    # Its last line and its standing agree (it said only its own count: 98 against 118)
    last = moved[-1]["moves"]
    done = [line for line in said if line.startswith("finished after ")]
    assert len(done) == 1 and (str(last) in done[0]), (done, last)
    # Nothing acknowledged was lost, and nothing was played twice.
    seqs = [m["seq"] for m in moved]
    assert seqs == sorted(set(seqs))
    assert len(moved) <= len(mine["log"]) <= len(moved) + 1


async def test_a_bot_cut_off_mid_race_reconnects_to_the_same_server(cluster: Cluster) -> None:
    """The network drops (the socket is aborted, no close handshake): same URL, resume."""
    server = await cluster.node()
    clients: list[Any] = []
    said: list[str] = []
    cut = False

    def on_moved(reply: dict[str, Any]) -> None:
        nonlocal cut
        if reply["seq"] == 5 and not cut:
            cut = True
            clients[-1].ws.transport.abort()

    ann, _joined = await bot_entered(
        server.url,
        BotHooks(connected=clients.append, moved=on_moved, say=said.append),
        quick_variant="yukon",
        name="Ann",
        rng_seed=1,
    )
    bob = asyncio.create_task(
        run_bot(server.url, quick_variant="yukon", name="Bob", strategy="random", max_moves=300)
    )
    async with asyncio.timeout(30):
        result, _other = await asyncio.gather(ann, bob)
    assert cut and len(clients) >= 2
    assert any(line.startswith("resumed on") for line in said), said
    # She played on, on the same seat, after the cut (a greedy bot need not win: on some
    # runs it gets stuck and resigns, so the place is not the point here).
    ann_row = next(row for row in result["standings"] if row["name"] == "Ann")
    assert len(ann_row["log"]) > 6
    assert ann_row["status"] in ("finished", "stuck", "resigned")  # never left for gone


async def test_a_move_refused_unavailable_is_sent_again_with_the_same_seq_and_move(
    cluster: Cluster,
) -> None:
    """Redis stores a move but its reply is lost: ``unavailable``, outcome unknown. The
    bot sends that very move again under the same seq (a different one would be
    ``bad_seq``) and gets the stored outcome (docs/protocol.md §11)."""
    server = await cluster.node()
    faults = StoreFaults(server.node.store)
    said: list[str] = []
    accepted: list[tuple[int, str]] = []

    def on_accepted(seq: int, move: str) -> None:
        accepted.append((seq, move))
        if seq == 4:  # Ann's next move (round 1) is stored, then its reply is lost (not Bob's)
            faults.on_append_move(reply_lost, log=log_name(1, joined["racer"]))

    async def reply_lost(append: Callable[[], Awaitable[Any]]) -> Any:
        await append()
        raise StoreUnavailable("reply lost (injected)")

    ann, joined = await _hosting(
        server.url,
        BotHooks(accepted=on_accepted, say=said.append),
        name="Ann",
        strategy="random",  # ties broken at random: a fresh pick would differ
        rng_seed=5,
        max_moves=20,
    )
    bob = run_bot(server.url, code=joined["code"], name="Bob", rng_seed=6, max_moves=20)
    async with asyncio.timeout(30):
        result, _other = await asyncio.gather(ann, bob)
    retried = [line for line in said if line.startswith("move 5 ")]
    assert len(retried) == 1 and retried[0].endswith(": unavailable; retrying it"), said
    move = retried[0].split()[2].rstrip(":")
    assert (5, move) in accepted
    assert [seq for seq, _ in accepted] == list(range(20))  # nothing lost, nothing twice
    mine = next(s for s in result["standings"] if s["name"] == "Ann")
    assert mine["log"][5] == move and mine["log"] == [m for _, m in accepted]


async def test_a_bot_whose_log_is_full_resigns(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``move_limit``: no move of this racer will be taken again, so the bot resigns
    rather than wait for the time limit. The server's cap is lowered here to reach it
    in a few moves (at 5,000 it takes minutes at the rate limit); the refusal is the
    server's own (tests/rooms/test_core.py reaches the real cap)."""
    monkeypatch.setattr(moves, "MAX_LOG_LEN", 8)
    server = await cluster.node()
    said: list[str] = []
    ann, joined = await _hosting(
        server.url, BotHooks(say=said.append), name="Ann", rng_seed=3, max_moves=30
    )
    bob = run_bot(server.url, code=joined["code"], name="Bob", rng_seed=4, max_moves=30)
    async with asyncio.timeout(30):
        result, _other = await asyncio.gather(ann, bob)
    assert result["reason"] == "all_done"
    mine = next(s for s in result["standings"] if s["name"] == "Ann")
    assert mine["status"] == "resigned" and len(mine["log"]) == 8, mine
    assert any(line.startswith("resigning after 8 moves") for line in said), said


async def test_a_bot_stuck_where_undo_is_allowed_resigns(cluster: Cluster) -> None:
    """Undo is allowed (Yukon's default), so the server counts a stuck racer as able
    to move and the race would wait for its time limit: the bot resigns instead."""
    server = await cluster.node()

    def no_move(board: Any, memory: Memory, rng: random.Random) -> None:
        return None  # what the strategies answer when no move is legal

    ann, joined = await _hosting(server.url, name="Ann", strategy=no_move)
    bob = run_bot(server.url, code=joined["code"], name="Bob", rng_seed=2, max_moves=30)
    async with asyncio.timeout(30):  # the room's time limit is 900 s
        result, _other = await asyncio.gather(ann, bob)
    assert result["reason"] == "all_done"
    statuses = {s["name"]: s["status"] for s in result["standings"]}
    assert statuses["Ann"] == "resigned", statuses


async def test_a_bot_done_with_its_race_is_seen_to_leave_not_to_go_offline(
    cluster: Cluster,
) -> None:
    """After ``race_over`` the bot, done with the room, only closed its connection: the
    others were told ``presence`` offline, and the terminal UI said ``Robot went
    offline`` on the race-over screen, of a bot that had gone for good (and is no racer
    of a rematch). It leaves first, as when interrupted: ``racer_left``, reason
    ``left``, and the line says so."""
    server = await cluster.node()
    ann = await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann", private=True)
    news = News()
    news.reset(ann.view)
    bot = asyncio.create_task(run_bot(server.url, code=ann.view.code, name="Robot", save=False))
    await ann.wait_for(lambda e: e.t == "ready_changed" and e.d["ready"], 10)
    await ann.ready()
    await ann.start()
    await ann.next_event("started", timeout=30)
    await ann.resign()
    await ann.next_event("race_over", timeout=60)
    await asyncio.wait_for(bot, 10)
    gone = await ann.wait_for(lambda e: e.t in ("racer_left", "presence"), 5)
    assert (gone.t, gone.d.get("reason")) == ("racer_left", "left"), gone
    assert news.line(gone, ann.view) == "Robot left"
    await ann.close()


async def test_a_bot_that_gives_up_mid_race_leaves_it(cluster: Cluster) -> None:
    """A bot that gives up (a BotError: its moves refused again and again, a race the
    server never ends…) only closed its connection: the others were told ``Robot went
    offline (30 s to come back)`` of a bot that saves no race to resume and never comes
    back, and its seat was held the 30 s. It leaves, as when interrupted."""
    server = await cluster.node()

    def illegal(board: Any, memory: Memory, rng: random.Random) -> Choice:
        return Choice(parse_move("1:1>2"), novel=True)  # refused: 3♥ on A♦

    ann = await RaceClient.connect(server.url)
    await ann.create("yukon", "Ann", private=True)
    bot = asyncio.create_task(
        run_bot(server.url, code=ann.view.code, name="Robot", strategy=illegal, save=False)
    )
    await ann.wait_for(lambda e: e.t == "ready_changed" and e.d["ready"], 10)
    await ann.ready()
    await ann.start()
    with pytest.raises(BotError, match="too many refused moves"):
        await asyncio.wait_for(bot, 30)
    gone = await ann.wait_for(lambda e: e.t in ("racer_left", "presence"), 5)
    assert (gone.t, gone.d.get("reason")) == ("racer_left", "left"), gone
    await ann.close()


async def test_a_bot_refused_at_the_door_says_why(cluster: Cluster) -> None:
    server = await cluster.node()
    with pytest.raises(BotCannotStart, match="no room has that code"):
        await run_bot(server.url, code="NOSUCH", name="Ann")


async def test_a_bot_that_never_readies_leaves_a_room_only_its_host_starts(
    cluster: Cluster,
) -> None:
    """``solrace bot CODE --no-ready`` in a room made with ``create``: such a room starts
    when everyone is ready, or when its host starts it with every other racer ready, so
    the bot (no host) kept it in its lobby for ever, and waited with it (a newcomer
    audit: both bots of `--create` and `CODE --no-ready` ran until killed). It now
    leaves and says why, status 2; with --host-start it may come to start it, and a
    quick room starts on its lobby timer (both still taken)."""
    server = await cluster.node()
    host = await RaceClient.connect(server.url)
    await host.create("yukon", "Host", max_racers=2)
    code = host.view.code
    with pytest.raises(BotCannotStart) as refused:
        await asyncio.wait_for(run_bot(server.url, code=code, name="Idle", ready=False), 10)
    assert str(refused.value) == (
        f"--no-ready: room {code} starts only when every racer is ready, or when its "
        "host starts it with every other racer ready: a bot that is never ready would "
        "keep it from starting (--no-ready is for a quick room, which starts on its lobby "
        "timer, or with --host-start); the bot left the room"
    )
    await asyncio.sleep(0.2)
    assert host.view.phase == "lobby" and len(host.view.racers) == 1  # its seat is free
    await host.close()


async def test_run_bot_wants_exactly_one_way_in() -> None:
    with pytest.raises(ValueError):
        await run_bot("ws://127.0.0.1:1", name="Ann")
    with pytest.raises(ValueError):
        await run_bot("ws://127.0.0.1:1", code="ABC", quick_variant="yukon", name="Ann")


# ------------------------------------------------------------- strategies
def _play_offline(variant: str, seed: int, strategy: str, limit: int = 600) -> tuple[str, int]:
    """Play like the bot does, without a server: choose from the rebuilt view only."""
    board = deal(variant, seed)
    rng = random.Random(seed)
    memory = Memory()
    memory.arrive(view(board, owner=True))
    played = 0
    while board.status() == "playing" and played < limit:
        choice = STRATEGIES[strategy](board_from_view(view(board, owner=True)), memory, rng)
        assert choice is not None
        move = str(choice.move)
        before = position_key(view(board, owner=True))
        apply_entry(board, move)
        after = position_key(view(board, owner=True))
        if choice.novel and move == "D":  # the drawn card was hidden: a new way, at least
            assert (before, move) not in memory.taken
        elif choice.novel:
            assert after not in memory.seen, f"{move} from {before} revisits a position"
        memory.leave(before, move)
        memory.arrive(view(board, owner=True))
        played += 1
    return board.status(), played


def test_greedy_wins_the_test_deal_offline() -> None:
    status, played = _play_offline("yukon", SEED, "greedy")
    assert status == "won" and played < 200


@pytest.mark.parametrize("variant", ["yukon", "klondike", "australian"])
@pytest.mark.parametrize("strategy", ["greedy", "random"])
def test_strategies_only_call_a_move_novel_when_it_is(variant: str, strategy: str) -> None:
    for seed in range(3):
        _play_offline(variant, seed, strategy, limit=150)


def test_greedy_puts_a_card_up_before_anything_else() -> None:
    board = deal("yukon", SEED)
    rng = random.Random(0)
    memory = Memory()
    for _ in range(40):
        ups = [m for m in board.legal_moves() if str(m).endswith(">F")]
        choice = STRATEGIES["greedy"](board_from_view(view(board, owner=True)), memory, rng)
        assert choice is not None
        if ups:
            assert str(choice.move).endswith(">F")
        apply_entry(board, str(choice.move))
        memory.arrive(view(board, owner=True))


def test_every_bot_hook_is_named_in_the_docs() -> None:
    """docs/client.md lists the hooks a program can give ``run_bot``: an audit found
    two of them (``say``, ``before_start``) named nowhere."""
    doc = (Path(__file__).parents[2] / "docs" / "client.md").read_text()
    missing = [f.name for f in dataclasses.fields(BotHooks) if f"`{f.name}`" not in doc]
    assert not missing, missing
