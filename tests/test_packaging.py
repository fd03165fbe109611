"""Packaging and CI hygiene: the build metadata setuptools accepts without deprecation
warnings, and a CI run that leaves nothing behind in the temporary directory."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

from tests.support.redis import CLUSTER_URL

ROOT = Path(__file__).parents[1]

#: A stand-in for python3 that makes a "virtual environment" whose every tool succeeds
#: (pytest exits $FAKE_RC), so .ci/run's own logic runs in a second, without installing.
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1 $2" = "-m venv" ]; then
    mkdir -p "$3/bin"
    printf '%s\\n' '#!/usr/bin/env bash' \\
        'case "$*" in *pytest*) exit "${FAKE_RC:-0}";; esac' 'cat >/dev/null; exit 0' \\
        > "$3/bin/python"
    printf '%s\\n' '#!/usr/bin/env bash' 'exit 0' > "$3/bin/ruff"
    cp "$3/bin/ruff" "$3/bin/mypy"
    chmod +x "$3/bin/python" "$3/bin/ruff" "$3/bin/mypy"
    head -c 1048576 /dev/zero > "$3/bin/bulk"   # something to leave behind
    exit 0
fi
exit 1
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


def _run_ci(tmp_path: Path, rc: int) -> subprocess.CompletedProcess[str]:
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir(exist_ok=True)
    python3 = fake_bin / "python3"
    python3.write_text(FAKE_PYTHON)
    python3.chmod(0o755)
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
