"""Where the deployment tests find the repository and its deploy/ directory, and
how they run deploy/redis-cluster.sh."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
#: The script that starts, stops and finds ports for a local Redis Cluster.
REDIS_CLUSTER_SH = DEPLOY / "redis-cluster.sh"


def redis_cluster_sh(*args: str) -> str:
    """``bash deploy/redis-cluster.sh ARGS``, which must succeed: what it printed
    (for a private cluster: its spare ports, its URL)."""
    done = subprocess.run(
        ["bash", str(REDIS_CLUSTER_SH), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
