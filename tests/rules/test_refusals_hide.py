"""A refusal tells a player nothing about its face-down cards (docs/fairness.md: no
racer learns a card before turning it up in its own game).

A refused move's reason goes to the racer as the ``illegal_move`` error's message,
which the wire leak check (tests/support/race.py, ``check_no_leaks``) leaves out: a
reason names cards ("TH cannot go on 4D: same colour"). So the engine is held here to
what makes any reason safe, non-interference: two positions that differ only in
where their hidden cards lie (face-down tableau cards and, but for a thoughtful
player, the stock) — one the player cannot tell apart from the other — answer every
move of the whole notation space alike, legal or refused with the same words, and
agree on whether the player is stuck, has won, or is auto-completed. Any refusal, any
status, that read a hidden card would differ on some pair.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from solrace.rules import Board, RulesError, deal, load_position, parse_move, position_dict, view

from tests.rules.test_properties import COMBO_IDS, COMBOS

#: Deals per combination, random plays into each, and twins of each position reached.
DEALS, TWINS = 6, 3
MAX_PLAYED = 80


def notations(columns: int) -> Iterator[str]:
    """Every move the notation's forms make on a board of ``columns`` columns (and
    one past them), with runs of 1 to 21 cards and both foundation numberings."""
    yield from ("D", "R", "W>F")
    for c in range(1, columns + 2):
        yield from (f"{c}>F", f"W>{c}", f"U{c}")
        yield from (f"F{s}{n}>{c}" for s in "CDHS" for n in ("", "1", "2"))
        for d in range(1, columns + 2):
            if c != d:
                yield from (f"{c}:{k}>{d}" for k in range(1, 22))


def _hidden(card: str) -> bool:
    return card != card.upper()  # position notation: a face-down card is lower case


def twin(board: Board, rng: random.Random) -> Board:
    """``board`` with its hidden cards shuffled among their places."""
    pos: dict[str, Any] = position_dict(board)
    places = [(col, i) for col in pos["tableau"] for i, card in enumerate(col) if _hidden(card)]
    cards = [col[i] for col, i in places]
    if not board.options.thoughtful:  # a thoughtful player sees its stock
        places += [(pos["stock"], i) for i in range(len(pos["stock"]))]
        cards += pos["stock"]
    rng.shuffle(cards)
    for (where, i), card in zip(places, cards, strict=True):
        where[i] = card
    return load_position(pos)


def answers(board: Board, moves: list[str]) -> list[str | None]:
    out: list[str | None] = []
    for move in moves:
        try:
            out.append(board.refusal(parse_move(move)))
        except RulesError as exc:
            out.append(f"{type(exc).__name__}: {exc}")
    out.append(f"stuck={not board.has_legal_move()} won={board.is_won()}")
    out.append(f"auto_complete={board.can_auto_complete()}")
    return out


@pytest.mark.parametrize(("variant", "options"), COMBOS, ids=COMBO_IDS)
def test_a_refusal_reads_no_hidden_card(variant: str, options: dict[str, Any]) -> None:
    rng = random.Random(f"{variant}{sorted(options.items())}")
    differed = 0
    for seed in range(DEALS):
        board = deal(variant, rng.getrandbits(64), options)
        for _ in range(rng.randrange(MAX_PLAYED)):
            legal = board.legal_moves()
            if not legal:
                break
            board.play(rng.choice(legal))
        base = load_position(position_dict(board))
        moves = list(notations(base.columns))
        expected = answers(base, moves)
        for _ in range(TWINS):
            other = twin(base, rng)
            assert view(other, owner=True) == view(base, owner=True)
            differed += position_dict(other) != position_dict(base)
            got = answers(other, moves)
            wrong = [
                (m, a, b)
                for m, a, b in zip([*moves, "status", "auto"], expected, got, strict=True)
                if a != b
            ]
            assert not wrong, (
                f"seed {seed}: answers differ with the hidden cards moved: {wrong[:3]}"
            )
    if variant != "australian" and not options.get("thoughtful"):  # all cards face up
        assert differed, "no twin had its hidden cards elsewhere: the test proved nothing"
