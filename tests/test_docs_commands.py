"""Every command line of the README and of docs/ is run as written (issue 11, item 2).

The command lines are the lines of every fenced ``sh`` block (output is fenced
``text``). :data:`NOT_RUN` lists, with the reason, the few that cannot be run from a
test; every other line must be in :data:`RUN` — a line added to the docs without a test
here, or a test of a line the docs dropped, fails :func:`test_every_command_is_run`.

How they run: with ``bash -c`` in a scratch directory holding a ``.venv`` link to this
environment, ``.venv/bin`` first on ``PATH`` (as the README asks), against
``solrace-server`` started with its default settings (``$SOLRACE_SERVER`` points the
commands at it), and a scratch config directory. The terminal UI commands run in a
pseudo-terminal of 80×24 and are driven with keys until they exit 0. A few words are
placeholders, replaced by the real thing (:data:`PLACEHOLDERS`): ``CODE`` by the
room's code, ``RACE`` by a saved race id, the example codes and race ids likewise,
and the ports 8765/8766 by free ones (tests must not take a user's server port).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import pty
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from solrace_client import RaceClient

from tests.support.redis import REDIS_URL, delete_prefix, new_prefix
from tests.support.server_process import ServerProcess, solrace_server
from tests.support.terminal import signals_as_a_shell_gives

ROOT = Path(__file__).parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
ESCAPES = re.compile(r"\x1b(\[[0-9;?<>=$]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[=>()][0-9AB]?)")

NOT_RUN = {
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test,client]' && "
    ".venv/bin/solrace-server": "creates a virtual environment and installs the project, "
    "as .ci/run does before running this very test; the server it starts is the "
    "solrace-server every test here runs",
    "bash .ci/run": "the test suite itself (its clean-up: tests/test_packaging.py)",
    ".venv/bin/python -m pytest -n 0 tests/deploy/test_chaos.py -s": "the chaos test, "
    "which the suite this test belongs to runs as it is",
    ".venv/bin/pip install -e '.[client]'      # installs the `solrace` console script": (
        "installs the project into the environment this test runs in"
    ),
    "SOLRACE_SOLVER_PURE=1 python -m solrace.bench solver --json --variant yukon --deals 10000 "
    "--budget 20000 --workers 1 --certify 300 --certify-budget 20000 --certify-node 0 "
    "--log yukon.log": (
        "docs/winnability.md's study: 10,000 deals, a quarter of an hour of CPU (the table it "
        "produced is what that page shows)"
    ),
    "python -m solrace.solver.accel build": "builds the optional accelerator into the "
    "package itself, which would switch every later solve of this environment to it; "
    "tests/solver/test_accel.py builds it into a scratch directory and checks its answers",
    "python -m solrace.bench solver --json --variant klondike-draw3-thoughtful --variant "
    "russian --variant double_yukon --variant alaska --variant klondike --variant "
    "klondike-draw3 --variant australian --deals 2000 --budget 20000 --workers 1 --certify 0 "
    "--certify-node 0 --log others.log": (
        "docs/winnability.md's study: 2,000 deals of seven presets"
    ),
    "python -m solrace.bench solver --json --variant klondike-draw3-thoughtful --variant "
    "russian --variant double_yukon --variant alaska --variant klondike --variant "
    "klondike-draw3 --variant klondike-draw3-solvitaire --variant australian --deals 2000 "
    "--budget 20000 --workers 2 --certify 0 --certify-node 0 --log others.log": (
        "docs/winnability.md's study of the other presets on today's solver: 2,000 deals "
        "of eight presets"
    ),
    "python -m solrace.bench solver --json --variant klondike-draw3-solvitaire --deals 2000 "
    "--budget 20000 --workers 1 --certify 0 --certify-node 0": (
        "docs/winnability.md's Klondike check at the server budget: 2,000 deals"
    ),
    "python -m solrace.bench solver --json --variant klondike-draw3-solvitaire --variant "
    "klondike-draw3-thoughtful --deals 2000 --budget 200000 --workers 1 --certify 0 "
    "--certify-node 0 --log ks200k.log": (
        "docs/winnability.md's Klondike check at 200,000 nodes: 2,000 deals of two presets"
    ),
    "python -m solrace.bench solver --json --variant yukon --deals 0 --budget 20000 "
    "--workers 1 --certify 300 --certify-budget 20000 --certify-node 0": (
        "docs/winnability.md's certify measure with the accelerator: 300 walks"
    ),
}

#: Placeholders in documented commands → what they stand for (filled in as the
#: scenario produces them).
PLACEHOLDERS = ("CODE", "RACE", "K7QX2M", "kbz8cl", "KBZ8CL", "r_2147d18c011a.3bda1e00")


def sh_lines() -> list[str]:
    """Every command line of every ``sh`` block of the README and docs/, as written (a
    line ending in a backslash continues on the next, as in the shell)."""
    lines: list[str] = []
    for path in DOC_FILES:
        for block in re.findall(r"^ *```sh\n(.*?)^ *```", path.read_text(), re.M | re.S):
            command = ""
            for line in block.splitlines():
                command += (" " if command else "") + line.strip().removesuffix("\\").strip()
                if not line.rstrip().endswith("\\"):
                    if command:
                        lines.append(command)
                    command = ""
    return lines


def text_block_after(words: str, path: Path = ROOT / "docs" / "client.md") -> list[str]:
    """The lines of the first ``text`` block after ``words`` in ``path`` (the output a
    page shows a command prints)."""
    page = path.read_text()
    block = re.search(r"^```text\n(.*?)^```", page[page.index(words) :], re.M | re.S)
    assert block, f"no text block after {words!r} in {path}"
    return [line.rstrip() for line in block.group(1).splitlines()]


# ---------------------------------------------------------------- running
@dataclass
class World:
    """The scratch directory, the environment of every command, and what the scenario
    learnt (room codes, race ids) for the placeholders."""

    cwd: Path
    env: dict[str, str]
    values: dict[str, str] = field(default_factory=dict)

    def command(self, line: str) -> str:
        """The documented ``line`` with its placeholders filled in."""
        for name in PLACEHOLDERS:
            if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w.])", line):
                line = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w.])", self.values[name], line)
        return line

    async def run(self, line: str, stdin: str = "", timeout: float = 60) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            self.command(line),
            cwd=self.cwd,
            env=self.env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout)
        assert proc.returncode is not None
        return proc.returncode, out.decode()

    async def ok(self, line: str, *expected: str, stdin: str = "", timeout: float = 60) -> str:
        status, out = await self.run(line, stdin, timeout)
        assert status == 0, f"{line!r} exited {status}:\n{out}"
        for text in expected:
            assert text in out, f"{line!r} did not print {text!r}:\n{out}"
        return out

    async def background(self, line: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            "exec " + self.command(line).removesuffix("&").strip(),
            cwd=self.cwd,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            preexec_fn=signals_as_a_shell_gives,  # the tests interrupt it with SIGINT
        )


class Terminal:
    """A documented command in a pseudo-terminal of 80×24, read and typed into."""

    def __init__(self, world: World, line: str) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.line = line
        self.proc = subprocess.Popen(
            ["bash", "-c", "exec " + world.command(line)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=world.cwd,
            env={**world.env, "TERM": "xterm-256color"},
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.raw = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(self.master, 65536):
                self.raw += chunk

    @property
    def text(self) -> str:
        return ESCAPES.sub("", self.raw.decode(errors="replace"))

    async def expect(self, text: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.text:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{self.line!r} never showed {text!r}:\n{self.text[-3000:]}")
            await asyncio.sleep(0.05)

    async def keys(self, *keys: str) -> None:
        for key in keys:
            os.write(self.master, key.encode())
            await asyncio.sleep(0.3)

    async def exits(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.line!r} did not exit:\n{self.text[-3000:]}")
            await asyncio.sleep(0.05)
        return int(self.proc.returncode)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(OSError):
            os.close(self.master)


@contextlib.contextmanager
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    try:
        yield opened
    finally:
        for terminal in opened:
            terminal.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def world(tmp_path: Path) -> AsyncIterator[tuple[World, ServerProcess]]:
    (tmp_path / ".venv").symlink_to(BIN.parent)
    (tmp_path / "docs").symlink_to(ROOT / "docs")  # the documentation's own tools
    async with solrace_server() as server:
        env = {
            **os.environ,
            "PATH": f"{tmp_path / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "SOLRACE_SERVER": server.url,
            "SOLRACE_CONFIG_DIR": str(tmp_path / "config"),
            "SOLRACE_DATA_DIR": str(tmp_path / "data"),  # a server a command starts
        }
        yield World(tmp_path, env), server


async def rooms(url: str) -> list[dict[str, object]]:
    client = await RaceClient.connect(url)
    try:
        return await client.list_rooms()
    finally:
        await client.close()


async def wait_room(url: str, phase: str, **match: object) -> dict[str, object]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for room in await rooms(url):
            if room["phase"] == phase and all(room.get(k) == v for k, v in match.items()):
                return room
        await asyncio.sleep(0.2)
    raise AssertionError(f"no {phase} room {match} on {url}: {await rooms(url)}")


# ----------------------------------------------------------------- the tests
def test_every_command_is_run() -> None:
    documented = set(sh_lines())
    assert documented, "no sh blocks found"
    untested = documented - RUN_LINES - set(NOT_RUN)
    assert not untested, f"documented commands no test runs: {sorted(untested)}"
    stale = (RUN_LINES | set(NOT_RUN)) - documented
    assert not stale, f"tested commands the docs no longer have: {sorted(stale)}"


def inline_commands(program: str) -> list[str]:
    """The inline code spans of the README and docs/ that start with ``program`` (fenced
    blocks left out: :func:`sh_lines` has those), each on one line as the shell reads a
    span the page wrapped."""
    spans: list[str] = []
    for path in DOC_FILES:
        prose = re.sub(r"^ *```.*?^ *```", "", path.read_text(), flags=re.M | re.S)
        for span in re.findall(r"`([^`]+)`", prose):
            command = " ".join(span.split())
            if command.startswith(program + " "):
                spans.append(command)
    return spans


#: The sizes of a solver study, each with a default that runs more than the figures a
#: page shows: a documented study names every one (issue: a newcomer re-running
#: docs/winnability.md's commands also ran the default 100 node-certify walks a
#: setting, which none of its figures came from).
SOLVER_SIZES = ("--deals", "--certify", "--certify-node")


def test_the_documented_solver_commands_parse_and_name_their_sizes() -> None:
    """Every documented ``python -m solrace.bench solver`` command (its blocks and the
    commands quoted in the prose) is taken by the benchmark's own parser and checks, as
    the run would take it; one that names any of :data:`SOLVER_SIZES` names them all,
    so what it runs is what the page says it measured, whatever the defaults."""
    from solrace.bench.cli import _check, build_parser

    program = "python -m solrace.bench solver"
    commands = [line for line in sh_lines() if program in line] + inline_commands(program)
    assert len(commands) >= 8, commands  # docs/winnability.md's, at least
    for command in commands:
        words = shlex.split(command, comments=True)
        while "=" in words[0]:  # an environment assignment before the command
            words.pop(0)
        argv = words[words.index("solrace.bench") + 1 :]
        parser = build_parser()
        args = parser.parse_args(argv)  # a bad one: SystemExit, with argparse's line
        _check(parser, args)  # another suite's option too
        named = [size for size in SOLVER_SIZES if size in argv]
        if named:
            assert named == list(SOLVER_SIZES), f"{command!r} leaves {SOLVER_SIZES} to defaults"


README_RULES = [
    "solrace-rules deal yukon 42 | solrace-rules moves -        # legal moves, one a line",
    "solrace-rules deal klondike 7 -o draw=3 > pos.json",
    "solrace-rules perft pos.json 3                              # move-generator check",
    "solrace-rules play pos.json '7>F' D '5:1>2'                 # position after the moves",
    "solrace-rules play --indent 2 pos.json D                    # the same, indented JSON",
    "python -m solrace.bench rules --json                        # engine benchmark",
    "python -m solrace.bench core --json                         # room-core cost per move "
    "on Redis (db 0 unless --redis-url)",
]
SOLVER = [  # README and docs/solver.md; pos.json is the README's
    "solrace-rules deal yukon 42 | solrace-rules solve -         # outcome, then a winning "
    "line (docs/solver.md)",
    "solrace-rules hint pos.json                                 # the next move of a winning line",
    'solrace-rules deal yukon 42 | solrace-rules solve -      # "won moves=… nodes=… '
    'difficulty=…", then one move a line',
    "solrace-rules hint pos.json --budget 50000               # the first move of a winning line",
]


async def test_the_rules_engine_commands(tmp_path: Path) -> None:
    async with world(tmp_path) as (w, _):
        deal, dump, perft, play, indent, bench, core = README_RULES
        assert re.fullmatch(r"(\S+\n)+", await w.ok(deal))  # moves, one a line
        await w.ok(dump)
        assert (tmp_path / "pos.json").read_text().startswith('{"variant": "klondike"')
        assert re.fullmatch(r"\d+\n", await w.ok(perft))
        assert '"variant": "klondike"' in await w.ok(play)
        assert '\n  "variant": "klondike",\n' in await w.ok(indent)
        assert '"play_per_s"' in await w.ok(bench, timeout=120)
        # On the test database, as the other commands naming a Redis run (it wrote to
        # database 0, the default, whatever SOLRACE_TEST_REDIS_URL said).
        core = core.replace(" --json ", f" --json --redis-url {REDIS_URL} ", 1)
        core_figures = json.loads(await w.ok(core, timeout=180))
        assert core_figures["benchmark"] == "core"
        assert core_figures["redis"]["sequential"]["moves"] > 0
        for solve in (SOLVER[0], SOLVER[2]):
            assert re.match(r"won moves=\d+ nodes=\d+ difficulty=\w+\n", await w.ok(solve))
        for hint in (SOLVER[1], SOLVER[3]):
            assert re.fullmatch(r"\S+\n", await w.ok(hint))


async def test_help_commands(tmp_path: Path) -> None:
    async with world(tmp_path) as (w, _):
        await w.ok("solrace --help", "Exit status")
        for command in ("rooms", "create", "join", "quick", "watch", "resume", "bot", "fetch"):
            await w.ok(f"solrace {command} --help", "--server")
        for command in ("replay", "verify", "races"):
            await w.ok(f"solrace {command} --help", f"solrace {command}")


async def test_the_screenshot_command(tmp_path: Path) -> None:
    async with world(tmp_path) as (w, _):
        target = Path("/tmp/screenshot.svg")
        target.unlink(missing_ok=True)
        try:
            await w.ok("python docs/tools/screenshot.py /tmp/screenshot.svg", timeout=120)
            assert target.read_text().lstrip().startswith("<svg")
        finally:
            target.unlink(missing_ok=True)  # the documented path: CI leaves no file behind


async def test_the_fair_counts_tool(tmp_path: Path) -> None:
    """docs/fairness.md's figures for counts shown as of a fair state come from this
    tool: on a few seeds it prints one JSON object per pairing, shares in [0, 1]."""
    async with world(tmp_path) as (w, _):
        out = await w.ok("python docs/tools/fair_counts.py --seeds 0 4", timeout=120)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [row["pairing"] for row in rows] == ["cert→greedy", "greedy→cert", "greedy→greedy"]
    for row in rows:
        assert row["deals"] >= 1 and row["ticks"] >= 1, row
        assert 0 <= row["live_share"] <= 1, row
        assert 0 <= row["foundation_short_mean"] <= row["foundation_short_max"] <= 52, row


async def test_the_certificate_length_tool(tmp_path: Path) -> None:
    """docs/fairness.md's figures for what an announced line length told come from
    this tool: per room, the ways the last cards may lie and how many each announced
    figure kept, the true one always among them."""
    command = "python docs/tools/certificate_length.py --hidden 3 --rooms 2"
    # docs/fairness.md's Russian figures: the same tool on another variant.
    russian = "python docs/tools/certificate_length.py --variant russian --hidden 3 --rooms 1"
    async with world(tmp_path) as (w, _):
        out = await w.ok(command, timeout=120)
        russian_out = await w.ok(russian, timeout=120)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(rows) == 2, out
    for row in rows:
        assert row["ways"] == 6 and row["hidden"] == 3, row
        assert row["ways"] >= row["won"] >= row["same_length"] >= row["both"] >= 1, row
        assert row["won"] >= row["near_nodes"] >= 1 and row["nodes"] >= 1, row  # the truth's
        assert row["truth_kept"] is True, row
    (row,) = [json.loads(line) for line in russian_out.splitlines() if line.startswith("{")]
    assert row["ways"] == 6 and row["ways"] >= row["won"] >= 1 and row["truth_kept"], row


async def _stop(proc: asyncio.subprocess.Process) -> int | None:
    """SIGTERM; its exit status, or None if it had to be killed after 15 s."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return None
    return proc.returncode


async def test_two_nodes_on_one_redis(tmp_path: Path) -> None:
    prefix = new_prefix("doc")
    async with world(tmp_path) as (w, _):
        w.env["SOLRACE_KEY_PREFIX"] = prefix  # the flag is not given: the variable counts
        ports = {"8765": str(free_port()), "8766": str(free_port())}
        procs = []
        try:
            for documented in (
                ".venv/bin/solrace-server --port 8765 --redis-url redis://127.0.0.1:6379/0 &",
                ".venv/bin/solrace-server --port 8766 --redis-url redis://127.0.0.1:6379/0 &",
            ):
                line = documented
                for old, new in ports.items():
                    line = line.replace(f"--port {old}", f"--port {new}")
                if REDIS_URL != "redis://127.0.0.1:6379/0":
                    line = line.replace("redis://127.0.0.1:6379/0", REDIS_URL)
                procs.append(await w.background(line))
            ann = bob = None
            deadline = time.monotonic() + 20
            while ann is None or bob is None:
                try:
                    ann = ann or await RaceClient.connect(f"ws://127.0.0.1:{ports['8765']}")
                    bob = bob or await RaceClient.connect(f"ws://127.0.0.1:{ports['8766']}")
                except OSError:
                    assert time.monotonic() < deadline, "the two nodes did not start"
                    await asyncio.sleep(0.1)
            await ann.create("yukon", "Ann")
            joined = await bob.join(ann.code or "", "Bob")  # the room, from the other node
            assert joined["room"] == ann.room
            await ann.close()
            await bob.close()
        finally:
            try:  # each node stopped (killed if it does not stop in time), then the
                # prefix deleted: a stop that failed skipped both, and left the room
                statuses = [await _stop(proc) for proc in procs]
            finally:
                await delete_prefix(prefix)
    assert statuses == [0] * len(procs)


async def test_the_terminal_client_walkthrough(tmp_path: Path) -> None:
    """README: race in two terminals, watch from a third, then the saved race."""
    async with world(tmp_path) as (w, server):
        with terminals() as opened:
            ann = Terminal(w, "solrace quick --name Ann                 # terminal 1: joins "
                           "(or opens) a quick Yukon race")  # fmt: skip
            opened.append(ann)
            await ann.expect("quick race")
            bob = Terminal(w, "solrace quick --name Bob                 # terminal 2 — or: "
                           "solrace bot --quick")  # fmt: skip
            opened.append(bob)
            await bob.expect("Ann")
            room = await wait_room(server.url, "lobby", racers=2)
            w.values["CODE"] = str(room["code"])
            cy = Terminal(w, "solrace watch CODE                       # terminal 3: the "
                          "code is on the racers' screens")  # fmt: skip
            opened.append(cy)
            await cy.expect("waiting for the race to start")
            await ann.keys(" ")
            await bob.keys(" ")
            await ann.expect("moves 0")
            await cy.expect("/52 up")
            await cy.keys("q")
            assert await cy.exits() == 0
            for racer in (ann, bob):
                await racer.keys("x", "y")
            await ann.expect("Race over")
            await bob.expect("Race over")
            for racer in (ann, bob):
                await racer.keys("q")
                assert await racer.exits() == 0
        races = await w.ok(
            "solrace races                            # after the race: the saved races"
        )
        race = re.search(r"r_[0-9a-f]{12}\.[0-9a-f]{8}", races)
        assert race, races
        w.values["RACE"] = w.values["r_2147d18c011a.3bda1e00"] = race.group(0)
        await w.ok(
            "solrace replay RACE                      # step through every racer's board (n/p/q)",
            "the deal",  # both resigned at once: step 0 of 0
            "n/Enter next",
            stdin="n\nq\n",
        )
        await w.ok(
            "solrace verify RACE                      # seed vs. commitment, every move replayed",
            "OK: the deal was committed in advance",
        )
        # docs/client.md, Replay and Verify, on the same race
        await w.ok("solrace replay r_2147d18c011a.3bda1e00             # interactive", stdin="q\n")
        # "r_2147" is an unambiguous prefix of a race id: this race's
        await w.ok(
            f"solrace replay {race.group(0)[:6]} --step 40 --racer Ann --print",
            "racer 1 Ann",
            "foundations",
        )
        await w.ok("solrace verify r_2147d18c011a.3bda1e00", "OK: the deal was committed")
        await w.ok(
            "solrace fetch RACE                       # and the file is the one the server "
            "archived",
            f"is the race {server.url} archived",
        )  # fmt: skip
        await w.ok("solrace fetch r_2147d18c011a.3bda1e00", "OK: ")


async def test_a_room_found_joined_and_watched(tmp_path: Path) -> None:
    """docs/client.md: Ann opens a room, Bob finds it and joins, Cy watches."""
    async with world(tmp_path) as (w, _):
        with terminals() as opened:
            ann = Terminal(
                w,
                "solrace create --variant klondike --option draw=3 --time-limit 10m "
                "--spectator-delay 30 --name Ann",
            )
            opened.append(ann)
            await ann.expect("Room code")
            listed = await w.ok("solrace rooms", "klondike draw=3", "10m", "30s", "Ann")
            code = re.search(r"│ ([A-Z0-9]{6}) │ klondike", listed)
            assert code, listed
            # what docs/client.md shows it prints: every line but the rooms' own rows
            shown = text_block_after("`solrace rooms` prints:")
            for line in listed.splitlines():
                if not re.match(r"│ [A-Z0-9]{6} │", line):
                    assert line.rstrip() in shown, f"docs/client.md lacks {line!r}:\n{shown}"
            w.values["kbz8cl"] = code.group(1).lower()
            w.values["KBZ8CL"] = code.group(1)
            bob = Terminal(w, "solrace join kbz8cl --name Bob")
            opened.append(bob)
            await bob.expect("press space when you are ready")
            cy = Terminal(w, "solrace watch KBZ8CL")
            opened.append(cy)
            await cy.expect("boards 30 s behind")
            await cy.keys("q")
            assert await cy.exits() == 0
            for racer in (bob, ann):
                await racer.keys("q")
                await racer.expect("Leave the room?")
                await racer.keys("y")
                assert await racer.exits() == 0


async def test_the_bots(tmp_path: Path) -> None:
    """docs/client.md, Bots: each starts and races; interrupted, each exits 130."""
    async with world(tmp_path) as (w, server):
        quick = await w.background("solrace bot --quick --variant yukon                 "
                                   "# join (or open) a quick room")  # fmt: skip
        host = await w.background("solrace bot --create --variant klondike --racers 2  "
                                  "# open a room; start it when full")  # fmt: skip
        try:
            await wait_room(server.url, "lobby", variant="yukon", quick=True)
            assert host.stdout is not None
            line = (await asyncio.wait_for(host.stdout.readline(), 20)).decode()
            code = re.search(r"room code: ([A-Z0-9]{6})", line)
            assert code, line
            w.values["K7QX2M"] = code.group(1)
            guest = await w.background(
                "solrace bot K7QX2M --strategy random --name Rnd     # join a room by code"
            )
            await wait_room(server.url, "racing", code=code.group(1))  # started when full
            for bot in (quick, host, guest):
                assert bot.returncode is None, "a bot stopped early"
                bot.send_signal(signal.SIGINT)
                assert await asyncio.wait_for(bot.wait(), 15) == 130
        finally:
            for bot in (quick, host):
                if bot.returncode is None:
                    bot.kill()
                    await bot.wait()


async def test_the_readme_example_interrupted_says_one_line(tmp_path: Path) -> None:
    """The README's ``python docs/examples/two_racers.py [URL]``, stopped with Ctrl-C
    mid-race, printed a KeyboardInterrupt traceback (after a CancelledError one)."""
    async with world(tmp_path) as (w, server):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ROOT / "docs" / "examples" / "two_racers.py"),
            server.url,
            cwd=w.cwd,
            env=w.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=signals_as_a_shell_gives,
        )
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line.startswith(b"room code: "), line
            await asyncio.sleep(0.5)  # racing (or waiting for the start)
            proc.send_signal(signal.SIGINT)
            err = (await asyncio.wait_for(proc.stderr.read(), 30)).decode()
            assert await asyncio.wait_for(proc.wait(), 30) == 130, err
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert err == "two_racers: interrupted\n", err


RUN_LINES = {
    *README_RULES,
    *SOLVER,
    "solrace --help",
    "solrace COMMAND --help",
    "python docs/tools/screenshot.py /tmp/screenshot.svg",
    ".venv/bin/solrace-server --port 8765 --redis-url redis://127.0.0.1:6379/0 &",
    ".venv/bin/solrace-server --port 8766 --redis-url redis://127.0.0.1:6379/0 &",
    "solrace quick --name Ann                 # terminal 1: joins (or opens) a quick Yukon race",
    "solrace quick --name Bob                 # terminal 2 — or: solrace bot --quick",
    "solrace watch CODE                       # terminal 3: the code is on the racers' screens",
    "solrace races                            # after the race: the saved races",
    "solrace replay RACE                      # step through every racer's board (n/p/q)",
    "solrace verify RACE                      # seed vs. commitment, every move replayed",
    "solrace replay r_2147d18c011a.3bda1e00             # interactive",
    "solrace replay r_2147 --step 40 --racer Ann --print  # one board, plain text",
    "solrace verify r_2147d18c011a.3bda1e00",
    "solrace fetch RACE                       # and the file is the one the server archived",
    "solrace fetch r_2147d18c011a.3bda1e00",
    "solrace create --variant klondike --option draw=3 --time-limit 10m "
    "--spectator-delay 30 --name Ann",
    "solrace rooms",
    "solrace join kbz8cl --name Bob",
    "solrace watch KBZ8CL",
    "solrace bot --quick --variant yukon                 # join (or open) a quick room",
    "solrace bot K7QX2M --strategy random --name Rnd     # join a room by code",
    "solrace bot --create --variant klondike --racers 2  # open a room; start it when full",
}
