"""solrace.store: the only code in solrace that knows Redis.

Live room state is event-sourced in Redis (see ``docs/store.md``): per room a stream of
numbered events, one move log per racer, finishing-place counters and token digests,
all under the room's cluster hash tag. Payloads are opaque bytes encoded by the caller.

>>> store = await Store.connect("redis://127.0.0.1:6379/0")
>>> store = await Store.connect("redis+cluster://10.0.0.1:6379,10.0.0.2:6379")  # a cluster
>>> store = await Store.start_embedded("/var/lib/solrace")  # a private valkey-server, durable
"""

from __future__ import annotations

import hashlib

from ._cluster import CLUSTER_SCHEMES, parse_cluster_url
from .errors import (
    CodeTaken,
    HeadLost,
    StoreClosed,
    StoreError,
    StoreForbidden,
    StoreRefusing,
    StoreUnavailable,
    VersionConflict,
)
from .keys import Keys, RoomKeys
from .store import (
    RETRY_AFTER_FAILURE_S,
    STORE_FORMAT,
    Finish,
    Listing,
    MoveAppend,
    SeatClaim,
    Store,
    StoredEvent,
    TailRead,
    Trim,
    new_event_id,
)

__all__ = [
    "CLUSTER_SCHEMES",
    "RETRY_AFTER_FAILURE_S",
    "STORE_FORMAT",
    "CodeTaken",
    "Finish",
    "HeadLost",
    "Keys",
    "Listing",
    "MoveAppend",
    "RoomKeys",
    "SeatClaim",
    "Store",
    "StoreClosed",
    "StoreError",
    "StoreForbidden",
    "StoreRefusing",
    "StoreUnavailable",
    "StoredEvent",
    "TailRead",
    "Trim",
    "VersionConflict",
    "new_event_id",
    "parse_cluster_url",
    "token_digest",
]


def token_digest(token: str | bytes) -> str:
    """SHA-256 hex of a racer's secret token: the only form the store accepts.

    Racer tokens are random and long, so a plain (unsalted, fast) hash is enough: it
    cannot be brute-forced, and it lets ``racer_for_token`` look a token up.
    """
    raw = token.encode() if isinstance(token, str) else token
    return hashlib.sha256(raw).hexdigest()
