"""A Ctrl-C typed while a program's modules load, for the entry points' tests: each
must then say one line and exit 130, not print a traceback."""

from __future__ import annotations

import textwrap


def interrupted_while_loading(entry: str) -> str:
    """A ``python -c`` script that runs ``<entry>.main(sys.argv[2:])`` and sends
    itself SIGINT from inside the import of the module named by ``sys.argv[1]``."""
    return textwrap.dedent(
        f"""
        import os, signal, sys
        from importlib.abc import MetaPathFinder

        class CtrlC(MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == sys.argv[1]:
                    os.kill(os.getpid(), signal.SIGINT)
                return None

        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.meta_path.insert(0, CtrlC())
        from {entry} import main
        sys.exit(main(sys.argv[2:]))
        """
    )
