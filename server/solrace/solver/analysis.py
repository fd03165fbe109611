"""A quick proof that a position is lost: the *departure* relaxation.

Every card must reach a foundation, so every card must leave the column it is in.
Some cards can only leave *leading* their own group — the lowest face-up card above
face-down cards, any face-down card, and (Klondike, where only runs move) a card that
does not build on the card below it. Such a card can leave only to a foundation (all
lower cards of its suit must then be reachable first) or onto a parent (a card it
builds on, which must be reachable at that moment and not already on a foundation for
good), or, a King, to an empty column.

Relax everything else optimistically — any other card may leave whenever it likes, a
reachable card is as good as on top, an empty column is always available to a King —
and propagate to a fixed point which leading cards can ever leave. If some column can
never be cleared, no real line can clear it either: every real line is a schedule in
which each departure happens after the departures it needs, and the fixed point
contains every departure such a schedule can make. The test is therefore sound for
``unwinnable``: it only ever says "lost" for a lost position.
"""

from __future__ import annotations

from .search import DOWN, RANK, SUIT, Spec, State


def dead(spec: Spec, state: State) -> bool:
    """True if the departure relaxation proves the position lost."""
    cols, downs, piles, talon, _p, _rec = state
    fits = spec.fits
    runs_only = spec.runs_only
    where: dict[int, list[tuple[int, int]]] = {}
    lead: list[list[bool]] = []
    height: list[int] = []
    for c, col in enumerate(cols):
        down = downs[c]
        flags: list[bool] = []
        for j, raw in enumerate(col):
            face = raw % DOWN
            slot = where.get(face)
            if slot is None:
                where[face] = [(c, j)]
            else:
                slot.append((c, j))
            must = j <= down or (runs_only and not fits[col[j - 1] * DOWN + raw])
            flags.append(must)
        lead.append(flags)
        h = len(col)
        while h and not flags[h - 1]:
            h -= 1  # riders leave with (or before) the card they sit on
        height.append(h)
    in_talon = set(talon)
    decks = spec.decks
    suit_piles = spec.suit_piles
    f2t = spec.f2t

    def up_count(face: int) -> int:
        """How many copies of ``face`` are on the foundations."""
        r = RANK[face]
        return sum(1 for q in suit_piles[SUIT[face]] if piles[q] >= r)

    def reachable(face: int) -> bool:
        if face in in_talon:
            return True
        return any(height[c] - 1 <= j for c, j in where.get(face, ()))

    def can_leave(c: int, j: int, x: int) -> bool:
        r = RANK[x]
        if r == 13:
            return True
        for p in spec.parents[x]:
            if reachable(p):
                return True
            if f2t and up_count(p):
                return True
        base = SUIT[x] * 13
        for k in range(r - 1):
            face = base + k
            if up_count(face) == 0 and not reachable(face):
                return False
        return True

    del decks
    progress = True
    while progress:
        progress = False
        for c, col in enumerate(cols):
            h = height[c]
            flags = lead[c]
            while h:
                j = h - 1
                if not can_leave(c, j, col[j] % DOWN):
                    break
                h = j
                while h and not flags[h - 1]:
                    h -= 1
                progress = True
            height[c] = h
    return any(height)
