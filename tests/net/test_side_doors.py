"""What a race shows through the requests and HTTP paths beside the room's own frames
(an audit of hidden information): a room listing, a ``result`` request for the round
under way, ``/metrics``, ``/healthz`` and the page a browser gets carry neither the
round's seed nor its salt, nor any card, while the race runs."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

from solrace.protocol.fairness import race_id
from solrace.race.fairness import round_salt, round_seed
from solrace_client import RaceClient, ServerError

from tests.support.race import CARD, _strings, play_until_done, racing, winning_moves

from .conftest import SOLVABLE_SECRET, Cluster


def _get(url: str) -> str:
    """The body of a GET, whatever its status (a browser's page is a 426)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return str(answer.read().decode())
    except urllib.error.HTTPError as refused:
        return str(refused.read().decode())


async def test_no_side_door_carries_the_seed_or_a_card_during_a_race(cluster: Cluster) -> None:
    one = await cluster.node()
    ann, bob = await racing(one.url, one.url)
    await play_until_done(ann, winning_moves(SOLVABLE_SECRET)[:6])
    seed, salt = round_seed(SOLVABLE_SECRET, 1), round_salt(SOLVABLE_SECRET, 1)
    stranger = await RaceClient.connect(one.url)
    listed = await stranger.list_rooms()
    assert any(room["room"] == ann.room for room in listed), listed
    assert not [s for s in _strings(listed) if CARD.match(s)]
    (started,) = [e for e in ann.received if e.t == "started"]
    commitment = started.d["commitment"]
    assert isinstance(commitment, str) and len(commitment) == 64
    try:  # the round under way, by the id every racer and spectator can make
        await stranger.fetch_result(race_id(ann.room or "", commitment))
        raise AssertionError("a running race's result was sent")
    except ServerError as exc:
        assert exc.code == "unknown_race"
    http = one.url.replace("ws://", "http://", 1)
    for path in ("/metrics", "/healthz", "/healthz?format=json", "/"):
        body = await asyncio.to_thread(_get, http + path)
        assert body, path
        assert str(seed) not in body and salt not in body, path
    for client in (ann, bob, stranger):
        await client.close()
