"""Connection limits behind the real nginx of deploy/: the node caps each client by the
address nginx forwards (``X-Forwarded-For``, as deploy/nginx/local.conf.template sends
it), not nginx's own, and nginx passes the node's 429 to the client unchanged.

The clients connect from 127.0.0.2 and 127.0.0.3 (loopback addresses other than the
one nginx reaches the node from), and the node trusts only 127.0.0.1, nginx, so the
forwarded addresses are capped as a public client's would be."""

from __future__ import annotations

import asyncio

import pytest
from solrace.protocol import SUBPROTOCOL
from solrace_client.errors import cannot_reach
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from tests.support.stack import local_stack

PER_ADDRESS = 2
#: How long a closed connection's slot may take to be freed: the close goes through
#: nginx, which closes its own connection to the node after it.
FREED_WITHIN_S = 5.0


async def _open(url: str, source: str) -> ClientConnection:
    return await connect(
        url,
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        local_addr=(source, 0),
    )


async def test_nginx_forwards_the_client_and_the_node_caps_it_by_that_address() -> None:
    node_env = {
        "SOLRACE_TRUSTED_PROXIES": "127.0.0.1",
        "SOLRACE_MAX_CONNECTIONS_PER_ADDRESS": str(PER_ADDRESS),
    }
    async with local_stack(nodes=1, prefix="solrace-limits:", node_env=node_env) as stack:
        url = stack.lb_url
        held = [await _open(url, "127.0.0.2") for _ in range(PER_ADDRESS)]
        with pytest.raises(InvalidStatus) as refused:
            await _open(url, "127.0.0.2")
        answer = refused.value.response
        assert answer.status_code == 429
        assert bytes(answer.body or b"").startswith(b"too_many_connections: ")
        assert "too many connections from your address" in cannot_reach(url, refused.value)
        held += [await _open(url, "127.0.0.3") for _ in range(PER_ADDRESS)]  # someone else
        await held[0].close()
        async with asyncio.timeout(FREED_WITHIN_S):  # its slot is free again
            while True:
                try:
                    held[0] = await _open(url, "127.0.0.2")
                    break
                except InvalidStatus as still:
                    assert still.response.status_code == 429
                    await asyncio.sleep(0.05)
        for ws in held:
            await ws.close()
