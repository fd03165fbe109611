"""Packaging and CI hygiene: the build metadata setuptools accepts without deprecation
warnings, and a CI run that leaves nothing behind in the temporary directory."""

from __future__ import annotations

import os
import re
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from solrace_client.entry import CLIENT_EXTRA_MODULES

from tests.support.redis import CLUSTER_URL

ROOT = Path(__file__).parents[1]

#: A stand-in for python3 that makes a "virtual environment" whose every tool succeeds
#: (pytest exits $FAKE_RC), so .ci/run's own logic runs in a second, without installing.
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1 $2" = "-m venv" ]; then
    mkdir -p "$3/bin"
    printf '%s\\n' '#!/usr/bin/env bash' \\
        'case "$*" in *--collect-only*) if [ -n "${FAKE_WARM_PID:-}" ]; then' \\
        '    echo $$ > "$FAKE_WARM_PID"; exec sleep 30; fi;; esac' \\
        'case "$*" in *pytest*) exit "${FAKE_RC:-0}";; esac' \\
        'p="${FAKE_REDIS_PID:-}"' \\
        'if [ "$*" = "-" ] && [ -n "$p" ] && [ ! -s "$p" ]; then exit 1; fi' \\
        'cat >/dev/null; exit 0' \\
        > "$3/bin/python"
    printf '%s\\n' '#!/usr/bin/env bash' 'exit 0' > "$3/bin/ruff"
    printf '%s\\n' '#!/usr/bin/env bash' \\
        'if [ -n "${FAKE_MYPY_RC:-}" ]; then sleep 1; exit "$FAKE_MYPY_RC"; fi' > "$3/bin/mypy"
    chmod +x "$3/bin/python" "$3/bin/ruff" "$3/bin/mypy"
    head -c 1048576 /dev/zero > "$3/bin/bulk"   # something to leave behind
    exit 0
fi
exit 1
"""

#: A stand-in for redis-server: a process that stays up until it is stopped, its pid
#: written where ``--pidfile`` says and in $FAKE_REDIS_PID (which the fake python above
#: reads as "Redis answers").
FAKE_REDIS_SERVER = """#!/usr/bin/env bash
while [ $# -gt 0 ]; do [ "$1" = "--pidfile" ] && pidfile="$2"; shift; done
sleep 300 >/dev/null 2>&1 &
echo $! > "$pidfile"
echo $! > "$FAKE_REDIS_PID"
"""


def test_license_is_an_spdx_string_that_the_build_backend_supports() -> None:
    """A TOML-table license makes setuptools ≥ 77 print a deprecation warning three
    times per build; an SPDX string needs setuptools ≥ 77 in the build requirements."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"
    requires = project["build-system"]["requires"]
    setuptools = next(r for r in requires if r.startswith("setuptools"))
    match = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", setuptools)
    assert match is not None and int(match.group(1)) >= 77


def _run_ci(
    tmp_path: Path, rc: int, redis_pid: Path | None = None, **more_env: str
) -> subprocess.CompletedProcess[str]:
    """.ci/run with stand-ins; ``redis_pid``: no Redis answers until the run starts
    one (a stand-in whose pid is written there)."""
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir(exist_ok=True)
    for name, text in (("python3", FAKE_PYTHON), ("redis-server", FAKE_REDIS_SERVER)):
        (fake_bin / name).write_text(text)
        (fake_bin / name).chmod(0o755)
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(scratch),
        "FAKE_RC": str(rc),
        # the cluster the tests already use: the fake run must not start another on
        # its ports (tests/deploy/test_redis_cluster_sh.py runs that script)
        "SOLRACE_TEST_CLUSTER_URL": CLUSTER_URL,
        "FAKE_REDIS_PID": str(redis_pid or ""),
        **more_env,
    }
    return subprocess.run(
        ["bash", str(ROOT / ".ci" / "run")],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_ci_removes_its_virtual_environment_on_success_and_on_failure(tmp_path: Path) -> None:
    passed = _run_ci(tmp_path, 0)
    assert passed.returncode == 0, passed.stderr
    assert list((tmp_path / "tmp").iterdir()) == []
    failed = _run_ci(tmp_path, 3)
    assert failed.returncode == 3
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("rc", [0, 3])
def test_ci_stops_the_redis_it_started(tmp_path: Path, rc: int) -> None:
    """A newcomer audit: on a machine with no Redis, .ci/run started one on 6379 and
    left it running after the run, passed or failed."""
    redis_pid = tmp_path / "redis.pid"
    redis_pid.touch()
    done = _run_ci(tmp_path, rc, redis_pid)
    assert done.returncode == rc, done.stderr
    assert "ci: starting redis-server" in done.stdout, done.stdout
    _gone(int(redis_pid.read_text()), "the Redis the run started")
    assert list((tmp_path / "tmp").iterdir()) == []


def test_ci_stops_its_warming_collection_when_mypy_fails(tmp_path: Path) -> None:
    """The collection that warms pytest's cache runs in the background while mypy
    runs: a mypy failure ends the run (set -e), and the collection must not outlive it
    (writing into the clone, its virtual environment removed under it)."""
    warm_pid = tmp_path / "warm.pid"
    done = _run_ci(tmp_path, 0, FAKE_WARM_PID=str(warm_pid), FAKE_MYPY_RC="1")
    assert done.returncode == 1, done.stderr
    _gone(int(warm_pid.read_text()), "the warming collection")


def _gone(pid: int, what: str) -> None:
    """Fail, killing it, if process ``pid`` (``what`` the run started) still runs 5 s
    after the run ended: the run's exit stops it at once."""
    for _ in range(50):
        if not Path(f"/proc/{pid}").exists() or "Z" in _state(pid):
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    raise AssertionError(f"{what} is still running after the run")


def _state(pid: int) -> str:
    """The process's state letter (``Z``: a zombie, stopped but not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "Z"


def test_the_client_extra_is_what_the_command_line_checks_for() -> None:
    """``solrace`` without the ``client`` extra says so in one line (entry.py) for the
    modules it names: they are the extra's, one list kept in step with pyproject.toml
    (a review: three copies)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extra = pyproject["project"]["optional-dependencies"]["client"]
    assert {re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower() for req in extra} == set(
        CLIENT_EXTRA_MODULES
    )
