"""The README's two-racer snippet (docs/examples/two_racers.py) runs as documented."""

from __future__ import annotations

import asyncio
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
    assert "room code:" in text
    assert "1 " in text and "2 " in text and "seed" in text
