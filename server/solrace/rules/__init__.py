"""The rules engine: every variant of docs/rules.md, pure and synchronous (no I/O, no
clock, no global randomness; standard library only).

    >>> from solrace.rules import deal
    >>> board = deal("yukon", 42)
    >>> move = board.legal_moves()[0]
    >>> _ = board.play(move)
"""

from .board import PLAYING, STUCK, WON, Board
from .deal import deal, shuffled_deck, splitmix64
from .errors import (
    IllegalMoveError,
    InvalidOptionError,
    InvalidPositionError,
    NotationError,
    RulesError,
    UnknownVariantError,
)
from .log import replay
from .moves import Move, parse_move
from .options import Options
from .perft import divide, perft
from .position import dump_position, load_position, position_dict
from .variants import VARIANTS, new_board, variant_class
from .view import hidden_faces, view

__all__ = [
    "PLAYING",
    "STUCK",
    "VARIANTS",
    "WON",
    "Board",
    "IllegalMoveError",
    "InvalidOptionError",
    "InvalidPositionError",
    "Move",
    "NotationError",
    "Options",
    "RulesError",
    "UnknownVariantError",
    "deal",
    "divide",
    "dump_position",
    "hidden_faces",
    "load_position",
    "new_board",
    "parse_move",
    "perft",
    "position_dict",
    "replay",
    "shuffled_deck",
    "splitmix64",
    "variant_class",
    "view",
]
