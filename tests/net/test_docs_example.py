"""The README's two-racer snippet (docs/examples/two_racers.py) runs as documented."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

from .conftest import Cluster

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "two_racers.py"


async def test_two_racers_example_runs_to_standings(cluster: Cluster) -> None:
    server = await cluster.node()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        server.url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert re.search(r"^room code: [A-Z0-9]{6}$", text, re.M)
    places = re.findall(r"^([12]) (Ann|Bob) (\w+) (\d+) cards up$", text, re.M)
    assert sorted(p[0] for p in places) == ["1", "2"]  # one standings line per racer
    assert {p[1] for p in places} == {"Ann", "Bob"}
    assert re.search(r"^seed \d+ commitment [0-9a-f]{64}$", text, re.M)
