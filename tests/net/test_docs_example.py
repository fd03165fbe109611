"""The README's two-racer snippet is docs/examples/two_racers.py, word for word, and it
runs to the standings against ``solrace-server`` as a user starts it: the installed
console script with its default settings — the default rate limit (20 messages/s,
bursts of 40) included, which is what a fast client trips over — on both stores."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.support.fake_server import FakeRace, fake_server
from tests.support.server_process import solrace_server

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "two_racers.py"


def _read(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return bytes(answer.read())


def readme_python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)


def test_the_readme_snippet_is_the_example_file() -> None:
    assert readme_python_blocks() == [EXAMPLE.read_text()]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ws://127.0.0.1:{port}", "cannot reach ws://127.0.0.1:{port}: connection refused"),
        ("bogus", "bad server URL 'bogus': it must start with ws:// or wss://"),
        ("ws://127.0.0.1:abc", "bad server URL 'ws://127.0.0.1:abc': its port 'abc' is not"),
    ],
)
def test_the_example_without_a_server_says_so_in_one_line(url: str, says: str) -> None:
    """It printed a ConnectionRefusedError (or InvalidURI) traceback."""
    port = _closed_port()
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), url.format(port=port)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [done.stderr.strip()], done.stderr
    assert done.stderr.startswith("two_racers: " + says.format(port=port)), done.stderr


async def test_the_example_refused_by_the_server_says_so_in_one_line() -> None:
    """A newcomer audit: a request the server refuses outside the race (``create``
    past the address's rooms a minute, or a ``start`` answered ``not_ready`` while the
    deal is certified on a busy machine) ended the example with a ServerError
    traceback; now one line and status 1, as when there is no server."""
    refusal = {"code": "too_many_rooms", "message": "too many rooms", "retry_after_ms": 5000}
    async with fake_server(FakeRace(create_error=refusal)) as url:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(EXAMPLE),
            url,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    said = err.decode()
    assert proc.returncode == 1 and out == b"" and "Traceback" not in said, said
    assert said.splitlines() == ["two_racers: too_many_rooms: too many rooms"], said


@pytest.mark.parametrize("backend", ["embedded", "redis", "cluster"])
async def test_two_racers_example_runs_to_standings_on_a_default_server(backend: str) -> None:
    async with solrace_server(backend) as server:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(EXAMPLE),
            server.url,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err.decode() + server.log
        assert "rate limited" not in server.log
        health = server.url.replace("ws://", "http://") + "/healthz?format=json"
        report = json.loads(await asyncio.to_thread(_read, health))
        kinds = {"embedded": "embedded", "redis": "redis", "cluster": "redis-cluster"}
        assert report["store"] == kinds[backend]  # /healthz names what the node runs on
    text = out.decode()
    assert re.search(r"^room code: [A-Z0-9]{6}$", text, re.M)
    places = re.findall(r"^([12]) (Ann|Bob) (\w+) (\d+) cards up$", text, re.M)
    assert sorted(p[0] for p in places) == ["1", "2"]  # one standings line per racer
    assert {p[1] for p in places} == {"Ann", "Bob"}
    assert re.search(r"^seed \d+ commitment [0-9a-f]{64}$", text, re.M)
