"""deploy/local.sh's own checks (CI runs the whole script after the tests: .ci/run).
Here: its help, its refusals, and that its nginx template has exactly the
placeholders it fills in."""

from __future__ import annotations

import re
import subprocess

from tests.deploy.conftest import DEPLOY

SCRIPT = DEPLOY / "local.sh"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=30)


def test_help_says_what_it_starts_and_its_options() -> None:
    done = _run("--help")
    assert done.returncode == 0
    for words in ("--nodes N", "--venv DIR", "--keep-running", "127.0.0.1", "apt-get"):
        assert words in done.stdout
    assert "set -euo" not in done.stdout


def test_bad_arguments_are_refused_before_anything_starts() -> None:
    assert _run("--nodes", "0").returncode == 2
    assert _run("--bogus").returncode == 2
    done = _run("--venv", "/nonexistent-venv")
    assert done.returncode == 2 and "missing" in done.stderr


def test_the_template_has_the_placeholders_the_script_fills_and_listens_on_loopback() -> None:
    template = (DEPLOY / "nginx" / "local.conf.template").read_text()
    assert set(re.findall(r"@([A-Z_]+)@", template)) == {"WORK", "LB_PORT", "UPSTREAM"}
    assert re.findall(r"^\s*listen\s+(\S+);", template, re.M) == ["127.0.0.1:@LB_PORT@"]
    script = SCRIPT.read_text()
    assert 'for name in ("UPSTREAM", "WORK", "LB_PORT")' in script
    assert "trap cleanup EXIT" in script
