"""``python -m solrace.bench rules --json [--seconds S]``"""

from __future__ import annotations

import argparse
import json
import platform
import sys


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m solrace.bench")
    parser.add_argument("suite", choices=["rules"])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    from .rules import run

    result = run(args.seconds)
    result["python"] = platform.python_version()
    result["machine"] = platform.machine()
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
