"""A resume refused ``rate_limited`` (past the racer's resume bucket) is asked again
after its ``retry_after_ms``, timed by the client's clock."""

from __future__ import annotations

from solrace.protocol.limits import RESUME_BURST
from solrace.rooms.clock import SLEW_MS_PER_S, wall_ms

from .conftest import Backend, FakePeer


async def test_a_resume_sent_again_after_its_retry_after_is_taken_on_a_slewing_clock(
    backend: Backend,
) -> None:
    """A node's clock slews toward the store's at up to SLEW_MS_PER_S, so while it
    runs back it counts 995 ms in a second of the client's. ``retry_after_ms`` was the
    bucket's shortfall in the node's ms: a client that waited it out on its own clock
    (a loaded CI run, cluster backend) was refused again, for a few ms, on the same
    connection. The wait said holds however the node's clock is slewing."""
    now = [wall_ms()]
    node = await backend.node(clock=lambda: now[0])
    ann = FakePeer(node)
    created = await ann.ask("create", variant="klondike", name="Ann", max_racers=4)
    room, token = str(created.d["room"]), str(created.d["token"])
    refusal = None
    for _ in range(RESUME_BURST + 1):  # the burst at once, then one more
        peer = FakePeer(node)
        reply = await peer.ask("resume", room=room, token=token)
        if reply.t == "error":
            refusal = reply
            break
        now[0] += 1  # a reconnect's round trip
    assert refusal is not None and refusal.d["code"] == "rate_limited", refusal
    wait_ms = int(refusal.d["retry_after_ms"])  # type: ignore[call-overload]
    # What the node's clock, slewing back at its fastest, counts while the client
    # waits wait_ms by its own.
    now[0] += wait_ms * (1000 - SLEW_MS_PER_S) // 1000
    again = await peer.ask("resume", room=room, token=token)
    assert again.t == "joined", again.d
