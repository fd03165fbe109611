"""Provable fairness: commit to the seed at the start, reveal it at the end.

Each round's seed and salt are derived from a secret the room keeps from creation
(HMAC-SHA256), so every node computes the same seed for a rematch without coordinating,
and revealing one round's seed and salt reveals nothing about the next round's.

The commitment is ``sha256(seed ‖ salt)`` with the seed as 8 big-endian bytes and the
salt as its 16 raw bytes; it is published as lower-case hex. Anyone can check a finished
race: recompute the commitment from the revealed seed and salt, deal
``(variant, seed, options)`` and replay every racer's move log with the engine.
"""

from __future__ import annotations

import hashlib
import hmac


def round_seed(room_secret: bytes, round_no: int) -> int:
    digest = hmac.new(room_secret, f"seed:{round_no}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


def round_salt(room_secret: bytes, round_no: int) -> bytes:
    return hmac.new(room_secret, f"salt:{round_no}".encode(), hashlib.sha256).digest()[:16]


def commitment(seed: int, salt: bytes) -> str:
    return hashlib.sha256(seed.to_bytes(8, "big") + salt).hexdigest()


def check_commitment(seed: int, salt_hex: str, published: str) -> bool:
    try:
        salt = bytes.fromhex(salt_hex)
    except ValueError:
        return False
    return hmac.compare_digest(commitment(seed, salt), published)
