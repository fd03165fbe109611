"""A cheap, sound proof that a position can never be won: the *deadlock* test.

Why: an unwinnable deal is only proved by exhausting its search space, and for Yukon
that space is usually far too large (a few hundred thousand positions and more), so
without a shortcut almost every unwinnable deal ends as ``unknown``. Most of them are
unwinnable for a simple reason a human sees at once: a card can never leave its column
because everything it could go to — its foundation predecessor, every card it could be
built on — is locked underneath it in the same column (directly or down a chain).

The test is a *relaxation*. For every card it asks whether each of a few events can
ever happen, using only conditions every real line must satisfy:

- ``F[k]`` — card ``k`` reaches a foundation. Needs its predecessor (same suit, one
  rank lower) on a foundation first, and ``k`` to be a top card at that moment: it is
  a top now, or the card above it has gone (``T[k]``), or ``k`` has left its place.
- ``L[k]`` — card ``k`` leaves its place by a tableau move. Either it is carried by the
  face-up card directly below it as part of a group (``L`` of that card), or it moves
  itself (face up now, or turned up once the cards above it have gone) onto a card it
  builds on that is then a top (``A``), or, a King, to a column that has been emptied.
- ``A[q]`` — card ``q`` can ever take a card: it is a top now, the card above it has
  gone, it has moved (then it may be a top where it went), it is in the stock or waste
  (it can be played out), or with foundation → tableau it has reached a foundation.
- ``T[k]`` — the card above ``k`` has gone (by either event), so ``k`` is exposed.

Each event in a real line happens only after the events its condition names (or at
the same moment, for a carried card, whose carrier's own condition holds earlier), so
by induction over the line every event of a winning line is in the *least* fixed point
of these rules. If some card's ``F`` is not in it, no line wins: **unwinnable**. Every
rule only ever *adds* possibilities compared with the real game (draw order, run
shape, which twin of a double deck, where a moved card went, all ignored), so the test
never claims a winnable position is lost; it just misses the subtler dead ends.
"""

from __future__ import annotations

from typing import Final

from .search import DOWN, KING, RANK, SUIT, Spec, State

#: Marks a card that is not in a column (stock, waste).
_NONE: Final = -1


def dead(spec: Spec, state: State) -> bool:
    """True only if ``state`` can certainly never be won (see the module docstring).

    Cost: a few passes over the cards (~50–150 µs for 52 cards), so the search calls
    it at the root and at a sample of nodes rather than everywhere.
    """
    cols, _downs, piles, talon, _p, _rec = state
    decks = spec.decks
    # Per-card arrays over column cards (slots 0..n-1) then talon cards.
    face: list[int] = []
    above: list[int] = []
    below_up: list[int] = []
    is_down: list[bool] = []
    bottom: list[bool] = []
    any_empty = False
    for col in cols:
        if not col:
            any_empty = True
            continue
        base = len(face)
        n = len(col)
        for i, x in enumerate(col):
            bottom.append(not i)
            down = x >= DOWN
            face.append(x - DOWN if down else x)
            is_down.append(down)
            above.append(base + i + 1 if i + 1 < n else _NONE)
            below_up.append(base + i - 1 if i and col[i - 1] < DOWN else _NONE)
    ncol = len(face)
    for x in talon:
        face.append(x)
    total = len(face)
    # on_f[f]: a card of face f is on a foundation now.
    on_f = [False] * 52
    for pile, h in enumerate(piles):
        s = pile // decks
        for r in range(h):
            on_f[s * 13 + r] = True
    # Slots by face, for parents and predecessors.
    slots: list[list[int]] = [[] for _ in range(52)]
    for k in range(total):
        slots[face[k]].append(k)
    f2t = spec.f2t
    parents = spec.parents

    F = [False] * total
    L = [False] * ncol + [True] * (total - ncol)  # a talon card may be played out
    A = [False] * ncol + [True] * (total - ncol)
    T = [above[k] == _NONE for k in range(ncol)]
    # reached[f]: some card of face f is (or may be) on a foundation.
    reached = on_f[:]
    empty_col = any_empty
    pending_f = total
    changed = True
    while changed:
        changed = False
        for k in range(total):
            x = face[k]
            r = RANK[x]
            if k < ncol:
                if not T[k]:
                    a = above[k]
                    if F[a] or L[a]:
                        T[k] = True
                        changed = True
                t = T[k]
                if not L[k]:
                    b = below_up[k]
                    if b != _NONE and L[b]:
                        L[k] = True
                    elif not is_down[k] or t:
                        if r == KING and empty_col:
                            L[k] = True
                        else:
                            for par in parents[x]:
                                for q in slots[par]:
                                    if A[q]:
                                        L[k] = True
                                        break
                                else:
                                    if f2t and on_f[par]:
                                        L[k] = True
                                        break
                                    continue
                                break
                    if L[k]:
                        changed = True
                if not A[k] and (t or L[k] or (f2t and F[k])):
                    A[k] = True
                    changed = True
                if not F[k] and (t or L[k]) and (r == 1 or reached[SUIT[x] * 13 + r - 2]):
                    F[k] = True
                    reached[x] = True
                    pending_f -= 1
                    changed = True
                if not empty_col and (F[k] or L[k]) and bottom[k]:
                    empty_col = True
                    changed = True
            elif not F[k] and (r == 1 or reached[SUIT[x] * 13 + r - 2]):
                F[k] = True
                reached[x] = True
                pending_f -= 1
                changed = True
        if not pending_f:
            return False
    return pending_f > 0
