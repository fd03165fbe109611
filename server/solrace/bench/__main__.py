"""``python -m solrace.bench rules|store|solver|server --json``"""

from __future__ import annotations

import argparse
import json
import platform
import sys

from solrace.net.main import AUTO, LOOPS, LoopUnavailable, resolve_loop


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m solrace.bench")
    parser.add_argument("suite", choices=["rules", "store", "solver", "server"])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="rules: time budget (default 4); server: measured window (default 20)",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0", help="store")
    parser.add_argument(
        "--variant",
        action="append",
        default=None,
        help="solver: a preset (repeatable): yukon, russian, alaska, australian, double_yukon,"
        " klondike, klondike-draw3, klondike-draw3-solvitaire, klondike-draw3-thoughtful",
    )
    parser.add_argument("--deals", type=int, default=200, help="solver: deals per preset")
    parser.add_argument("--budget", type=int, default=100_000, help="solver: node budget")
    parser.add_argument("--workers", type=int, default=None, help="solver: processes")
    parser.add_argument("--start", type=int, default=0, help="solver: first seed")
    parser.add_argument("--certify", type=int, default=200, help="solver: certify walks")
    parser.add_argument("--certify-budget", type=int, default=None, help="solver")
    parser.add_argument("--log", default=None, help="solver: progress log file")
    parser.add_argument("--racers", type=int, default=200, help="server: racers (rooms of 4)")
    parser.add_argument("--rate", type=float, default=5.0, help="server: moves/s per racer")
    parser.add_argument(
        "--warmup", type=float, default=3.0, help="server: seconds before measuring"
    )
    parser.add_argument(
        "--find-max", action="store_true", help="server: step the load up for max_moves_per_s"
    )
    parser.add_argument(
        "--aligned",
        action="store_true",
        help="server: every racer sends at the same instants (bursts), not at a random phase",
    )
    parser.add_argument(
        "--loop",
        choices=LOOPS,
        default=AUTO,
        help="server: event loop of the echo, the node and the load (auto: uvloop if installed)",
    )
    args = parser.parse_args()
    if args.suite == "server":
        try:
            resolve_loop(args.loop)
        except LoopUnavailable as exc:
            parser.error(f"--loop: {exc}")
    if args.suite == "solver":
        from .solver import DEFAULT_PRESETS, PRESETS
        from .solver import run as run_solver

        presets = args.variant or list(DEFAULT_PRESETS)
        unknown = [p for p in presets if p not in PRESETS]
        if unknown:
            parser.error(f"unknown preset(s): {', '.join(unknown)}")
        log = open(args.log, "a", encoding="utf-8") if args.log else None  # noqa: SIM115
        try:
            result = run_solver(
                presets,
                deals=args.deals,
                budget=args.budget,
                workers=args.workers,
                start=args.start,
                certify=args.certify,
                certify_budget=args.certify_budget,
                log=log,
            )
        finally:
            if log is not None:
                log.close()
    elif args.suite == "rules":
        from .rules import run

        result = run(4.0 if args.seconds is None else args.seconds)
    elif args.suite == "server":
        from .server import run as run_server

        result = run_server(
            args.redis_url,
            racers=args.racers,
            rate=args.rate,
            seconds=20.0 if args.seconds is None else args.seconds,
            warmup=args.warmup,
            find_max=args.find_max,
            aligned=args.aligned,
            loop=args.loop,
        )
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
