"""The optional compiled accelerator: the search core compiled with mypyc.

``python -m solrace.solver.accel build`` compiles ``faces.py``, ``deadlock.py`` and
``search.py`` — the very same source files, unchanged — with mypyc (installed with
mypy) into C extension modules in ``solrace/solver/_compiled/`` (or the directory
``$SOLRACE_SOLVER_COMPILED`` names). When that directory holds a build of the current
sources, ``import solrace.solver`` puts it first on the package's search path, so the
three modules load compiled; else, or with ``SOLRACE_SOLVER_PURE=1``, they load as
plain Python. ``solve.py`` (the API and the engine replay) always stays Python.

Why it gives identical answers: it is the same code. mypyc compiles the typed Python
as written (mypy --strict clean), with Python's semantics for integers, bytes, lists,
dicts and sets; the search reads no clock and draws its random orders from seeded
generators in ``solve.py``, so a solve visits the same positions in the same order
and returns the same outcome, line and node count. tests/solver/test_accel.py builds
the accelerator and compares the two on deals of every variant. A build is used only
if its stamp (a hash of the three sources) matches the sources on disk, so an edited
source never runs against a stale build.

What it buys: a node costs about 2.2 times less (Yukon, the deadlock test and the
move generator; docs/winnability.md). The node budgets are unchanged, so every
answer is the same; only the time is shorter.

This module reads files (the stamp at import, the sources to build); the three
modules it compiles stay pure.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from ._accel_path import HERE, MODULES, STAMP, compiled_dir, source_stamp

__all__ = ["accelerated", "build", "compiled_dir", "main", "source_stamp"]


def accelerated() -> bool:
    """Whether the search core running in this process is the compiled one."""
    from . import search

    return not str(search.__file__).endswith(".py")


def build(target: Path | None = None) -> Path:
    """Compile the search core with mypyc into ``target`` (default
    :func:`compiled_dir`), replacing what was there. Needs mypy (mypyc) and a C
    compiler; takes about 15 s."""
    from mypyc.build import mypycify  # only here: the solver itself never needs mypyc
    from setuptools import setup

    target = target or compiled_dir()
    stamp = source_stamp()
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / "solrace" / "solver"
        pkg.mkdir(parents=True)
        (pkg.parent / "__init__.py").write_text("")
        (pkg / "__init__.py").write_text("")
        for name in MODULES:
            shutil.copy(HERE / f"{name}.py", pkg / f"{name}.py")
        cwd = Path.cwd()
        os.chdir(tmp)
        try:
            setup(
                name="solrace-solver-accel",
                ext_modules=mypycify(
                    [f"solrace/solver/{name}.py" for name in MODULES],
                    opt_level="3",
                    group_name="solrace.solver.accel",
                ),
                script_args=["-q", "build_ext", "--inplace"],
            )
        finally:
            os.chdir(cwd)
        built = sorted(pkg.glob("*.so")) + sorted(pkg.glob("*.pyd"))
        if not built:
            raise RuntimeError("mypyc produced no extension module")
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for path in built:
            shutil.copy(path, target / path.name)
        (target / STAMP).write_text(stamp + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["build"]:
        print(f"built {build()}")
        return 0
    if args == ["clean"]:
        shutil.rmtree(compiled_dir(), ignore_errors=True)
        return 0
    if args == ["status"]:
        print("compiled" if accelerated() else "pure Python")
        return 0
    print("usage: python -m solrace.solver.accel build|clean|status", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
