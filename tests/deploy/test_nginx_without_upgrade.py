"""nginx in front of a node without the WebSocket upgrade headers: the misconfiguration
an operator makes who writes a plain ``proxy_pass`` (or drops the two
``proxy_set_header`` lines of deploy/nginx.conf).

An operator audit found it silent: nginx passes the client's handshake on without
``Upgrade`` and with ``Connection: close``, the node answers 426 and logs nothing
(odd requests are neither logged nor counted), and the client said "it answered HTTP
426, not as a solrace server — is that the right port?" — it was. Now the node logs
one warning naming the fix (a repeated line: at most one every 10 s), and the client
names the proxy."""

from __future__ import annotations

import pytest
from solrace.protocol import SUBPROTOCOL
from solrace_client.errors import cannot_reach
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.support.stack import local_stack

#: The two lines of deploy/nginx/local.conf.template that make nginx pass an upgrade.
UPGRADE_LINES = ("proxy_set_header Upgrade", "proxy_set_header Connection")


def without_upgrade_headers(conf: str) -> str:
    kept = [line for line in conf.splitlines() if not line.strip().startswith(UPGRADE_LINES)]
    assert len(kept) == len(conf.splitlines()) - len(UPGRADE_LINES), conf
    return "\n".join(kept) + "\n"


async def test_nginx_without_the_upgrade_headers_is_named_by_the_node_and_the_client() -> None:
    async with local_stack(
        nodes=1, prefix="solrace-no-upgrade:", nginx_edit=without_upgrade_headers
    ) as stack:
        for _ in range(3):  # a client retrying: one line in the node's log, not three
            with pytest.raises(InvalidStatus) as refused:
                await connect(stack.lb_url, subprotocols=[SUBPROTOCOL])  # type: ignore[list-item]
            assert refused.value.response.status_code == 426
        said = cannot_reach(stack.lb_url, refused.value)
        assert "right port" not in said, said
        assert "Upgrade and Connection headers" in said and "proxy" in said, said
        node_log = stack.nodes[0].text()
    lines = [line for line in node_log.splitlines() if "without its Upgrade" in line]
    assert len(lines) == 1, node_log
    assert lines[0].split()[2] == "WARNING", lines
    assert "proxy_set_header Upgrade" in lines[0] and "peer=127.0.0.1:" in lines[0], lines
