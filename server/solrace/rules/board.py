"""The board: one player's game of one variant, with checked and unchecked moves.

Modelled on python-chess's ``Board``: :meth:`Board.legal_moves` generates,
:meth:`Board.play` checks one move directly (it never generates the whole move list)
and applies it, :meth:`Board.push` applies without checking, :meth:`Board.pop` takes a
move back exactly. :meth:`Board.undo` is the *player's* undo: it pops and counts as a
move (docs/rules.md, common rules). Variants are subclasses that set a handful of class
attributes; every rule lives here once.

State, chosen for speed: columns are lists of card ids, bottom first, with the number
of face-down cards at the bottom of each column in ``down`` (face-down cards always form
the bottom of a column: nothing moves onto or off a face-down card). Foundations are
piles of card ids; a pile's top rank is its length.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Final

from solrace.quoting import quoted

from .cards import (
    CARDS_PER_DECK,
    FACE,
    KING,
    NAMES,
    RANK,
    RANK_WORDS,
    RANKS,
    RED,
    SUIT,
    SUIT_NAMES,
)
from .errors import IllegalMoveError, NotationError, RulesError
from .moves import (
    DRAW,
    FLIP,
    FOUNDATION_TO_TABLEAU,
    RECYCLE,
    TABLEAU,
    TO_FOUNDATION,
    WASTE_TO_FOUNDATION,
    WASTE_TO_TABLEAU,
    Move,
    parse_move,
)
from .options import Options, resolve_options

# How tableau cards build on each other.
BUILD_ALTERNATE: Final = 0  # one rank lower, opposite colour
BUILD_SUIT: Final = 1  # one rank lower, same suit
BUILD_SUIT_UP_OR_DOWN: Final = 2  # same suit, one rank lower or higher

_SCORING_STANDARD: Final = 0
_SCORING_VEGAS: Final = 1
_SCORING_NONE: Final = 2

PLAYING: Final = "playing"
WON: Final = "won"
STUCK: Final = "stuck"

# An undo record: whether the move turned a card up, the foundation pile it used (or
# how many cards a draw took), and the score before it. The move itself is kept apart
# (``_played``): Move is a named tuple, which the cyclic collector never stops
# tracking, nor a tuple holding one, so a record holding it kept every record of every
# game a server holds (tens of thousands) in each of its collections, up to 145 ms a
# time (docs/performance.md, round 8); a tuple of ints is untracked after its first.
_Record = tuple[bool, int, int]


def _fits(build: int, onto: int, card: int) -> bool:
    """Whether face ``card`` may be placed on face ``onto`` under ``build``."""
    rank_step = RANK[onto] - RANK[card]
    if build == BUILD_ALTERNATE:
        return rank_step == 1 and RED[onto] != RED[card]
    if build == BUILD_SUIT:
        return rank_step == 1 and SUIT[onto] == SUIT[card]
    return rank_step in (1, -1) and SUIT[onto] == SUIT[card]


class Board:
    """A game in progress. Use :func:`solrace.rules.deal` or
    :func:`solrace.rules.load_position` to get one; subclasses are the variants."""

    variant: ClassVar[str] = ""
    columns: ClassVar[int] = 7
    decks: ClassVar[int] = 1
    has_stock: ClassVar[bool] = False
    #: Klondike moves only descending alternating runs; Yukon moves any face-up group.
    runs_only: ClassVar[bool] = False
    build: ClassVar[int] = BUILD_ALTERNATE
    #: Options a caller may set, with their defaults.
    allowed_options: ClassVar[Mapping[str, Any]] = {}
    #: Options the variant imposes.
    fixed_options: ClassVar[Mapping[str, Any]] = {}

    # Derived per variant in __init_subclass__.
    _accepts: ClassVar[bytes] = b""
    _placeable: ClassVar[tuple[tuple[int, ...], ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        accepts = bytearray(CARDS_PER_DECK * CARDS_PER_DECK)
        placeable: list[tuple[int, ...]] = []
        for onto in range(CARDS_PER_DECK):
            fitting = tuple(c for c in range(CARDS_PER_DECK) if _fits(cls.build, onto, c))
            placeable.append(fitting)
            for card in fitting:
                accepts[onto * CARDS_PER_DECK + card] = 1
        cls._accepts = bytes(accepts)
        cls._placeable = tuple(placeable)

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options: Options = resolve_options(
            self.variant, self.allowed_options, self.fixed_options, options
        )
        opts = self.options
        self.tableau: list[list[int]] = [[] for _ in range(self.columns)]
        self.down: list[int] = [0] * self.columns
        self.piles: list[list[int]] = [[] for _ in range(4 * self.decks)]
        self.stock: list[int] = []
        self.waste: list[int] = []
        self.recycles = 0
        #: Moves made, undos included (docs/rules.md: each undo counts as a move).
        self.move_count = 0
        #: Milliseconds since the game started, as last told by the caller.
        self.elapsed_ms = 0
        self._history: list[_Record] = []
        #: The moves of the undo records, in the same order (see _Record).
        self._played: list[Move] = []
        self._auto_flip = opts.auto_flip
        self._f2t = opts.foundation_to_tableau
        self._draw = opts.draw
        self._max_recycles = None if opts.max_passes is None else opts.max_passes - 1
        scoring = {"standard": _SCORING_STANDARD, "vegas": _SCORING_VEGAS}.get(
            opts.scoring, _SCORING_NONE
        )
        self._scoring = scoring
        standard = scoring == _SCORING_STANDARD
        self._pts_foundation = 10 if standard else 5 if scoring == _SCORING_VEGAS else 0
        self._pts_flip = 5 if standard else 0
        self._pts_waste_tableau = 5 if standard else 0
        self._pts_waste_bonus = 3 if standard else 0
        self._pts_recycle = -20 if standard else 0
        self._score = 0
        self._suit_piles: tuple[tuple[int, ...], ...] = tuple(
            tuple(range(s * self.decks, (s + 1) * self.decks)) for s in range(4)
        )

    # ------------------------------------------------------------------ setup
    def _layout(self, cards: list[int]) -> None:
        """Deal ``cards`` (a shuffled deck, first card first) into this variant's layout."""
        raise NotImplementedError

    def _set_up(
        self,
        tableau: list[list[int]],
        down: list[int],
        piles: list[list[int]],
        stock: list[int],
        waste: list[int],
        recycles: int,
    ) -> None:
        """Install a position (from a deal or a position file) and score it from scratch."""
        self.tableau = tableau
        self.down = down
        self.piles = piles
        self.stock = stock
        self.waste = waste
        self.recycles = recycles
        self._history = []
        self._played = []
        on_foundations = sum(len(p) for p in piles)
        if self._scoring == _SCORING_VEGAS:
            self._score = -CARDS_PER_DECK * self.decks + 5 * on_foundations
        else:
            self._score = self._pts_foundation * on_foundations + self._pts_recycle * recycles

    # ------------------------------------------------------------ inspection
    @property
    def score(self) -> int:
        """Standard or Vegas score; with ``scoring="none"``, 1 for a win and 0 otherwise."""
        if self._scoring == _SCORING_NONE:
            return 1 if self.is_won() else 0
        return self._score

    @property
    def card_count(self) -> int:
        return CARDS_PER_DECK * self.decks

    def foundation_count(self) -> int:
        """Cards on the foundations: the race's measure of progress."""
        return sum(len(p) for p in self.piles)

    def face_down_count(self) -> int:
        """Cards still face down in the tableau (the stock is not counted)."""
        return sum(self.down)

    def is_won(self) -> bool:
        return self.foundation_count() == self.card_count

    def is_stuck(self) -> bool:
        """No legal move (undo aside) and the foundations are incomplete (docs/rules.md)."""
        return not self.is_won() and not self.has_legal_move()

    def status(self) -> str:
        if self.is_won():
            return WON
        if not self.has_legal_move():
            return STUCK
        return PLAYING

    @property
    def history(self) -> list[Move]:
        """The moves on the stack that :meth:`pop` and :meth:`undo` take back."""
        return list(self._played)

    def can_undo(self) -> bool:
        return self.options.undo and bool(self._history)

    def snapshot(self) -> tuple[Any, ...]:
        """Everything that defines the game now, card identities included, for exact
        comparisons (undo restores exactly; a replayed log rebuilds the same game)."""
        return (
            tuple(tuple(c) for c in self.tableau),
            tuple(self.down),
            tuple(tuple(p) for p in self.piles),
            tuple(self.stock),
            tuple(self.waste),
            self.recycles,
            self._score,
        )

    def copy(self) -> Board:
        """An independent board in the same position, with the same history."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.tableau = [list(c) for c in self.tableau]
        other.down = list(self.down)
        other.piles = [list(p) for p in self.piles]
        other.stock = list(self.stock)
        other.waste = list(self.waste)
        other._history = list(self._history)
        other._played = list(self._played)
        return other

    def _target_pile(self, card: int) -> int:
        """The foundation pile that takes ``card`` now, or -1."""
        need = RANK[card] - 1
        piles = self.piles
        for p in self._suit_piles[SUIT[card]]:
            if len(piles[p]) == need:
                return p
        return -1

    def _pile_index(self, suit: int, number: int) -> int:
        """Pile index of ``Fs>d`` (number 0) or ``Fsn>d`` (number 1 or 2), or -1."""
        if self.decks == 1:
            return suit if number == 0 else -1
        if 1 <= number <= self.decks:
            return suit * self.decks + number - 1
        return -1

    # ------------------------------------------------------- move generation
    def legal_moves(self) -> list[Move]:
        """Every legal move, each distinct notation once (docs/rules.md, notation)."""
        return list(self._moves())

    def has_legal_move(self) -> bool:
        """Whether any move (undo aside) is legal: the status check after every move
        of a race needs only the first one, not the list."""
        return next(self._moves(), None) is not None

    def _moves(self) -> Iterator[Move]:
        """The legal moves one by one, in :meth:`legal_moves`'s order."""
        tab = self.tableau
        down = self.down
        ncol = self.columns
        placeable = self._placeable
        # Where each face could be placed, and which columns are empty.
        want: dict[int, list[int]] = {}
        empties: list[int] = []
        for d in range(ncol):
            col = tab[d]
            if not col:
                empties.append(d)
            elif down[d] < len(col):
                for face in placeable[FACE[col[-1]]]:
                    slot = want.get(face)
                    if slot is None:
                        want[face] = [d]
                    else:
                        slot.append(d)
        runs_only = self.runs_only
        accepts = self._accepts
        piles = self.piles
        single = self.decks == 1
        for c in range(ncol):
            col = tab[c]
            n = len(col)
            lowest = down[c]
            if lowest >= n:
                if n and not self._auto_flip:
                    yield Move(FLIP, c)
                continue
            if runs_only:
                i = n - 1
                while i > lowest and accepts[FACE[col[i - 1]] * CARDS_PER_DECK + FACE[col[i]]]:
                    i -= 1
                lowest = i
            for i in range(lowest, n):
                card = col[i]
                targets = want.get(FACE[card])
                if targets is not None:
                    for d in targets:
                        if d != c:
                            yield Move(TABLEAU, c, n - i, d)
                if empties and RANK[card] == KING:
                    for d in empties:
                        if d != c:
                            yield Move(TABLEAU, c, n - i, d)
            top = col[-1]
            if single:
                if len(piles[SUIT[top]]) == RANK[top] - 1:
                    yield Move(TO_FOUNDATION, c)
            elif self._target_pile(top) >= 0:
                yield Move(TO_FOUNDATION, c)
        if self.has_stock:
            waste = self.waste
            if waste:
                card = waste[-1]
                for d in want.get(FACE[card], ()):
                    yield Move(WASTE_TO_TABLEAU, 0, 0, d)
                if RANK[card] == KING:
                    for d in empties:
                        yield Move(WASTE_TO_TABLEAU, 0, 0, d)
                if self._target_pile(card) >= 0:
                    yield Move(WASTE_TO_FOUNDATION)
            if self.stock:
                yield Move(DRAW)
            elif waste and (self._max_recycles is None or self.recycles < self._max_recycles):
                yield Move(RECYCLE)
        if self._f2t and not self.is_won():  # RULES: a won game has no legal moves
            decks = self.decks
            for p, pile in enumerate(piles):
                if not pile:
                    continue
                card = pile[-1]
                suit, number = (p, 0) if single else (p // decks, p % decks + 1)
                for d in want.get(FACE[card], ()):
                    yield Move(FOUNDATION_TO_TABLEAU, suit, number, d)
                if RANK[card] == KING:
                    for d in empties:
                        yield Move(FOUNDATION_TO_TABLEAU, suit, number, d)

    def is_legal(self, move: Move) -> bool:
        return self.refusal(move) is None

    # ----------------------------------------------------------- move checks
    def _room_sets(self, option: str) -> bool:
        """Whether a room of this variant chooses ``option``: a refusal names it only
        then. A variant that fixes it (Australian: one pass, nothing off a foundation,
        cards turned up by themselves; docs/rules.md) has no such option, and a
        refusal naming it ("max_passes is 1") read as one a player could change."""
        return option in self.allowed_options

    def refusal(self, move: Move) -> str | None:
        """Why ``move`` is illegal here, in words for a player, or None if it is legal.

        Checks the one move directly; never generates the move list.
        """
        kind = move.kind
        if kind == TABLEAU:
            c = move.src
            if c >= self.columns:
                return self._no_column(c)
            col = self.tableau[c]
            n = len(col)
            if n == 0:
                return f"column {c + 1} is empty"
            k = move.number
            if k < 1:
                return "a move takes at least one card"
            up = n - self.down[c]
            if k > up:
                if up == 0:
                    return f"column {c + 1}'s top card is face down: turn it up first (U{c + 1})"
                return f"column {c + 1} has only {up} face-up card{'s' if up > 1 else ''}"
            if self.runs_only and k > 1:
                accepts = self._accepts
                for i in range(n - k, n - 1):
                    if not accepts[FACE[col[i]] * CARDS_PER_DECK + FACE[col[i + 1]]]:
                        return (
                            f"only a run moves in {self.variant}: {NAMES[FACE[col[i + 1]]]} "
                            f"does not build on {NAMES[FACE[col[i]]]}"
                        )
            return self._refuse_onto(col[n - k], move.dst)
        if kind == TO_FOUNDATION:
            c = move.src
            if c >= self.columns:
                return self._no_column(c)
            col = self.tableau[c]
            if not col:
                return f"column {c + 1} is empty"
            if self.down[c] == len(col):
                return f"column {c + 1}'s top card is face down: turn it up first (U{c + 1})"
            return self._refuse_foundation(col[-1])
        if kind in (WASTE_TO_TABLEAU, WASTE_TO_FOUNDATION):
            if not self.has_stock:
                return f"{self.variant} has no stock or waste"
            if not self.waste:
                return "the waste is empty"
            if kind == WASTE_TO_FOUNDATION:
                return self._refuse_foundation(self.waste[-1])
            return self._refuse_onto(self.waste[-1], move.dst)
        if kind == FOUNDATION_TO_TABLEAU:
            if not self._f2t:
                if not self._room_sets("foundation_to_tableau"):
                    return f"foundation cards stay where they are in {self.variant}"
                return "foundation cards stay where they are (foundation_to_tableau is off)"
            if self.is_won():
                return "the game is won: a won game has no legal moves"
            p = self._pile_index(move.src, move.number)
            if p < 0:
                if self.decks == 1:
                    return "there is one foundation per suit: write it without a number"
                suit = "CDHS"[move.src]
                return f"there are two foundations per suit: write F{suit}1 or F{suit}2"
            pile = self.piles[p]
            if not pile:
                return f"the {SUIT_NAMES[move.src]} foundation is empty"
            return self._refuse_onto(pile[-1], move.dst)
        if kind == DRAW:
            if not self.has_stock:
                return f"{self.variant} has no stock"
            if not self.stock:
                if self.waste:
                    return "the stock is empty: turn the waste over (R)"
                return "the stock and the waste are empty"
            return None
        if kind == RECYCLE:
            if not self.has_stock:
                return f"{self.variant} has no stock"
            if self.stock:
                return "the stock is not empty yet"
            if not self.waste:
                return "the waste is empty: nothing to turn over"
            if self._max_recycles is not None and self.recycles >= self._max_recycles:
                passes = self.options.max_passes
                if not self._room_sets("max_passes"):
                    plural = "" if passes == 1 else "es"
                    return f"no passes left ({self.variant} allows {passes} pass{plural})"
                return f"no passes left (max_passes is {passes})"
            return None
        if kind == FLIP:
            c = move.src
            if self._auto_flip:
                if not self._room_sets("auto_flip"):
                    return f"cards turn up by themselves in {self.variant}"
                return "cards turn up by themselves here (auto_flip is on)"
            if c >= self.columns:
                return self._no_column(c)
            col = self.tableau[c]
            if not col:
                return f"column {c + 1} is empty"
            if self.down[c] < len(col):
                return f"column {c + 1}'s top card is already face up"
            return None
        return "unknown move"  # pragma: no cover - Move kinds are closed

    def _no_column(self, c: int) -> str:
        return f"there is no column {c + 1} ({self.variant} has {self.columns})"

    def _refuse_onto(self, card: int, d: int) -> str | None:
        """Why ``card`` (leading a group) cannot go on column ``d``, or None."""
        if d >= self.columns:
            return self._no_column(d)
        dest = self.tableau[d]
        if not dest:
            if RANK[card] == KING:
                return None
            return f"only a King may go to an empty column, not {NAMES[FACE[card]]}"
        if self.down[d] == len(dest):
            return f"column {d + 1}'s top card is face down: turn it up first (U{d + 1})"
        onto = dest[-1]
        if self._accepts[FACE[onto] * CARDS_PER_DECK + FACE[card]]:
            return None
        return self._why_not(card, onto)

    def _why_not(self, card: int, onto: int) -> str:
        name, onto_name = NAMES[FACE[card]], NAMES[FACE[onto]]
        prefix = f"{name} cannot go on {onto_name}"
        build = self.build
        if build == BUILD_ALTERNATE:
            if RED[card] == RED[onto]:
                return f"{prefix}: same colour"
            if RANK[onto] == 1:
                return f"{prefix}: nothing goes on an Ace"
            return f"{prefix}: it must be one rank lower ({RANK_WORDS[RANK[onto] - 2]})"
        if SUIT[card] != SUIT[onto]:
            return f"{prefix}: different suit"
        if build == BUILD_SUIT:
            if RANK[onto] == 1:
                return f"{prefix}: nothing goes on an Ace"
            return f"{prefix}: it must be one rank lower ({RANK_WORDS[RANK[onto] - 2]})"
        return f"{prefix}: it must be one rank higher or lower"

    def _refuse_foundation(self, card: int) -> str | None:
        if self._target_pile(card) >= 0:
            return None
        suit = SUIT[card]
        tops = [len(self.piles[p]) for p in self._suit_piles[suit]]
        needs = sorted({t + 1 for t in tops if t < KING})
        prefix = f"{NAMES[FACE[card]]} cannot go to a foundation"
        if not needs:
            return f"{prefix}: the {SUIT_NAMES[suit]} foundation is complete"
        wanted = " or ".join(RANKS[r - 1] + "CDHS"[suit] for r in needs)
        return f"{prefix}: the {SUIT_NAMES[suit]} foundation needs {wanted}"

    # ---------------------------------------------------------- making moves
    def play(self, move: Move | str, at_ms: int | None = None) -> Move:
        """Check ``move`` and make it; count it. Raises :class:`IllegalMoveError`
        (with the reason) and leaves the board unchanged if it is not legal.

        ``at_ms`` is the caller's clock (milliseconds since the game began): the engine
        never reads a clock.
        """
        if isinstance(move, str):
            try:
                move = parse_move(move)
            except NotationError as exc:
                if exc.column is None:
                    raise
                # Said in this board's range, not the notation's, which no board has.
                raise NotationError(
                    f"{quoted(move)}: column {exc.column} is not between 1 and {self.columns} "
                    f"({self.variant} has {self.columns} columns)",
                    column=exc.column,
                ) from None
        elif not isinstance(move, Move):
            raise NotationError(f"not a move: {quoted(move)}")
        reason = self.refusal(move)
        if reason is not None:
            raise IllegalMoveError(str(move), reason)
        self.push(move)
        self.move_count += 1
        if at_ms is not None:
            self.elapsed_ms = at_ms
        return move

    def undo(self, at_ms: int | None = None) -> Move:
        """The player's undo: take back the last move exactly; counts as a move."""
        if not self.options.undo:
            raise IllegalMoveError("undo", "undo is off in this game")
        if not self._history:
            raise IllegalMoveError("undo", "there is no move to undo")
        move = self.pop()
        self.move_count += 1
        if at_ms is not None:
            self.elapsed_ms = at_ms
        return move

    def _uncover(self, c: int) -> bool:
        """Turn up a face-down card that became the top of column ``c`` (auto_flip)."""
        d = self.down[c]
        if d and d == len(self.tableau[c]) and self._auto_flip:
            self.down[c] = d - 1
            self._score += self._pts_flip
            return True
        return False

    def push(self, move: Move) -> None:
        """Make ``move`` without checking it (for generated moves, perft, replays of
        logs that were checked when written). An illegal move corrupts the board."""
        kind = move.kind
        before = self._score
        flipped = False
        extra = -1
        if kind == TABLEAU:
            src = self.tableau[move.src]
            cut = len(src) - move.number
            self.tableau[move.dst] += src[cut:]
            del src[cut:]
            if cut and cut == self.down[move.src]:
                flipped = self._uncover(move.src)
        elif kind == TO_FOUNDATION:
            src = self.tableau[move.src]
            card = src.pop()
            extra = self._target_pile(card)
            self.piles[extra].append(card)
            self._score += self._pts_foundation
            if src and len(src) == self.down[move.src]:
                flipped = self._uncover(move.src)
        elif kind == DRAW:
            stock, waste = self.stock, self.waste
            extra = min(self._draw, len(stock))
            for _ in range(extra):
                waste.append(stock.pop())
        elif kind == WASTE_TO_TABLEAU:
            self.tableau[move.dst].append(self.waste.pop())
            self._score += self._pts_waste_tableau
        elif kind == WASTE_TO_FOUNDATION:
            card = self.waste.pop()
            extra = self._target_pile(card)
            self.piles[extra].append(card)
            self._score += self._pts_foundation + self._pts_waste_bonus
        elif kind == RECYCLE:
            self.stock[:] = self.waste[::-1]
            self.waste.clear()
            self.recycles += 1
            self._score += self._pts_recycle
        elif kind == FOUNDATION_TO_TABLEAU:
            extra = self._pile_index(move.src, move.number)
            self.tableau[move.dst].append(self.piles[extra].pop())
            self._score -= self._pts_foundation
        elif kind == FLIP:
            self.down[move.src] -= 1
            self._score += self._pts_flip
            flipped = True
        self._history.append((flipped, extra, before))
        self._played.append(move)

    def pop(self) -> Move:
        """Take back the last move exactly (position and score) without counting it."""
        if not self._history:
            raise RulesError("no move to take back")
        flipped, extra, before = self._history.pop()
        move = self._played.pop()
        kind = move.kind
        if kind == TABLEAU:
            if flipped:
                self.down[move.src] += 1
            dst = self.tableau[move.dst]
            cut = len(dst) - move.number
            self.tableau[move.src] += dst[cut:]
            del dst[cut:]
        elif kind == TO_FOUNDATION:
            if flipped:
                self.down[move.src] += 1
            self.tableau[move.src].append(self.piles[extra].pop())
        elif kind == DRAW:
            stock, waste = self.stock, self.waste
            for _ in range(extra):
                stock.append(waste.pop())
        elif kind == WASTE_TO_TABLEAU:
            self.waste.append(self.tableau[move.dst].pop())
        elif kind == WASTE_TO_FOUNDATION:
            self.waste.append(self.piles[extra].pop())
        elif kind == RECYCLE:
            self.waste[:] = self.stock[::-1]
            self.stock.clear()
            self.recycles -= 1
        elif kind == FOUNDATION_TO_TABLEAU:
            self.piles[extra].append(self.tableau[move.dst].pop())
        elif kind == FLIP:
            self.down[move.src] += 1
        self._score = before
        return move

    # --------------------------------------------------------- auto-complete
    def can_auto_complete(self) -> bool:
        """docs/rules.md auto-complete: every tableau card face up, each column strictly
        descending from bottom to top, stock and waste empty, and cards left to play.

        Then the game is certainly won: the lowest remaining card is always on top of
        its column and is the next card of its suit's foundation.
        """
        if self.stock or self.waste or any(self.down):
            return False
        remaining = False
        for col in self.tableau:
            for i in range(1, len(col)):
                if RANK[col[i - 1]] <= RANK[col[i]]:
                    return False
            remaining = remaining or bool(col)
        return remaining

    def auto_complete(self, at_ms: int | None = None) -> list[Move]:
        """Play the remaining cards to the foundations, lowest rank first; each is a
        counted ``c>F`` move. Returns the moves played (none if not possible)."""
        if not self.can_auto_complete():
            return []
        played: list[Move] = []
        tab = self.tableau
        while True:
            best = -1
            for c, col in enumerate(tab):
                if col and (best < 0 or RANK[col[-1]] < RANK[tab[best][-1]]):
                    best = c
            if best < 0:
                break
            move = Move(TO_FOUNDATION, best)
            self.push(move)
            self.move_count += 1
            played.append(move)
        if at_ms is not None:
            self.elapsed_ms = at_ms
        return played

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.variant} foundations={self.foundation_count()}"
            f" moves={self.move_count}>"
        )
