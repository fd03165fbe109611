"""``python -m solrace.bench rules|store --json``"""

from __future__ import annotations

import argparse
import json
import platform
import sys


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m solrace.bench")
    parser.add_argument("suite", choices=["rules", "store"])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seconds", type=float, default=4.0, help="rules: time budget")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0", help="store")
    args = parser.parse_args()
    if args.suite == "rules":
        from .rules import run

        result = run(args.seconds)
    else:
        from .store import run as run_store

        result = run_store(args.redis_url)
    result["python"] = platform.python_version()
    result["machine"] = platform.machine()
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
