"""Commit–reveal of the deal seed, so racers can check the server did not cheat.

At the countdown the room publishes ``commitment = sha256(seed ‖ salt)``; only
``race_over`` reveals ``seed`` and ``salt``. Anyone can then recompute the commitment,
deal the game with ``solrace.rules.deal(variant, seed, options)``, and replay every
racer's move log. The salt (32 random bytes) makes the commitment impossible to invert
by trying seeds: a seed is only 64 bits.

Byte encoding, fixed so another language can check it: ``seed`` as 8 bytes, unsigned
big-endian; ``salt`` as its 32 raw bytes (it travels as 64 lower-case hex digits); the
commitment is the SHA-256 of those 40 bytes, as 64 lower-case hex digits. Both parts
have a fixed length, so no two (seed, salt) pairs can concatenate to the same bytes.

A *certified* deal (docs/fairness.md) also commits to its certificate, the winning
line a solver found: 32 more bytes, ``sha256`` of the line's moves in canonical
notation joined by ``\n`` (UTF-8), so the commitment is ``sha256(seed ‖ salt ‖
sha256(line))``. The certificate is revealed with the seed, and anyone can replay it
on the deal to check the race was winnable.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from typing import Final

from ._check import is_int_in
from .limits import MAX_ROOM_ID_LEN

SEED_BYTES: Final = 8
SALT_BYTES: Final = 32
#: The largest seed: 8 bytes, unsigned.
MAX_SEED: Final = 2 ** (8 * SEED_BYTES) - 1
_HEX64: Final = re.compile(r"[0-9a-f]{64}")


def is_salt(text: object) -> bool:
    """64 lower-case hex digits (32 bytes)."""
    return isinstance(text, str) and _HEX64.fullmatch(text) is not None


def is_commitment(text: object) -> bool:
    """64 lower-case hex digits (a SHA-256 digest)."""
    return isinstance(text, str) and _HEX64.fullmatch(text) is not None


def certificate_digest(line: Sequence[str]) -> bytes:
    """``sha256`` of a winning line: its moves joined by ``\n``, UTF-8."""
    if not isinstance(line, (list, tuple)) or not all(isinstance(m, str) and m for m in line):
        raise ValueError("a certificate is a sequence of moves in notation")
    return hashlib.sha256("\n".join(line).encode()).digest()


def commitment(seed: int, salt: str, certificate: Sequence[str] | None = None) -> str:
    """``sha256(seed as 8 bytes big-endian ‖ salt bytes [‖ sha256(certificate)])`` in
    lower-case hex.

    ``salt`` is the hex text sent on the wire; the server derives it from the room's
    secret (``solrace.race.fairness.round_salt``: drawing it is not this layer's job).
    """
    if not is_int_in(seed, 0, MAX_SEED):
        raise ValueError(f"a seed is an integer 0 <= seed < 2**64, not {seed!r}")
    if not is_salt(salt):
        raise ValueError("a salt is 64 lower-case hex digits")
    data = seed.to_bytes(SEED_BYTES, "big") + bytes.fromhex(salt)
    if certificate is not None:
        data += certificate_digest(certificate)
    return hashlib.sha256(data).hexdigest()


def verify(
    commitment_hex: str, seed: int, salt: str, certificate: Sequence[str] | None = None
) -> bool:
    """Whether the revealed ``seed``, ``salt`` (and ``certificate``, for a certified
    deal) match the published commitment. Never raises on bad input: a malformed
    reveal simply does not verify."""
    if not is_commitment(commitment_hex):
        return False
    try:
        expected = commitment(seed, salt, certificate)
    except ValueError:
        return False
    return hmac.compare_digest(expected, commitment_hex)


def race_id(room: str, commitment: str | None) -> str:
    """The id of a race everywhere — the server's stored result, the client's saved
    file, ``solrace verify RACE``: the room id and the first 8 hex digits of the
    round's commitment (unique per round: every round draws a new salt)."""
    return f"{room}.{(commitment or 'nocommit')[:8]}"


#: What :func:`race_id` makes of a room id and a commitment (or none): what a request
#: for an archived result may name (docs/protocol.md, ``result``).
RACE_ID: Final = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_ROOM_ID_LEN}}}\.(?:[0-9a-f]{{8}}|nocommit)")
