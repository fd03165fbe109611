"""A cheap, sound proof that a position can never be won: the *deadlock* test.

Why: an unwinnable deal is only proved by exhausting its search space, and for Yukon
that space is usually far too large (a few hundred thousand positions and more), so
without a shortcut almost every unwinnable deal ends as ``unknown``. Most of them are
unwinnable for a reason a human sees once pointed at it: a card can never leave the
card it lies on, because everything it could go to — its foundation predecessor, every
card it could be built on — is locked underneath it (directly or down a chain).

The test is a *relaxation*. A card ``k`` lying on card ``b`` stays on ``b`` — whatever
group moves carry the two of them around — until ``k`` itself is taken off ``b``: it
goes to a foundation, or it moves as the *first card of a group*. So, for every card,
it asks whether each of a few events can ever happen, using only conditions every real
line must satisfy:

- ``T[k]`` — ``k`` becomes a top card (is exposed; a face-down card is turned up). True
  now for the tops; later only once the card lying on ``k`` has left it (``S`` or
  ``F`` of that card). Being carried along with a group changes nothing here.
- ``S[k]`` — ``k`` moves as the first card of a group: it must be face up (now, or
  after ``T[k]``) and have a destination: a card it builds on that can be a top at
  some time (``A``), or, a King not at the bottom of its column, an empty column.
  *Own column*: a base ``q`` that lies above ``k`` in ``k``'s column counts only once
  it can have left that column — some card between ``k`` and ``q`` (``q`` included)
  moves as the first card of a group (``S``), or, with foundation → tableau, ``q``
  reaches a foundation. Until then ``q`` is part of the group ``k`` would lead, and a
  group cannot be put on one of its own cards. (Nothing can come between ``k`` and
  ``q`` meanwhile: cards are only ever put on the top, which is ``q`` or above it.)
- ``F[k]`` — ``k`` reaches a foundation: its predecessor (same suit, one rank lower)
  gets there first, and ``k`` is a top at some time (``T[k]``).
- ``A[q]`` — ``q`` can take a card at some time: a column card once it is a top
  (``T[q]``); a stock or waste card once it can be played into a column (it has a
  destination as in ``S``); with foundation → tableau, a card that reached a
  foundation (it may come back).
- an empty column appears once the bottom card of some column leaves (``S`` or
  ``F``), or if one exists now.

Each event in a real line happens only after the events its condition names, so by
induction over the line every event of a winning line is in the *least* fixed point of
these rules. If some card's ``F`` is not in it, no line wins: **unwinnable**. Every rule
only ever *adds* possibilities compared with the real game (timing, draw order, run
shape, which twin of a double deck, that a card takes one card at a time, all
ignored), so the test never claims a winnable position is lost; it just misses the
subtler dead ends.

The fixed point is computed with a work list: each event is set once and pushes only
the events it can enable, so a call costs a few dozen microseconds — cheap enough for
the search to call it on the positions a move may have locked (``search.py``).

*Occupancy* (:func:`split_dead`; single deck, no foundation → tableau). The fixed point
lets every card use every base "at some time"; but a base takes one card at a time,
and a card stays on it until it leaves: goes up, or moves as a group's first card on
to another base (a King also to an empty column). Take a column card ``q`` that two
cards ``i`` and ``j``, neither a King, can be built on. In every line, either ``j``
never arrives on ``q`` or ``i`` is there first (from the start, or arriving earlier)
— case A — or the same with ``i`` and ``j`` swapped — case B. In case A, when ``j``
arrives ``i`` has left ``q``: ``F[i]`` happened before, or one of ``i``'s other bases
was a top before. So adding "``j`` may use ``q`` only after ``F[i]`` or ``T`` of one
of ``i``'s other bases" to the rules gives a fixed point that still contains every
event of every case-A line, and likewise for B. If some card's ``F`` is missing
from both, no line wins. Each case is one more fixed point: :func:`dead` (the root of
every solve, the tests) tries every such base, and the search uses the plain test only
(:func:`relaxed_dead`).

*Only the cases that can matter.* The work list sets each ``S`` from one base (or an
empty column), so the plain fixed point comes with one well-founded derivation: the
base each card was moved onto (``via``; where a card has a choice, one no other card
was moved onto is preferred). A case's condition only restricts one card's use of one
base; if the derivation did not move that card onto that base, the same derivation
holds under the condition, the case's fixed point is the plain one, and the case is
live. So a base can decide a split only if the derivation moved *both* its cards onto
it, and only those bases are tried: the same answers (checked on random positions)
with about a third of the fixed points on a position it does not prove lost.

*Nested split* (:func:`deep_dead`). A live case can be split again on another base:
each line of the case is in one of the two sub-cases, so the case is lost if both
sub-cases are (each by its fixed point, or split again). Conditions only accumulate,
so every fixed point still holds every event of every line of its case. Three levels
prove positions that the single split does not (Yukon seed 511 in 9 fixed points);
the tree costs tens to hundreds of fixed points, so the solver runs it once, at the
root of a deal its first run has not decided, with a cap counted in the budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .faces import DOWN, FACES, KING, RANK

if TYPE_CHECKING:
    from .search import Spec, State

#: Byte translation of a column card to its face (face-down cards are face + DOWN).
_FACE: Final = bytes(x % DOWN for x in range(256))
#: The faces of the four Kings.
_KINGS: Final = tuple(s * 13 + 12 for s in range(4))
#: Work-list event kinds (code = card * 4 + kind).
_T = 0  # the card becomes a top
_S = 1  # the card moves as the first card of a group
_F = 2  # the card reaches a foundation
_A = 3  # a stock or waste card can be played into a column


def _closure(
    spec: Spec,
    state: State,
    cases: tuple[tuple[int, int, int, tuple[int, ...]], ...] = (),
    via: list[int] | None = None,
) -> bool:
    """The least fixed point of the module docstring's rules; True if some card's ``F``
    is not in it (the position is lost).

    Each of ``cases``, ``(gk, gq, gi, gother)``, adds one *occupancy* condition (module
    docstring): card ``gk`` may move onto card ``gq`` only after card ``gi`` has
    reached a foundation (``F``) or one of the cards ``gother`` (``gi``'s other bases)
    has been a top (``T``; ``A`` for a
    stock or waste card). Cards are indices into the columns joined bottom to top,
    then the talon.

    ``via`` (a list of ``-1`` per card, or None): receives, for each column card whose
    ``S`` was set, the base it was set by (the index of the card it may move onto;
    ``-2`` an empty column or a foundation card coming back). That is one
    well-founded derivation of the fixed point, which :func:`split_dead` uses to skip
    the cases that cannot change it."""
    cols, _downs, piles, talon, _p, _rec = state
    work: list[int] = []  # the events to set, as card * 4 + kind
    push = work.append
    below: list[int] = []  # the card under k in its column, -1 at the bottom
    top: list[int] = []  # the top card of k's column
    empty = False
    base = 0
    for col in cols:
        n = len(col)
        if not n:
            empty = True
            continue
        below.append(-1)
        below.extend(range(base, base + n - 1))
        base += n
        top.extend([base - 1] * n)
        push((base - 1) * 4 + _T)
    ncol = base
    laid = b"".join(cols)
    movable = [x < DOWN for x in laid]  # face up now (may move as a group's first card)
    face = list(laid.translate(_FACE) + talon)
    total = len(face)
    reached = spec.reached_of(piles)
    slots: list[list[int]] = [[] for _ in range(FACES)]
    for k, x in enumerate(face):
        slots[x].append(k)
    children = spec.children
    parents = spec.parents
    # Cards whose only bases so far lie above them in their own column: tried again
    # whenever a card moves off (S) or a new base appears.
    waiting: list[int] = []
    waits = [False] * total
    f2t = spec.f2t
    T = [False] * total
    S = [False] * total
    used = [False] * total if via is not None else T  # bases some card moved onto
    F = [False] * total
    A = [False] * total
    # avail[o]: some card of face o can take a card at some time; based[x]: some face
    # x builds on is available (so a card of face x has a destination).
    avail = [False] * FACES
    based = [False] * FACES
    kings = [k for x in _KINGS for k in slots[x]]
    pending = total
    for k in range(ncol, total):
        # A stock or waste card goes up once its predecessor has.
        x = face[k]
        if RANK[x] == 1 or reached[x - 1]:
            push(k * 4 + _F)
    if f2t:
        # A foundation card may come back down and take a card.
        for x in range(FACES):
            if reached[x]:
                avail[x] = True
                for c in children[x]:
                    based[c] = True
        for k in range(total):
            if based[face[k]]:
                push(k * 4 + (_S if k < ncol else _A))
    if empty:
        for j in kings:
            push(j * 4 + (_S if j < ncol else _A))
    pop = work.pop
    while work:
        code = pop()
        k = code >> 2
        kind = code & 3
        if kind == _S:
            # Conditions: face up (or exposed) and a destination.
            if S[k] or not (movable[k] or T[k]):
                continue
            x = face[k]
            b = below[k]
            if not (empty and b >= 0 and RANK[x] == KING):
                if not based[x]:
                    continue
                # A base lying above k in k's own column is no destination for k
                # until it has left that column (module docstring, "own column").
                ok = False
                src = -2
                for o in parents[x]:
                    if f2t and reached[o]:
                        ok = True
                        src = -2
                        break
                    for j in slots[o]:
                        if cases:
                            # Occupancy: gq is gk's base only once gi has left it.
                            free = True
                            for gk, gq, gi, gother in cases:
                                if j == gq and k == gk and not F[gi]:
                                    free = False
                                    for o2 in gother:
                                        if T[o2] if o2 < ncol else A[o2]:
                                            free = True
                                            break
                                    if not free:
                                        break
                            if not free:
                                continue
                        if j >= ncol:
                            if not A[j]:
                                continue
                        elif not (T[j] and (j < k or j > top[k] or True in S[k + 1 : j + 1])):
                            continue
                        ok = True
                        src = j
                        # Recording: prefer a base no other card was moved onto, so
                        # that split_dead has fewer cases to try.
                        if via is None or not used[j]:
                            break
                    if ok and (via is None or src < 0 or not used[src]):
                        break
                if not ok:
                    if not waits[k]:
                        waits[k] = True
                        waiting.append(k)
                    continue
                if via is not None:
                    via[k] = src
                    if src >= 0:
                        used[src] = True
            elif via is not None:
                via[k] = -2
            S[k] = True
            if waiting:
                # k leaving may release a base above a waiting card.
                for j in waiting:
                    if not S[j]:
                        push(j * 4 + _S)
            if b >= 0:
                if not T[b]:
                    push(b * 4 + _T)
            elif not empty:
                empty = True
                for j in kings:
                    push(j * 4 + (_S if j < ncol else _A))
        elif kind == _T:
            if T[k]:
                continue
            T[k] = True
            x = face[k]
            if RANK[x] == 1 or reached[x - 1]:
                push(k * 4 + _F)
            if not S[k]:
                push(k * 4 + _S)
            if not avail[x]:
                avail[x] = True
                for c in children[x]:
                    if not based[c]:
                        based[c] = True
                        for j in slots[c]:
                            if j >= ncol:
                                push(j * 4 + _A)
                            elif movable[j] or T[j]:
                                push(j * 4 + _S)
            if waiting:
                # k may be a base a waiting card can use (another twin, or its other
                # base when one lies above it).
                for j in waiting:
                    if not S[j]:
                        push(j * 4 + _S)
        elif kind == _F:
            if F[k]:
                continue
            x = face[k]
            if k < ncol and not T[k]:
                continue
            if RANK[x] > 1 and not reached[x - 1]:
                continue
            F[k] = True
            pending -= 1
            if not pending:
                return False
            if k < ncol:
                b = below[k]
                if b >= 0:
                    if not T[b]:
                        push(b * 4 + _T)
                elif not empty:
                    empty = True
                    for j in kings:
                        push(j * 4 + (_S if j < ncol else _A))
            for gk, _gq, gi, _gother in cases:
                if k == gi and gk < ncol and not S[gk]:
                    push(gk * 4 + _S)  # gk may now use gq (occupancy)
            if not reached[x]:
                reached[x] = True
                if RANK[x] < KING:
                    for j in slots[x + 1]:
                        push(j * 4 + _F)
            if f2t:
                if not avail[x]:
                    avail[x] = True
                    for c in children[x]:
                        if not based[c]:
                            based[c] = True
                            for j in slots[c]:
                                push(j * 4 + (_S if j < ncol else _A))
                for j in waiting:
                    if not S[j]:
                        push(j * 4 + _S)
        else:  # _A: a stock or waste card can be played into a column
            if A[k]:
                continue
            x = face[k]
            if not based[x] and not (empty and RANK[x] == KING):
                continue
            A[k] = True
            if not avail[x]:
                avail[x] = True
                for c in children[x]:
                    if not based[c]:
                        based[c] = True
                        for j in slots[c]:
                            push(j * 4 + (_S if j < ncol else _A))
            for j in waiting:
                if not S[j]:
                    push(j * 4 + _S)
    return pending > 0


def dead(spec: Spec, state: State) -> bool:
    """True only if ``state`` can certainly never be won (see the module docstring):
    the relaxation's fixed point, then, if that leaves every card a way up, the
    occupancy case split on every base two cards compete for."""
    via = [-1] * (sum([len(col) for col in state[0]]) + len(state[3]))
    return _closure(spec, state, (), via) or split_dead(spec, state, via)


def relaxed_dead(spec: Spec, state: State) -> bool:
    """The relaxation alone (no occupancy split): one fixed point."""
    return _closure(spec, state)


def split_dead(spec: Spec, state: State, via: list[int] | None = None) -> bool:
    """The occupancy case split (module docstring), for a position the relaxation
    passes: True if it proves the position lost.

    For a column card ``q`` that two cards ``i`` and ``j`` (no King) could be put on,
    every line puts ``i`` there first (or never ``j``) or ``j`` first (or never
    ``i``); whichever comes first must have left ``q`` — gone up, or moved on to one of
    its other bases — before the other arrives. If the fixed point is lost under each
    of the two conditions, so is the position.

    Only single-deck games without foundation → tableau (twins and cards coming back
    would need more cases). Bases that cannot matter are skipped: those with a King
    among the two cards (it may leave for an empty column), those one of the two lies
    on now (the plain rules already make the other wait), those where a card's other
    base is a top now (its case is the plain fixed point). The rest are tried most
    promising first — the other bases face down, ``q`` a top — so that a proof, if
    there is one, comes early; each case costs one fixed point.

    ``via``: the bases of one derivation of the plain fixed point (:func:`_closure`),
    or None to compute it here. A case that makes card ``k`` wait for ``q`` changes
    nothing unless that derivation moved ``k`` onto ``q`` — otherwise the same
    derivation holds under the case's condition, which only restricts ``k``'s use
    of ``q`` — so a base is tried only when both cards moved onto it there.
    """
    if spec.decks != 1 or spec.f2t:
        return False
    if via is None:
        via = [-1] * (sum([len(col) for col in state[0]]) + len(state[3]))
        if _closure(spec, state, (), via):
            via = None  # lost already: no derivation to filter by
    return _split(spec, state, via)[0]


def _split(
    spec: Spec, state: State, via: list[int] | None, depth: int = 1, cap: int = 1 << 30
) -> tuple[bool, int]:
    """:func:`split_dead`'s cases; returns whether one base proves the position lost,
    and the number of fixed points run (counting the plain one)."""
    if spec.decks != 1 or spec.f2t:
        return False, 1
    cols = state[0]
    talon = state[3]
    laid = b"".join(cols)
    ncol = len(laid)
    face = laid.translate(_FACE) + talon
    total = len(face)
    slots: list[list[int]] = [[] for _ in range(FACES)]
    for k in range(total):
        slots[face[k]].append(k)
    ontop = [-1] * total  # the card lying directly on a column card, -1 for a top
    base = 0
    for col in cols:
        n = len(col)
        if not n:
            continue
        for k in range(base, base + n - 1):
            ontop[k] = k + 1
        base += n
    children = spec.children
    parents = spec.parents
    cands: list[tuple[int, int, int, int, tuple[int, ...], tuple[int, ...]]] = []
    for q in range(ncol):
        kids = [j for c in children[face[q]] for j in slots[c]]
        if len(kids) != 2:
            continue
        i = kids[0]
        j = kids[1]
        if RANK[face[i]] == KING or RANK[face[j]] == KING or ontop[q] in (i, j):
            continue
        other_i = tuple([o for p in parents[face[i]] for o in slots[p] if o != q])
        other_j = tuple([o for p in parents[face[j]] for o in slots[p] if o != q])
        hidden = True  # every other base face down (or in the talon)
        skip = False
        for o in other_i + other_j:
            if o < ncol:
                if ontop[o] < 0:
                    skip = True
                    break
                if laid[o] < DOWN:
                    hidden = False
        if skip:
            continue
        top = ontop[q] < 0
        if hidden:
            score = 0 if top else (1 if laid[q] < DOWN else 2)
        elif top:
            score = 3
        else:
            continue  # measured: such a base (other bases face up) never decided a split
        cands.append((score, q, i, j, other_i, other_j))
    cands.sort()
    runs = [1, cap]
    return _cases_lost(spec, state, (), via, cands, depth, total, runs), runs[0]


def _cases_lost(
    spec: Spec,
    state: State,
    cases: tuple[tuple[int, int, int, tuple[int, ...]], ...],
    via: list[int] | None,
    cands: list[tuple[int, int, int, int, tuple[int, ...], tuple[int, ...]]],
    depth: int,
    total: int,
    runs: list[int],
) -> bool:
    """Whether some base of ``cands`` splits the case ``cases`` (whose fixed point is
    live, with derivation ``via``) into two lost ones, each lost by its fixed point
    or split again, down to ``depth`` levels. ``runs[0]`` counts the fixed points;
    none is started once it reaches ``runs[1]`` (then the answer is False)."""
    for _score, q, i, j, other_i, other_j in cands:
        if runs[0] >= runs[1]:
            return False
        if via is not None and (via[i] != q or via[j] != q):
            continue  # a case that cannot change the fixed point (split_dead)
        if any([case[1] == q for case in cases]):
            continue  # split on already
        lost = True
        for gk, gi, gother in ((j, i, other_i), (i, j, other_j)):
            sub = (*cases, (gk, q, gi, gother))
            sub_via = [-1] * total if depth > 1 else None
            runs[0] += 1
            if _closure(spec, state, sub, sub_via):
                continue
            if depth > 1 and _cases_lost(spec, state, sub, sub_via, cands, depth - 1, total, runs):
                continue
            lost = False
            break
        if lost:
            return True
    return False


def deep_dead(spec: Spec, state: State, depth: int, cap: int) -> tuple[bool, int]:
    """The occupancy split nested ``depth`` levels deep (a live case split again on
    another base, see :func:`split_dead`), with at most about ``cap`` fixed points:
    whether it proves ``state`` lost, and the fixed points it ran."""
    via = [-1] * (sum([len(col) for col in state[0]]) + len(state[3]))
    if _closure(spec, state, (), via):
        return True, 1
    return _split(spec, state, via, depth, cap)
