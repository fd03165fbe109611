"""The search core: a compact position, safe automatic moves and a depth-first search.

Why a representation of its own: the engine's :class:`~solrace.rules.Board` is built
for checked play (mutable lists, undo records, scores), and hashing it for a
transposition table would cost more than the search itself. Here a position is a tuple
of immutable parts, so a child shares every column it does not touch with its parent
and a transposition key is a few byte-string operations:

``(cols, downs, piles, talon, p, rec)``

- ``cols``: one byte string per column, bottom card first (bytes rather than tuples:
  slicing and joining are as cheap, a sorted join of them is the transposition key,
  and bytes cache their hash, which halved the cost of the table look-up). A card is
  its *face* (0–51; the two copies of a double deck play identically, so only the face
  matters); a face-down card is stored as ``face + DOWN``, so the column alone says what is
  face down and the key needs no separate count.
- ``downs``: face-down cards at the bottom of each column (the same fact, kept for
  speed).
- ``piles``: the height of each foundation pile (engine order: suit-major, then copy).
- ``talon``: stock and waste as one sequence, ``waste`` bottom→top followed by the
  stock in the order it will be drawn; ``p`` is the waste's length. A draw moves ``p``
  forward, a recycle sets it to 0, and the sequence only changes when its waste top is
  played. ``rec`` counts recycles.

The search never reads a clock: it stops on a node budget or when the caller's
``should_stop`` callable says so (polled every 1,024 nodes).

Soundness (what lets ``unwinnable`` be a proof) is argued in ``docs/solver.md``; each
reduction used here says in its docstring why it never loses a win.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from .deadlock import relaxed_dead
from .faces import DOWN, FACES, KING, RANK, RED_SUIT, SUIT

BUILD_ALTERNATE: Final = 0
BUILD_SUIT: Final = 1
BUILD_SUIT_UP_OR_DOWN: Final = 2

# Internal move kinds.
FOUNDATION_PRIO = 4
#: Priority of a group move that takes its first card off a card it builds on, when
#: that card cannot go up next. A *reduced* run (see :class:`Search`) never makes it.
OFF_NATURAL_PRIO: Final = 6
TAB: Final = 0  # (src, index of the group's first card, dst)
TO_F: Final = 1  # (src, 0, 0)
TALON_TAB: Final = 2  # (waste length that makes the card the top, recycled?, dst)
TALON_F: Final = 3  # (waste length, recycled?, 0)
F_TO_TAB: Final = 4  # (pile, 0, dst)

#: A move in the search: (priority, tie-break, kind, a, b, c). Lower sorts first.
SearchMove = tuple[int, int, int, int, int, int]
State = tuple[tuple[bytes, ...], tuple[int, ...], tuple[int, ...], bytes, int, int]
#: BYTE[x]: the one-byte string of card x, to append a card to a column.
BYTE: Final[tuple[bytes, ...]] = tuple(bytes((x,)) for x in range(2 * DOWN))
#: Separates columns in a transposition key (cards are below 128).
SEP: Final = b"\xff"

SUIT_LETTERS: Final = "CDHS"

# Search results of :func:`search`.
FOUND: Final = 0
EXHAUSTED: Final = 1
OUT_OF_BUDGET: Final = 2


def _fits(build: int, onto: int, card: int) -> bool:
    step = RANK[onto] - RANK[card]
    if build == BUILD_ALTERNATE:
        return step == 1 and RED_SUIT[SUIT[onto]] != RED_SUIT[SUIT[card]]
    if build == BUILD_SUIT:
        return step == 1 and SUIT[onto] == SUIT[card]
    return step in (1, -1) and SUIT[onto] == SUIT[card]


class Spec:
    """The rules of one game (variant plus options) as the search needs them.

    Built once per solve from the engine's own class attributes and resolved options,
    so the solver can never disagree with the engine about *which* rules apply.
    """

    __slots__ = (
        "auto_flip",
        "build",
        "children",
        "classic_safe",
        "decks",
        "draw",
        "f2t",
        "fits",
        "has_stock",
        "lock_stats",
        "max_recycles",
        "ncols",
        "parent_mask",
        "parents",
        "reached_cache",
        "runs_only",
        "safe_need",
        "suit_piles",
        "up_cache",
        "waste_auto",
    )

    def __init__(
        self,
        *,
        ncols: int,
        decks: int,
        build: int,
        runs_only: bool,
        has_stock: bool,
        draw: int,
        max_recycles: int | None,
        f2t: bool,
        auto_flip: bool,
    ) -> None:
        self.ncols = ncols
        self.decks = decks
        self.build = build
        self.runs_only = runs_only
        self.has_stock = has_stock
        self.draw = draw
        self.max_recycles = max_recycles
        self.f2t = f2t
        self.auto_flip = auto_flip
        self.suit_piles: tuple[tuple[int, ...], ...] = tuple(
            tuple(range(s * decks, (s + 1) * decks)) for s in range(4)
        )
        #: parents[x]: the faces x may be placed on.
        self.parents: tuple[tuple[int, ...], ...] = tuple(
            tuple(o for o in range(FACES) if _fits(build, o, x)) for x in range(FACES)
        )
        #: children[o]: the faces that may be placed on face o.
        self.children: tuple[tuple[int, ...], ...] = tuple(
            tuple(x for x in range(FACES) if o in self.parents[x]) for o in range(FACES)
        )
        fits = bytearray(DOWN * DOWN)
        for x in range(FACES):
            for o in self.parents[x]:
                fits[o * DOWN + x] = 1
        self.fits = bytes(fits)
        #: parent_mask[x]: bit o set for every face o that x may be placed on, so one
        #: AND against the mask of the column tops skips a card with nowhere to go.
        self.parent_mask: tuple[int, ...] = tuple(
            sum(1 << o for o in self.parents[x]) if x < FACES else 0 for x in range(2 * DOWN)
        )
        #: piles → (upnext, safe): see :meth:`up_of`.
        #: Over a whole solve: children :func:`may_lock` picked, those the deadlock
        #: test was run on, and those it proved lost (see ADAPT_RATIO).
        self.lock_stats = [0, 0, 0]
        self.reached_cache: dict[tuple[int, ...], list[bool]] = {}
        self.up_cache: dict[tuple[int, ...], tuple[dict[int, int], dict[int, int]]] = {}
        # The classical, stronger safe rule needs run moves (a group that could use the
        # card as a base is a run that can itself go up) and a one-way foundation.
        self.classic_safe = build == BUILD_ALTERNATE and runs_only and not f2t and decks == 1
        # A waste card may go up automatically only with draw 1: with draw 3, taking a
        # card out of the waste early would regroup every later draw.
        self.waste_auto = draw == 1
        self.safe_need = tuple(self._safe_need(x) for x in range(FACES))

    def _safe_need(self, x: int) -> tuple[tuple[tuple[int, int], ...], ...]:
        """The conditions under which face ``x`` may go up automatically: a tuple of
        alternatives, each a tuple of (pile, minimum height) that must all hold.

        Rule A (every variant): let D be ``x`` and every card that could ever be built
        on it, directly or down a chain. If every card of D but ``x`` is already on the
        foundations, a winning line never needs ``x`` in the tableau (docs/solver.md).
        """
        r, s = RANK[x], SUIT[x]
        alternatives: list[tuple[tuple[int, int], ...]] = []
        if self.build == BUILD_ALTERNATE:
            red = RED_SUIT[s]
            opposite = [p for t in range(4) if RED_SUIT[t] != red for p in self.suit_piles[t]]
            same = [p for t in range(4) if RED_SUIT[t] == red for p in self.suit_piles[t]]
            alternatives.append(
                tuple((p, r - 1) for p in opposite) + tuple((p, r - 2) for p in same)
            )
            if self.classic_safe:
                alternatives.append(
                    tuple((p, r - 2) for p in opposite) + tuple((p, r - 3) for p in same)
                )
        elif self.build == BUILD_SUIT or r == KING:
            alternatives.append(tuple((p, r - 1) for p in self.suit_piles[s]))
        return tuple(alternatives)

    def reached_of(self, piles: tuple[int, ...]) -> list[bool]:
        """A new list: for each face, whether a card of that face is on a foundation."""
        hit = self.reached_cache.get(piles)
        if hit is None:
            hit = [False] * FACES
            for pile, h in enumerate(piles):
                s = (pile // self.decks) * 13
                for r in range(h):
                    hit[s + r] = True
            if len(self.reached_cache) < 200_000:
                self.reached_cache[piles] = hit
        return hit[:]

    def is_safe(self, x: int, piles: list[int]) -> bool:
        for need in self.safe_need[x]:
            for p, h in need:
                if piles[p] < h:
                    break
            else:
                return True
        return False

    def target_pile(self, x: int, piles: list[int] | tuple[int, ...]) -> int:
        """The pile that takes face ``x`` now (the first, as the engine picks), or -1."""
        need = RANK[x] - 1
        for p in self.suit_piles[SUIT[x]]:
            if piles[p] == need:
                return p
        return -1

    def upnext(self, piles: list[int] | tuple[int, ...]) -> dict[int, int]:
        """Face → pile for every face that may go to a foundation now (the first pile
        of its suit that takes it, as the engine picks)."""
        result: dict[int, int] = {}
        decks = self.decks
        for pile, h in enumerate(piles):
            if h < KING:
                face = (pile // decks) * 13 + h
                if face not in result:
                    result[face] = pile
        return result

    def up_of(self, piles: tuple[int, ...]) -> tuple[dict[int, int], dict[int, int]]:
        """``(upnext, safe)`` for foundation heights ``piles``: face → pile for every
        face that may go up now, and the subset the safe rule lets go up by itself.

        Memoised: the foundations take only a few thousand distinct height vectors in
        a whole solve, and this is asked at every node (it was a tenth of the time when
        recomputed each time)."""
        hit = self.up_cache.get(piles)
        if hit is None:
            upnext = self.upnext(piles)
            plist = list(piles)
            safe = {x: t for x, t in upnext.items() if self.is_safe(x, plist)}
            hit = (upnext, safe)
            if len(self.up_cache) < 200_000:
                self.up_cache[piles] = hit
        return hit

    def pile_notation(self, pile: int) -> str:
        suit = pile // self.decks
        number = str(pile % self.decks + 1) if self.decks > 1 else ""
        return f"F{SUIT_LETTERS[suit]}{number}"


def settle(
    spec: Spec,
    cols: list[bytes],
    downs: list[int],
    piles: list[int],
    talon: bytes,
    p: int,
    out: list[str] | None,
    touched: tuple[int, ...] | None = None,
) -> tuple[bytes, int]:
    """Turn up face-down tops and play every *safe* foundation move, to a fixed point.

    A flip only adds options (nothing moves onto or off a face-down card), so turning
    a card up at once never loses a win; with ``auto_flip`` off the flip is written out
    as ``Uc``. Foundation moves are made only when :meth:`Spec.is_safe` proves them
    harmless. ``out`` receives the notation of what was done, or is None in the search.

    ``touched``: the columns a move changed, when the rest of the position was already
    settled. Only they can hold a new face-down top or a newly safe card while the
    foundations stay as they were, so the other columns are looked at only once a card
    has gone up (which can make other tops safe). This is what keeps settling cheap.
    """
    ncols = spec.ncols
    flip_notation = out is not None and not spec.auto_flip
    safe = spec.up_of(tuple(piles))[1]
    scan: tuple[int, ...] | range = range(ncols) if touched is None else touched
    waste = spec.waste_auto
    while True:
        raised = False
        for c in scan:
            col = cols[c]
            if not col:
                continue
            x = col[-1]
            if x < DOWN and x not in safe:
                continue
            while col:
                x = col[-1]
                if x >= DOWN:
                    x -= DOWN
                    col = col[:-1] + BYTE[x]
                    downs[c] -= 1
                    if flip_notation and out is not None:
                        out.append(f"U{c + 1}")
                t = safe.get(x, -1)
                if t < 0:
                    break
                piles[t] += 1
                safe = spec.up_of(tuple(piles))[1]
                col = col[:-1]
                raised = True
                if out is not None:
                    out.append(f"{c + 1}>F")
            cols[c] = col
        if waste:
            while p:
                t = safe.get(talon[p - 1], -1)
                if t < 0:
                    break
                piles[t] += 1
                safe = spec.up_of(tuple(piles))[1]
                talon = talon[: p - 1] + talon[p:]
                p -= 1
                raised = True
                if out is not None:
                    out.append("W>F")
        if not raised:
            return talon, p
        scan = range(ncols)


def finished(state: State) -> bool:
    """Won, or the auto-complete condition of docs/rules.md (every card face up, stock and
    waste empty, each column strictly descending): then the rest goes up by itself."""
    cols, downs, _piles, talon, _p, _rec = state
    if talon or any(downs):
        return False
    for col in cols:
        prev = 99
        for x in col:
            r = RANK[x]
            if r >= prev:
                return False
            prev = r
    return True


def _draws(spec: Spec, n: int, p: int, q: int, recycled: int, out: list[str]) -> None:
    """Notation of the draws (and the recycle) that take the waste length from p to q."""
    draw = spec.draw
    if recycled:
        while p < n:
            p = min(p + draw, n)
            out.append("D")
        out.append("R")
        p = 0
    while p < q:
        p = min(p + draw, n)
        out.append("D")
    assert p == q, "a talon target must be reachable by draws"


def apply(spec: Spec, state: State, move: SearchMove, out: list[str] | None) -> State:
    """The position after ``move`` and the safe automatic moves that follow it."""
    cols_t, downs_t, piles_t, talon, p, rec = state
    cols = list(cols_t)
    downs = list(downs_t)
    piles = list(piles_t)
    kind, a, b, c = move[2], move[3], move[4], move[5]
    touched: tuple[int, ...] | None = None  # None: the foundations changed, look at all
    if kind == TAB:
        col = cols[a]
        if out is not None:
            out.append(f"{a + 1}:{len(col) - b}>{c + 1}")
        cols[c] = cols[c] + col[b:]
        cols[a] = col[:b]
        touched = (a, c)
    elif kind == TO_F:
        col = cols[a]
        piles[spec.target_pile(col[-1], piles)] += 1
        cols[a] = col[:-1]
        if out is not None:
            out.append(f"{a + 1}>F")
    elif kind in (TALON_TAB, TALON_F):
        if out is not None:
            _draws(spec, len(talon), p, a, b, out)
        x = talon[a - 1]
        talon = talon[: a - 1] + talon[a:]
        p = a - 1
        rec += b
        if kind == TALON_F:
            piles[spec.target_pile(x, piles)] += 1
            if out is not None:
                out.append("W>F")
        else:
            cols[c] = cols[c] + BYTE[x]
            touched = (c,)
            if out is not None:
                out.append(f"W>{c + 1}")
    else:  # F_TO_TAB
        h = piles[a]
        piles[a] = h - 1
        cols[c] = cols[c] + BYTE[(a // spec.decks) * 13 + h - 1]
        # Lower foundations make nothing newly safe; only the card brought down is new.
        touched = (c,)
        if out is not None:
            out.append(f"{spec.pile_notation(a)}>{c + 1}")
    talon, p = settle(spec, cols, downs, piles, talon, p, out, touched)
    return (tuple(cols), tuple(downs), tuple(piles), talon, p, rec)


def key_of(spec: Spec, state: State) -> object:
    """Transposition key. Columns are interchangeable under every variant's rules (a
    rule never names a column), so they are sorted; foundation heights follow from the
    cards elsewhere and are left out; recycles matter only with a pass limit."""
    cols, _d, _piles, talon, p, rec = state
    if spec.has_stock:
        return (SEP.join(sorted(cols)), talon, p, rec if spec.max_recycles is not None else 0)
    return SEP.join(sorted(cols))


def moves_of(
    spec: Spec, state: State, shuffle: bytes | None = None, reduced: bool = False
) -> list[SearchMove]:
    """The moves worth searching, best first.

    ``shuffle`` (:data:`SHUFFLE_SIZE` random bytes, then a flag byte) breaks ties among
    moves of equal priority differently on each restart of :func:`search`, or, when the
    flag is set, orders the moves at random, priorities ignored.

    Left out, because each yields a position the search has already (or will have)
    under the same key: a whole column moved to an empty column (a King-led group that
    already lies at the bottom of its column), a second empty column as a target, and a
    foundation card brought down that the automatic rule would put straight back.
    """
    cols, downs, piles, talon, p, rec = state
    parents = spec.parents
    fits = spec.fits
    pmask = spec.parent_mask
    tops: dict[int, list[int]] = {}
    topmask = 0
    empty = -1
    for c, col in enumerate(cols):
        if col:
            top = col[-1]
            slot = tops.get(top)
            if slot is None:
                tops[top] = [c]
                topmask |= 1 << top
            else:
                slot.append(c)
        elif empty < 0:
            empty = c
    moves: list[SearchMove] = []
    add = moves.append
    runs_only = spec.runs_only
    upnext = spec.up_of(piles)[0]
    for c, col in enumerate(cols):
        n = len(col)
        if not n:
            continue
        low = downs[c]
        if col[-1] in upnext:
            add((FOUNDATION_PRIO, 0, TO_F, c, 0, 0))
        start = low
        if runs_only:
            i = n - 1
            while i > low and fits[col[i - 1] * DOWN + col[i]]:
                i -= 1
            start = i
        for i in range(start, n):
            x = col[i]
            # One AND skips a card with no parent on any top (most cards), unless it
            # is a King that could go to an empty column.
            if not pmask[x] & topmask and (empty < 0 or not i or RANK[x] != KING):
                continue
            if i == low:
                # Uncovers a face-down card, or empties the column.
                prio, sub = (1, -low) if low else (2, 0)
            else:
                below = col[i - 1]
                # If x already sits on a card it builds on, moving it only helps when
                # that card can then go up (or, rarely, takes the other twin).
                natural = fits[below * DOWN + x]
                prio = (2 if below in upnext else OFF_NATURAL_PRIO) if natural else 3
                sub = 0
                if reduced and prio == OFF_NATURAL_PRIO:
                    continue  # not in the reduced game (Search), nor to an empty column
            if pmask[x] & topmask:
                for par in parents[x]:
                    ds = tops.get(par)
                    if ds is not None:
                        for d in ds:
                            if d != c:
                                add((prio, sub, TAB, c, i, d))
            if empty >= 0 and i and RANK[x] == KING:
                add((prio + 1 if prio > 1 else prio, sub, TAB, c, i, empty))
    if talon:
        n = len(talon)
        draw = spec.draw
        cands: list[tuple[int, int]] = []
        if p:
            cands.append((p, 0))
        q = p
        while q < n:
            q = min(q + draw, n)
            cands.append((q, 0))
        if spec.max_recycles is None or rec < spec.max_recycles:
            # After a recycle the waste lengths reachable are draw, 2·draw, …, n; those
            # reachable without it are as good (same position, fewer passes used).
            reached = {q for q, _ in cands}
            q = 0
            while q < n:
                q = min(q + draw, n)
                if q not in reached:
                    cands.append((q, 1))
        for q, recycled in cands:
            x = talon[q - 1]
            cost = 0 if q == p else 1 + recycled  # prefer not to spend a pass
            if x in upnext:
                add((cost, 1, TALON_F, q, recycled, 0))
            for par in parents[x]:
                ds = tops.get(par)
                if ds is not None:
                    for d in ds:
                        add((3 + cost, 1, TALON_TAB, q, recycled, d))
            if empty >= 0 and RANK[x] == KING:
                add((3 + cost, 1, TALON_TAB, q, recycled, empty))
    if spec.f2t:
        plist = list(piles)
        for pile, h in enumerate(piles):
            if not h:
                continue
            x = (pile // spec.decks) * 13 + h - 1
            plist[pile] = h - 1
            safe = spec.target_pile(x, plist) == pile and spec.is_safe(x, plist)
            plist[pile] = h
            if safe:
                continue  # the automatic rule would put it straight back
            for par in parents[x]:
                ds = tops.get(par)
                if ds is not None:
                    for d in ds:
                        add((7, 0, F_TO_TAB, pile, 0, d))
            if empty >= 0 and h == KING:
                add((7, 0, F_TO_TAB, pile, 0, empty))
    if shuffle is None:
        moves.sort()
    elif shuffle[SHUFFLE_SIZE]:  # a run that ignores the priorities altogether
        moves.sort(key=lambda m: (shuffle[_mix(m)], m))
    else:
        moves.sort(key=lambda m: (m[0], shuffle[_mix(m)], m))
    return moves


SHUFFLE_SIZE: Final = 4096


def _mix(m: SearchMove) -> int:
    """An index into a shuffle table for move ``m``."""
    return (m[2] * 1299709 + m[3] * 7919 + m[4] * 104729 + m[5] * 31) & (SHUFFLE_SIZE - 1)


def may_lock(spec: Spec, parent: State, move: SearchMove, child: State) -> bool:
    """Whether ``move`` may have turned a position the deadlock test passes into one
    it fails, so that the test is worth running on ``child``.

    A move that puts a card ``g`` on a card ``q`` takes ``q`` out of reach until ``g``
    leaves it again; when another card ``g`` builds on is a top of ``child``, ``g``
    can always leave, and the test passes on ``child`` whenever it passed on
    ``parent``. Skipping the test never costs soundness (it only prunes), just
    pruning: everything else (foundation moves, a King to an empty column, a card
    put on its only possible base) is tested.
    """
    kind = move[2]
    if kind == TAB:
        g = parent[0][move[3]][move[4]]
        if RANK[g] == KING:
            return True
    elif kind == TALON_TAB:
        g = parent[3][move[3] - 1]
        if RANK[g] == KING:
            return True
    else:
        # A card brought down can go straight back up (nothing it covers is lost);
        # a foundation move takes a possible base out of play.
        return kind != F_TO_TAB
    dst = move[5]
    cols = child[0]
    for par in spec.parents[g]:
        for c, col in enumerate(cols):
            if c != dst and col and col[-1] == par:
                return False
    return True


#: The deadlock test is run on every child :func:`may_lock` picks while it proves at
#: least one in ADAPT_RATIO of them lost (and on the first ADAPT_WARMUP), else on one
#: in ADAPT_SAMPLE: where it never fires (Australian, most of Klondike) it would
#: double the cost of a node for nothing. Skipping it never costs soundness.
ADAPT_WARMUP: Final = 200
ADAPT_RATIO: Final = 10
ADAPT_SAMPLE: Final = 16
#: What one deadlock test adds to the node count: it costs about as much as expanding
#: three positions, and a budget should bound time.
TEST_COST: Final = 1


class Search:
    """A depth-first search from ``root`` (already settled and not finished) that can
    be stopped at a node count and resumed: :meth:`run` continues where the last call
    stopped. Iterative rather than recursive: a line can be hundreds of moves deep.

    ``nodes`` counts the positions reached for the first time (the transposition table
    ``seen`` holds their keys); ``path`` is the line to the current position (to a
    finished one after FOUND).

    A child the deadlock test (``deadlock.py``) proves lost is counted and remembered
    but not expanded; it is tested only when :func:`may_lock` says the move may have
    locked it.

    ``reduced``: never make a move of priority :data:`OFF_NATURAL_PRIO` (a group taken
    off a card it builds on that cannot go up next). Such a move is occasionally
    needed (the card left on top then takes the group's twin), so a reduced run that
    ends EXHAUSTED proves nothing; but it is rarely useful and is the most frequent
    move in hard Yukon deals, so the shuffled probes search the reduced game
    (Yukon seeds 0-999 at 20,000 nodes: 66 unknown instead of 80, no proof lost).
    """

    __slots__ = (
        "index",
        "nodes",
        "path",
        "pending",
        "reduced",
        "seen",
        "shuffle",
        "spec",
        "states",
    )

    def __init__(
        self, spec: Spec, root: State, shuffle: bytes | None = None, reduced: bool = False
    ) -> None:
        self.spec = spec
        self.shuffle = shuffle
        self.reduced = reduced
        self.seen: set[object] = {key_of(spec, root)}
        self.states: list[State] = [root]
        self.pending: list[list[SearchMove]] = [moves_of(spec, root, shuffle, reduced)]
        self.index: list[int] = [0]
        self.path: list[SearchMove] = []
        self.nodes = 0

    def run(self, limit: int, should_stop: Callable[[], bool] | None = None) -> int:
        """Search on until FOUND, EXHAUSTED (every position reachable from the root was
        reached and none is finished: a proof) or OUT_OF_BUDGET (``nodes`` reached
        ``limit``, or ``should_stop()``, polled every 1,024 nodes, said so)."""
        spec = self.spec
        shuffle = self.shuffle
        reduced = self.reduced
        seen = self.seen
        states = self.states
        pending = self.pending
        index = self.index
        path = self.path
        nodes = self.nodes
        stats = spec.lock_stats
        tried, tested, found = stats
        has_stock = spec.has_stock
        limited = spec.max_recycles is not None
        try:
            while states:
                if nodes >= limit:
                    return OUT_OF_BUDGET
                moves = pending[-1]
                i = index[-1]
                if i >= len(moves):
                    states.pop()
                    pending.pop()
                    index.pop()
                    if path:
                        path.pop()
                    continue
                index[-1] = i + 1
                move = moves[i]
                child = apply(spec, states[-1], move, None)
                if has_stock:
                    key: object = (
                        SEP.join(sorted(child[0])),
                        child[3],
                        child[4],
                        child[5] if limited else 0,
                    )
                else:
                    key = SEP.join(sorted(child[0]))
                if key in seen:
                    continue
                seen.add(key)
                nodes += 1
                if finished(child):
                    path.append(move)
                    return FOUND
                if should_stop is not None and not nodes & 1023 and should_stop():
                    return OUT_OF_BUDGET
                if may_lock(spec, states[-1], move, child):
                    # Test while the test pays (it finds a lock in at least one
                    # candidate in ADAPT_RATIO), else only every ADAPT_SAMPLE-th one.
                    tried += 1
                    if (
                        tried <= ADAPT_WARMUP
                        or found * ADAPT_RATIO >= tried
                        or not tried % ADAPT_SAMPLE
                    ):
                        tested += 1
                        if nodes < limit:  # never past the budget
                            nodes += TEST_COST
                        if relaxed_dead(spec, child):
                            found += 1
                            continue
                path.append(move)
                states.append(child)
                pending.append(moves_of(spec, child, shuffle, reduced))
                index.append(0)
            return EXHAUSTED
        finally:
            self.nodes = nodes
            stats[:] = (tried, tested, found)


def search(
    spec: Spec,
    root: State,
    budget: int,
    should_stop: Callable[[], bool] | None = None,
    shuffle: bytes | None = None,
) -> tuple[int, list[SearchMove], int, int]:
    """One depth-first search from ``root`` with a node budget (see :class:`Search`).

    Returns ``(result, path, nodes, stored)``: ``path`` leads to a finished position
    when ``result`` is FOUND; ``stored`` is the transposition table's size.
    """
    run = Search(spec, root, shuffle)
    result = run.run(budget, should_stop)
    return result, run.path if result == FOUND else [], run.nodes, len(run.seen)
