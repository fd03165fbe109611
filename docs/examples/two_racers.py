"""Two racers of the protocol client library race each other on a running server.

    solrace-server &                      # embedded store, ws://127.0.0.1:8765
    python docs/examples/two_racers.py    # or: python docs/examples/two_racers.py ws://host:port

Each racer plays legal moves from its own board view (it never sees face-down cards)
until it is finished or stuck, or has played 300 moves, then resigns; the room then
announces the standings and reveals the seed.
"""

import asyncio
import contextlib
import random
import sys

from solrace_client import RaceClient, ServerError
from solrace_client.boardview import board_from_view


async def race(client: RaceClient, rng: random.Random) -> None:
    await client.next_event("started", timeout=30)
    await client.next_event("board")  # the racer's own board follows the start
    for _ in range(300):
        moves = board_from_view(client.board).legal_moves()
        if not moves:
            break
        foundation = [m for m in moves if str(m).endswith(">F")]
        try:
            reply = await client.move(str(rng.choice(foundation or moves)))
        except ServerError:  # the race may have ended under us
            break
        if reply["status"] != "playing":
            break
    with contextlib.suppress(ServerError):  # already finished or stuck
        await client.resign()


async def main(url: str) -> None:
    ann, bob = await RaceClient.connect(url), await RaceClient.connect(url)
    await ann.create("yukon", "Ann")
    print("room code:", ann.code)
    await bob.join(ann.code, "Bob")
    await bob.ready()
    await ann.start()  # the host starts the countdown once the others are ready
    await asyncio.gather(race(ann, random.Random(1)), race(bob, random.Random(2)))
    over = await ann.next_event("race_over", timeout=30)
    for row in over.d["standings"]:
        print(row["place"], row["name"], row["status"], row["foundation"], "cards up")
    print("seed", over.d["seed"], "commitment", over.d["commitment"])
    await ann.close()
    await bob.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "ws://127.0.0.1:8765"))
