"""Write ``tests/data/deals.json``: the golden deal vectors of docs/deals.md.

Run from the repository root::

    .venv/bin/python tests/data/make_deals.py

For every variant and the seeds 0, 1, 42, 2**63 and 2**64-1 it records the first
SplitMix64 outputs, the shuffled card order (``shuffled_deck(seed, decks)``) as card ids
and as names like ``7H``, and the dealt position (``position_dict(deal(variant, seed))``).
The vectors pin the shuffle forever: ``tests/rules/test_deal_vectors.py`` checks that the
engine still reproduces them and re-derives the card orders with a second, independent
implementation of docs/deals.md. Regenerate only when the deal specification changes on
purpose (it should never change: racers' saved seeds would deal differently).
"""

from __future__ import annotations

import json
import sys
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "server"))

from solrace.rules import VARIANTS, deal, position_dict, shuffled_deck, splitmix64  # noqa: E402
from solrace.rules.cards import NAMES  # noqa: E402

OUT = Path(__file__).resolve().parent / "deals.json"
SEEDS = [0, 1, 42, 2**63, 2**64 - 1]


def vectors() -> dict[str, object]:
    entries = []
    for variant in VARIANTS:
        decks = VARIANTS[variant].decks
        for seed in SEEDS:
            order = shuffled_deck(seed, decks)
            entries.append(
                {
                    "variant": variant,
                    "seed": str(seed),
                    "decks": decks,
                    "splitmix64": [f"0x{x:016x}" for x in islice(splitmix64(seed), 4)],
                    "order": [NAMES[c % 52] for c in order],
                    "ids": order,
                    "position": position_dict(deal(variant, seed)),
                }
            )
    return {
        "spec": "docs/deals.md",
        "note": "seeds are decimal strings (they exceed 2**53); ids are card numbers "
        "(deck i // 52, suit (i % 52) // 13 in C D H S, rank i % 13 + 1); order[0] is the "
        "first card dealt",
        "entries": entries,
    }


def dumps(data: dict[str, object]) -> str:
    """JSON with one line per field of an entry (compact, and readable in a diff)."""

    def compact(value: object) -> str:
        return json.dumps(value, ensure_ascii=False)

    entries = data["entries"]
    assert isinstance(entries, list)
    head = [f" {compact(k)}: {compact(v)}," for k, v in data.items() if k != "entries"]
    body = []
    for entry in entries:
        fields = [f"   {compact(k)}: {compact(v)}" for k, v in entry.items()]
        body.append("  {\n" + ",\n".join(fields) + "\n  }")
    return "{\n" + "\n".join(head) + '\n "entries": [\n' + ",\n".join(body) + "\n ]\n}\n"


def main() -> None:
    data = vectors()
    text = dumps(data)
    assert json.loads(text) == data
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({len(text)} bytes)")


if __name__ == "__main__":
    main()
