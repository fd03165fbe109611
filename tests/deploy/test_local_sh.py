"""deploy/local.sh: the whole script, run as an operator runs it (Redis with AOF,
three nodes, nginx, two bots racing through it to a verified end; bounded by
``timeout 300``), once on a standalone Redis and once on a Redis Cluster of three
masters (``--cluster``, issue 10's "done when"), then its help, its refusals, and that
its nginx template has exactly the placeholders it fills in."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.conftest import DEPLOY

SCRIPT = DEPLOY / "local.sh"


VENV = Path(sys.executable).parent.parent


def test_local_sh_runs_two_bots_through_nginx_to_a_verified_race() -> None:
    done = subprocess.run(
        ["timeout", "--kill-after=30", "300", "bash", str(SCRIPT), "--venv", str(VENV)],
        capture_output=True,
        text=True,
        timeout=360,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert out.count("(durability: aof-always)") == 3  # three nodes on the AOF Redis
    assert "AOF: always" in out
    assert "OK: the deal was committed in advance and every move is legal" in out
    assert re.search(r"local: race over: \S+ verified", out)
    assert len(re.findall(r"^ +1 upstream=127\.0\.0\.1:\d+$", out, re.M)) >= 1
    # Nothing left behind: the scratch directory is gone.
    work = re.search(r"(/\S+/solrace-local\.\w+)/", out)
    assert work is not None and not Path(work.group(1)).exists()


def test_local_sh_cluster_races_through_nginx_on_three_redis_masters() -> None:
    done = subprocess.run(
        [
            "timeout",
            "--kill-after=30",
            "300",
            "bash",
            str(SCRIPT),
            "--cluster",
            "--venv",
            str(VENV),
        ],
        capture_output=True,
        text=True,
        timeout=360,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    cluster = re.search(
        r"cluster of 3 masters (\d+) (\d+) (\d+) \(cluster_state:ok, AOF: always\)", out
    )
    assert cluster is not None, out[:2000]
    assert out.count("(durability: aof-always)") == 3  # every master keeps the promise
    assert "OK: the deal was committed in advance and every move is legal" in out
    assert re.search(r"local: race over: \S+ verified", out)
    # Nothing left behind: no Redis answers on the cluster's ports, no scratch directory.
    for port in cluster.groups():
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()
    work = re.search(r"(/\S+/solrace-local\.\w+)/", out)
    assert work is not None and not Path(work.group(1)).exists()


def test_local_sh_kept_running_names_its_port_and_stops_at_once_on_sigterm() -> None:
    """``--keep-running``, as an operator tries it: behind its nginx a browser is told
    the URL to race on with the balancer's port (it said ``ws://127.0.0.1``: nginx
    passed ``$host``, no port), and a SIGTERM — a supervisor's, ``kill``'s — stops
    everything at once, status 143: it waited for a foreground ``sleep 3600`` first
    (bash runs a trap only once the foreground command ends; an operator's audit)."""
    script = subprocess.Popen(
        ["bash", str(SCRIPT), "--nodes", "1", "--keep-running", "--venv", str(VENV)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: killed whole if the test fails
    )
    assert script.stdout is not None
    out = ""
    try:
        while "still running:" not in out:
            line = script.stdout.readline()
            assert line, out[-3000:]  # the script ended before it kept running
            out += line
        url = re.search(r"still running: solrace quick --server (ws://127\.0\.0\.1:\d+)", out)
        assert url is not None, out[-3000:]
        port = int(url.group(1).rpartition(":")[2])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as browser:
            browser.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            answer = browser.recv(65536).decode(errors="replace")
        assert f"solrace quick --server {url.group(1)} " in answer, answer
        script.terminate()
        assert script.wait(timeout=30) == 143
        assert _alive_in_group(script.pid) == []  # nothing of it left (its sleep)
    finally:
        if script.poll() is None:  # what it started too: nothing left behind
            os.killpg(script.pid, signal.SIGKILL)
            script.wait()
            left = re.search(r"(/\S+/solrace-local\.\w+)/", out)
            if left is not None:
                shutil.rmtree(left.group(1), ignore_errors=True)
    work = re.search(r"(/\S+/solrace-local\.\w+)/", out)
    assert work is not None and not Path(work.group(1)).exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def _alive_in_group(group: int) -> list[str]:
    """The command lines of the processes of process group ``group`` still running
    (a zombie is not: nothing runs, and a container's first process may never reap
    what was reparented to it)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:  # gone meanwhile
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            alive.append(command.decode(errors="replace"))
    return alive


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=30)


def test_help_says_what_it_starts_and_its_options() -> None:
    done = _run("--help")
    assert done.returncode == 0
    for words in ("--nodes N", "--cluster", "--venv DIR", "--keep-running", "127.0.0.1"):
        assert words in done.stdout
    assert "apt-get" in done.stdout and "set -euo" not in done.stdout


def test_bad_arguments_are_refused_before_anything_starts() -> None:
    assert _run("--nodes", "0").returncode == 2
    assert _run("--bogus").returncode == 2
    done = _run("--venv", "/nonexistent-venv")
    assert done.returncode == 2 and "missing" in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--nodes"], "local.sh: --nodes needs a value (see --help)\n"),
        (["--cluster", "--venv"], "local.sh: --venv needs a value (see --help)\n"),
        # empty (an unset variable's ''): it looked for /bin/python, and said that was
        # missing, or went on to /bin/solrace-server
        (
            ["--venv", ""],
            "local.sh: --venv needs a directory, not an empty value (see --help)\n",
        ),
        (["--nodes", "00"], "local.sh: --nodes must be a whole number, 1 to 32, not '00'\n"),
        (["--nodes", "-1"], "local.sh: --nodes must be a whole number, 1 to 32, not '-1'\n"),
        (["--nodes", "33"], "local.sh: --nodes must be a whole number, 1 to 32, not '33'\n"),
        (
            ["--nodes", "99999999999999999999999"],
            "local.sh: --nodes must be a whole number, 1 to 32, not '99999999999999999999999'\n",
        ),
    ],
)
def test_a_missing_or_unusable_value_is_one_line_and_status_2(args: list[str], says: str) -> None:
    """A newcomer audit: ``--nodes`` or ``--venv`` typed last said ``$2: unbound
    variable`` (bash's words, status 1); ``--nodes 00`` started no node at all behind
    nginx, and ``--nodes 99999999999999999999999`` started Redis and went on starting
    nodes until it was stopped."""
    done = _run(*args)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", says)


@pytest.mark.parametrize(
    "args",
    [
        # a venv that is not there: before the refusal, the script stopped at it, and
        # no test of this can start a stack whatever the script does with the flags
        ["--venv", "/nonexistent-venv", "--nodes", "2", "--nodes", "5"],
        ["--nodes", "2", "--venv", "/nonexistent-venv", "--nodes", "2"],
        ["--venv", "/nonexistent-venv", "--venv", "/nonexistent-other"],
    ],
)
def test_a_flag_given_twice_is_refused_in_one_line(args: list[str]) -> None:
    """``--nodes 2 --nodes 5`` started five nodes without a word: which one was meant
    is not known (a line edited, an alias with its own ``--nodes``). Refused as every
    other bad argument is, one line and status 2, before anything starts."""
    flag = next(a for a in args if args.count(a) > 1 and a.startswith("--"))
    done = _run(*args)
    says = f"local.sh: {flag} given twice: give it once (see --help)\n"
    assert (done.returncode, done.stdout, done.stderr) == (2, "", says)


def test_help_names_every_exit_status() -> None:
    """The help said ``0 the race ended and verified, 1 otherwise``: a bad argument is
    2, and Ctrl-C and SIGTERM end it with 130 and 143 (its traps)."""
    text = " ".join(_run("--help").stdout.split())
    for said in ("2 a bad argument", "130 interrupted (Ctrl-C)", "143 terminated (SIGTERM)"):
        assert said in text


def test_the_template_has_the_placeholders_the_script_fills_and_listens_on_loopback() -> None:
    template = (DEPLOY / "nginx" / "local.conf.template").read_text()
    assert set(re.findall(r"@([A-Z_]+)@", template)) == {"WORK", "LB_PORT", "UPSTREAM"}
    assert re.findall(r"^\s*listen\s+(\S+);", template, re.M) == ["127.0.0.1:@LB_PORT@"]
    # the Host with its port: a node's answer to a browser names the URL from it
    assert re.findall(r"proxy_set_header Host (\S+);", template) == ["$http_host"]
    script = SCRIPT.read_text()
    assert 'for name in ("UPSTREAM", "WORK", "LB_PORT")' in script
    assert "trap cleanup EXIT" in script


@pytest.mark.parametrize(
    ("env", "args", "says"),
    [
        ("abc", [], "local.sh: SOLRACE_LOCAL_NODES must be a whole number, 1 to 32, not 'abc'\n"),
        ("0", [], "local.sh: SOLRACE_LOCAL_NODES must be a whole number, 1 to 32, not '0'\n"),
        # --nodes, given, is what was refused (and the variable is not looked at)
        ("abc", ["--nodes", "0"], "local.sh: --nodes must be a whole number, 1 to 32, not '0'\n"),
        (
            "9" * 100_000,
            [],
            "local.sh: SOLRACE_LOCAL_NODES must be a whole number, 1 to 32, not "
            f"'{'9' * 40}'… (100,000 characters)\n",
        ),
    ],
)
def test_a_bad_nodes_variable_is_named_as_the_variable(
    env: str, args: list[str], says: str
) -> None:
    """A newcomer audit: ``SOLRACE_LOCAL_NODES=abc bash deploy/local.sh`` was refused as
    ``--nodes must be …``, a flag nobody typed. And a value is quoted at most in its
    first 40 characters (solrace.quoting.MAX_QUOTED), as every command line does."""
    done = subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "SOLRACE_LOCAL_NODES": env},
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, "", says)
