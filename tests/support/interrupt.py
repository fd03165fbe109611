"""A Ctrl-C typed while a program's modules load, for the entry points' tests: each
must then say one line and exit 130, not print a traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

#: The scripts' first lines: SIGINT from inside the import of the module named by
#: ``sys.argv[1]`` (taken off ``sys.argv``: what follows is the program's arguments).
_CTRL_C_IN_AN_IMPORT = textwrap.dedent(
    """
    import os, signal, sys
    from importlib.abc import MetaPathFinder

    INTERRUPTED = sys.argv.pop(1)

    class CtrlC(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == INTERRUPTED:
                os.kill(os.getpid(), signal.SIGINT)
            return None

    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.meta_path.insert(0, CtrlC())
    """
)


def interrupted_while_loading(entry: str) -> str:
    """A ``python -c`` script that runs ``<entry>.main(sys.argv[2:])`` and sends
    itself SIGINT from inside the import of the module named by ``sys.argv[1]``."""
    return _CTRL_C_IN_AN_IMPORT + textwrap.dedent(
        f"""
        from {entry} import main
        sys.exit(main(sys.argv[1:]))
        """
    )


def interrupted_while_running(package: str) -> str:
    """A ``python -c`` script that runs ``python -m <package> sys.argv[2:]`` (as ``-m``
    does: its ``__main__`` module as the main program, after the package) and sends
    itself SIGINT from inside the import of the module named by ``sys.argv[1]``."""
    return _CTRL_C_IN_AN_IMPORT + textwrap.dedent(
        f"""
        import runpy
        runpy.run_module({package!r}, run_name="__main__", alter_sys=True)
        """
    )


def _console_script_module(name: str) -> str:
    """The module the installed console script ``name`` imports ``main`` from: what
    it loads before ``main`` runs is outside main's Ctrl-C handling."""
    (script,) = entry_points(group="console_scripts", name=name)
    return script.module


def console_script_interrupted(
    name: str, module: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """The installed console script ``name`` run with ``args`` (its ``main``, from the
    module the script imports it from), SIGINT sent from inside the import of
    ``module``."""
    script = interrupted_while_loading(_console_script_module(name))
    return subprocess.run(
        [sys.executable, "-c", script, module, *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
