"""Each round's seed and salt, derived from a secret the room keeps from creation.

HMAC-SHA256 of the room secret gives every node the same seed for round n without any
coordination (so two nodes can never commit to different deals), and revealing one
round's seed and salt reveals nothing about the next round's. The commitment itself is
the protocol's (``solrace.protocol.fairness``): ``sha256(seed ‖ salt)``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

from solrace.protocol.fairness import commitment


def round_seed(room_secret: bytes, round_no: int, attempt: int = 0) -> int:
    """Round ``round_no``'s seed; ``attempt`` k > 0 names the k-th candidate drawn
    after it when certifying a winnable deal (docs/fairness.md): the room deals the
    first candidate a solver wins."""
    label = f"seed:{round_no}" if attempt == 0 else f"seed:{round_no}:{attempt}"
    digest = hmac.new(room_secret, label.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


def round_salt(room_secret: bytes, round_no: int) -> str:
    """32 bytes as 64 lower-case hex digits, the protocol's salt format."""
    return hmac.new(room_secret, f"salt:{round_no}".encode(), hashlib.sha256).hexdigest()


def round_commitment(
    room_secret: bytes,
    round_no: int,
    attempt: int = 0,
    certificate: Sequence[str] | None = None,
) -> str:
    seed = round_seed(room_secret, round_no, attempt)
    return commitment(seed, round_salt(room_secret, round_no), certificate)
