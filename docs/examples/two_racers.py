import asyncio
import contextlib
import random
import sys

from solrace_client import RaceClient, ServerError
from solrace_client.boardview import board_from_view
from solrace_client.errors import CONNECT_ERRORS, BadServerURL, cannot_reach, check_server_url


async def race(client, rng):
    await client.next_event("started", timeout=30)
    await client.next_event("board")  # your own board follows the start
    for _ in range(200):
        moves = board_from_view(client.board).legal_moves()
        if not moves:
            break
        try:  # the client paces itself to stay inside the server's rate limit
            reply = await client.move(str(rng.choice(moves)))
        except ServerError:  # e.g. the race ended meanwhile
            break
        if reply["status"] != "playing":
            break
    with contextlib.suppress(ServerError):  # already finished or stuck
        await client.resign()


async def main(url):
    ann, bob = await RaceClient.connect(url), await RaceClient.connect(url)
    await ann.create("yukon", "Ann")
    print("room code:", ann.code)
    await bob.join(ann.code, "Bob")
    await bob.ready()
    await ann.start()  # the host starts the countdown
    await asyncio.gather(race(ann, random.Random(1)), race(bob, random.Random(2)))
    over = await ann.next_event("race_over", timeout=30)
    for row in over.d["standings"]:
        print(row["place"], row["name"], row["status"], row["foundation"], "cards up")
    print("seed", over.d["seed"], "commitment", over.d["commitment"])
    await ann.close()
    await bob.close()


url = sys.argv[1] if len(sys.argv) > 1 else "ws://127.0.0.1:8765"
try:
    asyncio.run(main(check_server_url(url)))
except BadServerURL as exc:  # not a ws:// URL: one line, not a traceback
    sys.exit(f"two_racers: {exc}")
except CONNECT_ERRORS as exc:  # no server there, or not a solrace server
    sys.exit(f"two_racers: {cannot_reach(url, exc)}")
except ServerError as exc:  # refused: too many rooms from here, a deal not ready yet…
    sys.exit(f"two_racers: {exc}")
except KeyboardInterrupt:  # Ctrl-C: one line and status 130, as the commands do
    print("two_racers: interrupted", file=sys.stderr)
    sys.exit(130)
