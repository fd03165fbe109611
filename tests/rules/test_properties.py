"""Property tests over random games of every variant and several option combinations.

Each example deals a random seed and plays up to 60 random entries (legal moves, and
"undo" where allowed), checking at every step:

- every card exactly once (each face twice in Double Yukon), by id and by name;
- every generated move is distinct, canonical, passes ``refusal`` and plays with the
  checked ``play``; ``pop`` restores ``snapshot()`` and ``position_dict`` exactly;
- random other notations from the grammar (``c:k>d``, ``c>F``, ``W>d``, ``W>F``,
  ``Fs>d``/``Fsn>d``, ``D``, ``R``, ``Uc``) that are not legal are refused with
  IllegalMoveError and leave the board unchanged; every few steps the whole notation
  space is enumerated and the moves ``refusal`` accepts must be exactly the legal list;
- ``undo`` restores the snapshot from before the move it takes back;
- views never show a face-down tableau card or (except a thoughtful owner's) a stock
  card, and hold card names only, never ids (checked against an independent hidden set,
  and with copies counted for two decks);
- the position JSON round-trips; status, win, stuck and ``has_legal_move`` agree with
  the move list;
- at the end, ``replay`` of the log rebuilds the same ``snapshot()``.

A second property builds random auto-completable positions and checks that auto-complete
wins by legal moves only.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from itertools import chain
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from solrace.rules import (
    STUCK,
    WON,
    Board,
    IllegalMoveError,
    deal,
    hidden_faces,
    load_position,
    parse_move,
    position_dict,
    replay,
    view,
)
from solrace.rules.log import UNDO

RANKS = "A23456789TJQK"
SUITS = "CDHS"
FACES = [r + s for s in SUITS for r in RANKS]

COMBOS: list[tuple[str, dict[str, Any]]] = [
    ("yukon", {}),
    ("yukon", {"auto_flip": False, "foundation_to_tableau": True}),
    ("yukon", {"scoring": "vegas", "undo": False, "auto_complete": False}),
    ("klondike", {}),
    ("klondike", {"draw": 3}),
    ("klondike", {"draw": 3, "max_passes": 2, "auto_flip": False, "scoring": "none"}),
    ("klondike", {"thoughtful": True, "foundation_to_tableau": False}),
    ("klondike", {"scoring": "vegas", "draw": 1}),
    ("russian", {}),
    ("russian", {"auto_flip": False, "foundation_to_tableau": True}),
    ("alaska", {}),
    ("alaska", {"foundation_to_tableau": True, "undo": False}),
    ("australian", {}),
    ("australian", {"scoring": "vegas", "auto_complete": False}),
    ("double_yukon", {}),
    ("double_yukon", {"auto_flip": False, "foundation_to_tableau": True}),
]
COMBO_IDS = [f"{v}-{'-'.join(f'{k}={o[k]}' for k in o) or 'defaults'}" for v, o in COMBOS]

MAX_MOVES = 60


def name(card: int) -> str:
    return RANKS[card % 13] + SUITS[card % 52 // 13]


# ------------------------------------------------------------------------------ checks


def check_cards(board: Board) -> None:
    """Every card id exactly once; every face ``decks`` times in the position JSON."""
    n = 52 * board.decks
    ids = Counter(chain(*board.tableau, *board.piles, board.stock, board.waste))
    assert sorted(ids) == list(range(n)) and set(ids.values()) == {1}
    pos = position_dict(board)
    faces = Counter(c.upper() for c in chain(*pos["tableau"], pos["stock"], pos["waste"]))
    for s, tops in pos["foundations"].items():
        for top in tops if isinstance(tops, list) else [tops]:
            faces.update(RANKS[r] + s for r in range(top))
    assert faces == Counter({f: board.decks for f in FACES})


def check_view(board: Board, owner: bool) -> None:
    """No hidden face in the view; only names, never ids; counts of copies add up."""
    seen = view(board, owner=owner)
    text = json.dumps(seen)
    hidden: Counter[str] = Counter()
    visible: Counter[str] = Counter()
    for col, down in zip(board.tableau, board.down, strict=True):
        hidden.update(name(c) for c in col[:down])
        visible.update(name(c) for c in col[down:])
    visible.update(name(c) for c in board.waste)
    if owner and board.options.thoughtful:
        visible.update(name(c) for c in board.stock)
    else:
        hidden.update(name(c) for c in board.stock)
    # A face is a secret only while every copy of it is hidden.
    assert hidden_faces(board, owner) == {f for f, n in hidden.items() if n == board.decks}
    for face in FACES:
        # A face whose every copy is hidden appears nowhere; with two decks a face may be
        # hidden (one copy) and visible (the other) and then appears once per visible copy.
        assert text.count(f'"{face}"') == visible[face], face
        assert f'"{face.lower()}"' not in text
    # Structure: card lists hold names (strings) only; numbers are counts and ranks.
    assert isinstance(seen["stock"], int) and seen["stock"] == len(board.stock)
    for col, data in zip(board.tableau, seen["tableau"], strict=True):
        assert set(data) == {"down", "up"} and isinstance(data["down"], int)
        assert data["down"] + len(data["up"]) == len(col)
        assert all(isinstance(c, str) and len(c) == 2 for c in data["up"])
    for key in ("waste", "stock_cards"):
        assert all(isinstance(c, str) and len(c) == 2 for c in seen.get(key, []))
    assert ("stock_cards" in seen) == (owner and board.options.thoughtful)
    for tops in seen["foundations"].values():
        assert all(0 <= t <= 13 for t in (tops if isinstance(tops, list) else [tops]))


def random_notation(rng: random.Random, board: Board) -> str:
    """A random string of the notation grammar (always well formed)."""
    ncols = board.columns

    def col() -> int:
        return rng.randint(1, ncols) if rng.random() < 0.9 else rng.randint(1, 10)

    kind = rng.randrange(8)
    if kind == 0:
        c = col()
        d = rng.choice([x for x in range(1, 11) if x != c])
        return f"{c}:{rng.randint(1, 16)}>{d}"
    if kind == 1:
        return f"{col()}>F"
    if kind == 2:
        return f"W>{col()}"
    if kind == 3:
        return "W>F"
    if kind == 4:
        return f"F{rng.choice(SUITS)}{rng.choice(['', '1', '2'])}>{col()}"
    if kind == 5:
        return "D"
    if kind == 6:
        return "R"
    return f"U{col()}"


def notation_space(board: Board) -> list[str]:
    """Every well-formed notation that could possibly be legal here, and then some."""
    ncols = min(board.columns + 1, 10)  # a column too many (when notation allows): refused
    longest = max(len(c) for c in board.tableau) + 1
    out = ["W>F", "D", "R"]
    for c in range(1, ncols + 1):
        out += [f"{c}>F", f"W>{c}", f"U{c}"]
        out += [f"F{s}{n}>{c}" for s in SUITS for n in ("", "1", "2")]
        out += [f"{c}:{k}>{d}" for d in range(1, ncols + 1) if d != c for k in range(1, longest)]
    return out


def check_moves(board: Board, rng: random.Random, exhaustive: bool) -> None:
    moves = board.legal_moves()
    names = [str(m) for m in moves]
    assert len(set(names)) == len(names), "duplicate moves"
    legal = set(names)
    before, pos_before = board.snapshot(), position_dict(board)
    count = board.move_count
    for move in moves:
        assert parse_move(str(move)) == move
        assert board.refusal(move) is None, move
        board.play(str(move))  # the checked path
        board.pop()
        assert board.snapshot() == before, move
    board.move_count = count
    assert position_dict(board) == pos_before
    candidates = (
        notation_space(board) if exhaustive else [random_notation(rng, board) for _ in range(25)]
    )
    for text in candidates:
        move = parse_move(text)
        if text in legal:
            assert board.refusal(move) is None
            continue
        assert board.refusal(move) is not None, f"{text} accepted but not generated"
        with pytest.raises(IllegalMoveError):
            board.play(text)
    assert board.snapshot() == before and board.move_count == count
    # Status agrees with the move list.
    assert board.has_legal_move() == bool(moves)
    if board.is_won():
        assert moves == [] and board.status() == WON
    elif not moves:
        assert board.is_stuck() and board.status() == STUCK
    else:
        assert not board.is_stuck()


def check_round_trip(board: Board) -> None:
    pos = position_dict(board)
    again = load_position(json.dumps(pos))
    assert position_dict(again) == pos
    assert {str(m) for m in again.legal_moves()} == {str(m) for m in board.legal_moves()}


def choose(board: Board, rng: random.Random) -> str | None:
    """A log entry: sometimes undo, otherwise a legal move (foundation moves favoured)."""
    if board.options.undo and board.history and rng.random() < 0.1:
        return UNDO
    moves = board.legal_moves()
    if not moves:
        return None
    to_foundation = [m for m in moves if str(m).endswith(">F")]
    if to_foundation and rng.random() < 0.5:
        return str(rng.choice(to_foundation))
    return str(rng.choice(moves))


# --------------------------------------------------------------------------- properties


@pytest.mark.parametrize(("variant", "options"), COMBOS, ids=COMBO_IDS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**64 - 1), choices=st.integers(0, 2**32 - 1))
def test_random_games(variant: str, options: dict[str, Any], seed: int, choices: int) -> None:
    rng = random.Random(choices)
    board = deal(variant, seed, options)
    entries: list[str] = []
    # Snapshots before each move on the history stack, to check undo against.
    stack: list[tuple[Any, ...]] = []
    for step in range(MAX_MOVES):
        check_cards(board)
        check_view(board, owner=False)
        check_view(board, owner=True)
        check_moves(board, rng, exhaustive=step % 15 == 0)
        if step % 10 == 0:
            check_round_trip(board)
        entry = choose(board, rng)
        if entry is None:
            break
        entries.append(entry)
        if entry == UNDO:
            count = board.move_count
            board.undo()
            assert board.snapshot() == stack.pop()
            assert board.move_count == count + 1
            continue
        stack.append(board.snapshot())
        board.play(entry)
        if board.options.auto_complete and board.can_auto_complete():
            played = board.auto_complete()
            assert board.is_won() and played
            probe = board.copy()
            snaps = []
            for _ in played:
                probe.pop()
                snaps.append(probe.snapshot())
            stack.extend(reversed(snaps))
        assert len(stack) == len(board.history)
    check_cards(board)
    rebuilt = replay(variant, seed, options, entries)
    assert rebuilt.snapshot() == board.snapshot()
    assert rebuilt.move_count == board.move_count
    assert rebuilt.history == board.history


@st.composite
def auto_completable(draw: st.DrawFn) -> dict[str, Any]:
    """A random position meeting the auto-complete condition: random foundation tops,
    the other cards face up in columns, strictly descending, no two equal ranks in one
    column."""
    variant = draw(
        st.sampled_from(["yukon", "klondike", "russian", "alaska", "australian", "double_yukon"])
    )
    decks = 2 if variant == "double_yukon" else 1
    ncols = 10 if decks == 2 else 7
    foundations: dict[str, Any] = {}
    left: list[tuple[int, str]] = []
    for s in SUITS:
        tops = [draw(st.integers(0, 13)) for _ in range(decks)]
        foundations[s] = tops if decks == 2 else tops[0]
        for top in tops:
            left += [(r, r_name + s) for r, r_name in enumerate(RANKS, 1) if r > top]
    columns: list[list[tuple[int, str]]] = [[] for _ in range(ncols)]
    for rank in range(1, 14):
        same = [c for c in left if c[0] == rank]
        where = draw(st.permutations(range(ncols)))[: len(same)]
        for card, c in zip(same, where, strict=True):
            columns[c].append(card)
    tableau = [[n for _, n in sorted(col, reverse=True)] for col in columns]
    return {"variant": variant, "tableau": tableau, "foundations": foundations}


@settings(max_examples=60, deadline=None)
@given(auto_completable())
def test_auto_complete_wins_by_legal_moves(data: dict[str, Any]) -> None:
    """RULES common (auto_complete): when the condition holds the game is certainly won;
    auto-complete plays only legal ``c>F`` moves, lowest rank first, and wins."""
    board = load_position(data)
    check_cards(board)
    check_moves(board, random.Random(0), exhaustive=True)
    if board.is_won():
        assert not board.can_auto_complete() and board.legal_moves() == []
        return
    assert board.can_auto_complete()
    checked = load_position(data)
    played = board.auto_complete()
    assert board.is_won() and board.legal_moves() == []
    assert board.move_count == len(played) == 52 * board.decks - checked.foundation_count()
    last_rank = 0
    for move in played:
        assert str(move).endswith(">F")
        top = checked.tableau[move.src][-1]
        assert top % 13 + 1 >= last_rank
        last_rank = top % 13 + 1
        checked.play(move)  # each one legal when it is played
    assert checked.snapshot() == board.snapshot()
