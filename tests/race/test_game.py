"""RacerGame's *seen* set (what a spectator's fair view may show) against the plain
definition: the union of ``seen_cards`` over every position the game has been in.

The game brings the set up to date only after a move that turns a card up or draws
from the stock; this checks, over random games with undo in every variant and option
combination of the rules' property test, that no other move ever shows a new card.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from solrace.race import RacerGame
from solrace.rules.log import UNDO
from solrace.rules.view import seen_cards

from tests.rules.test_properties import COMBO_IDS, COMBOS


@pytest.mark.parametrize(("variant", "options"), COMBOS, ids=COMBO_IDS)
def test_seen_is_the_union_of_every_position_seen(variant: str, options: dict[str, Any]) -> None:
    for seed in range(12):
        rng = random.Random(seed)
        game = RacerGame(variant, seed, options, track_seen=True)
        expected = seen_cards(game.board)
        assert game.seen == expected
        for step in range(120):
            moves = game.board.legal_moves()
            undo = game.board.can_undo() and rng.random() < 0.15
            if not moves and not undo:
                break
            entry = UNDO if undo or not moves else str(rng.choice(moves))
            game.apply(entry, step)
            expected |= seen_cards(game.board)
            assert game.seen == expected, (variant, options, seed, step, entry)
