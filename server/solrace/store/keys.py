"""Key layout: the one place that spells Redis key names.

Every key of a room starts with ``<prefix>{room:<room_id>}`` so that all of them hash to
the same Redis Cluster slot (only the text between the first ``{`` and the next ``}``
is hashed). That is what lets one Lua script touch a room's log, version counter and
stream atomically on a cluster too. Global keys (join codes, the listing, results) carry
no room tag and are only ever used by single-key commands.

The prefix goes in front of everything (``solrace:{room:R}:meta``), so it must not
contain braces itself: a ``{`` in the prefix would become the hash tag of every key and
put the whole deployment in one slot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from solrace.digits import is_digits

__all__ = ["Keys", "RoomKeys"]

_MAX_ID = 200


def _check_name(kind: str, value: str) -> str:
    """Reject names that would break the key layout; these are caller bugs."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{kind} must be a non-empty str")
    if len(value) > _MAX_ID:
        raise ValueError(f"{kind} is longer than {_MAX_ID} characters")
    if "{" in value or "}" in value:
        raise ValueError(f"{kind} must not contain braces (they are the cluster hash tag)")
    if any(c.isspace() for c in value):
        raise ValueError(f"{kind} must not contain whitespace")
    return value


@dataclass(frozen=True, slots=True)
class RoomKeys:
    """Names of one room's keys; all share the ``{room:<id>}`` hash tag."""

    room_id: str
    base: str

    @property
    def meta(self) -> str:
        """Caller's room metadata (opaque bytes). Also the room's TTL anchor."""
        return f"{self.base}:meta"

    @property
    def code(self) -> str:
        """The room's join code, so ``expire_room`` can expire ``code:<CODE>`` too."""
        return f"{self.base}:code"

    @property
    def ver(self) -> str:
        """Version counter: the id of the last event in ``events``."""
        return f"{self.base}:ver"

    @property
    def chain(self) -> str:
        """The chain value after the last event (see ``lib.lua``, ``append_event``)."""
        return f"{self.base}:chain"

    @property
    def events(self) -> str:
        """Redis Stream of room events, entry ids ``0-<version>``, field ``e``."""
        return f"{self.base}:events"

    @property
    def tokens(self) -> str:
        """Hash racer_id -> sha256 hex of the racer's secret token."""
        return f"{self.base}:tokens"

    @property
    def nodes(self) -> str:
        """Set of the node ids that serve the room (Store.join_room_nodes), or served
        it until they died or drained and no node took it up since (a node taking it
        up removes them, Store.leave_room_nodes, as does a node serving on beside them
        when it drains, Store.leave_rooms); a live node that stops serving the room
        leaves it. A node tails the room's stream only when another node is in it."""
        return f"{self.base}:nodes"

    @property
    def over(self) -> str:
        """The last round whose race is over (a number; absent = none): written with
        the ``race_over`` event, read by every move append, which refuses that round's
        moves from then on."""
        return f"{self.base}:over"

    @property
    def closed(self) -> str:
        """Hash of the move logs closed to moves (field: the log's key name): written
        with the event that ends a racer's race (resigned, timed out, gone past the
        grace) and by a finish's own append, read by every move append, which refuses
        a closed log's moves. A node acting on a stale copy of the room (paused, cut
        off from Redis) could otherwise store the move of a racer who has left (and
        that racer could win), or an undo after a finish."""
        return f"{self.base}:closed"

    @property
    def keyset(self) -> str:
        """Set of the room's dynamically named keys (logs, place counters, finish times)."""
        return f"{self.base}:keys"

    def log(self, log_name: str) -> str:
        """One racer's move log (a list of opaque entries)."""
        return f"{self.base}:log:{_check_name('log_name', log_name)}"

    def places(self, counter: str) -> str:
        """A finishing-place counter (INCR gives 1 to the winner)."""
        return f"{self.base}:places:{_check_name('finish_counter', counter)}"

    def finish_time(self, counter: str) -> str:
        """The finish time (race clock, ms) of the last place handed out on a counter:
        no later place may be recorded with an earlier time (append_move.lua)."""
        return f"{self.base}:finish_at:{_check_name('finish_counter', counter)}"

    def round_of(self, key: str) -> int | None:
        """The round a key of the key set belongs to — a move log, a place counter or
        a finish time, whose names begin with the round (``log:3:2``, ``places:3``;
        the caller names them so: rooms/records.py) — or None for any other name."""
        for kind in (":log:", ":places:", ":finish_at:"):
            head = self.base + kind
            if key.startswith(head):
                number = key[len(head) :].split(":", 1)[0]
                return int(number) if is_digits(number) else None
        return None

    def fixed(self) -> tuple[str, ...]:
        """The keys whose names do not depend on the caller (everything but keyset members):
        meta first (the TTL anchor), the key set last (expire_room.lua relies on both)."""
        return (
            self.meta,
            self.code,
            self.ver,
            self.chain,
            self.events,
            self.tokens,
            self.nodes,
            self.over,
            self.closed,
            self.keyset,
        )


@dataclass(frozen=True, slots=True)
class Keys:
    """Key names under one prefix (default ``solrace:``; tests use a random one)."""

    prefix: str = "solrace:"

    def __post_init__(self) -> None:
        if "{" in self.prefix or "}" in self.prefix:
            raise ValueError("key prefix must not contain braces")

    def room(self, room_id: str) -> RoomKeys:
        """The keys of room ``room_id``."""
        rid = _check_name("room_id", room_id)
        return RoomKeys(rid, f"{self.prefix}{{room:{rid}}}")

    def code(self, code: str) -> str:
        """``code:<CODE>`` -> room id (global, single-key)."""
        return f"{self.prefix}code:{_check_name('code', code)}"

    def seat(self, token_sha256_hex: str) -> str:
        """``seat:<digest>`` -> the room a client-proposed token was seated in, for a
        while (global, single-key): how a client whose ``joined`` reply was lost finds
        the room it does not know (Store.claim_seat)."""
        return f"{self.prefix}seat:{_check_name('token digest', token_sha256_hex)}"

    @property
    def listed(self) -> str:
        """Sorted set of listed open rooms, score = creation time in ms."""
        return f"{self.prefix}rooms:listed"

    def quick(self, variant: str) -> str:
        """Sorted set of one variant's listed quick rooms that are lobbies somebody is in,
        score = creation time in ms: what ``quick`` reads (single-key)."""
        return f"{self.prefix}rooms:quick:{_check_name('variant', variant)}"

    @property
    def archive_notes(self) -> str:
        """Sorted set of rooms whose race may end (or has ended) without its result
        archived yet, each scored with the last round noted: written before a countdown
        and before a race_over, removed once the result of that round (or a later
        one) is saved; every node sweeps it (single-key, or a one-key script)."""
        return f"{self.prefix}rooms:archive_notes"

    @property
    def unarchived(self) -> str:
        """The set of noted rooms that releases before :attr:`archive_notes` wrote (no
        round: a room alone). Still read and cleared by the sweep, so that a rolling
        upgrade loses no note an earlier release wrote (single-key)."""
        return f"{self.prefix}rooms:unarchived"

    @property
    def unlisted(self) -> str:
        """Sorted set of rooms that may be lobbies the listing does not hold, score =
        the last round noted: private rooms (noted as they are created, 0) and rooms
        back in their lobby for a rematch (noted with the round its reset begins,
        before the reset), so that the orphan sweep finds one whose every node died —
        no listing names it — and takes it up; the sweep drops a room that is not a
        lobby any more, unless the note is of a later round (single-key). Not
        ``rooms:unlisted``, the set an unreleased build wrote: a ZADD on it failed."""
        return f"{self.prefix}rooms:lobby_notes"

    def lease(self, node_id: str) -> str:
        """A live node's lease (expires unless the node renews it; single-key)."""
        return f"{self.prefix}node:{_check_name('node_id', node_id)}"

    def handed_off(self, node_id: str) -> str:
        """Set by a node that drained (Store.hand_off): its rooms were handed off on
        purpose, not left by a death, so the node that takes one up says so at INFO
        (single-key; not under ``node:``, which :attr:`leases` scans)."""
        return f"{self.prefix}handoff:{_check_name('node_id', node_id)}"

    @property
    def leases(self) -> str:
        """The SCAN pattern of every node's lease (:meth:`lease`), the prefix's glob
        characters escaped."""
        return re.sub(r"([*?\[\]\\])", r"\\\1", self.prefix) + "node:*"

    def node_of(self, lease_key: str) -> str:
        """The node id a lease key (:meth:`lease`) names."""
        return lease_key[len(self.prefix) + len("node:") :]

    def wake(self, node_id: str) -> str:
        """A node's wake-up stream: room ids another node has started serving, so the
        node starts tailing them (Store.wake; single-key)."""
        return f"{self.prefix}wake:{_check_name('node_id', node_id)}"

    @property
    def clock(self) -> str:
        """Never written: the key :meth:`solrace.store.Store.time_ms` names so that on
        a cluster every node asks the same master for the time (single-key)."""
        return f"{self.prefix}clock"

    def probe(self, token: str) -> str:
        """The start-up access probe's key (store/probe.py): written, read and deleted
        once, under the prefix, since an ACL may allow only keys under it."""
        return f"{self.prefix}probe:{_check_name('probe token', token)}"

    def result(self, race_id: str) -> str:
        """A finished race's result (never expires)."""
        return f"{self.prefix}result:{_check_name('race_id', race_id)}"
