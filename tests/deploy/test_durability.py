"""Durability you can state (docs/deploy.md): the store reads what its Redis promises
(CONFIG GET appendonly/appendfsync), solrace-server warns at start when that is less
than "an acknowledged move survives a Redis crash", and /healthz reports it.

Real Redis only: the machine's (CI runs it with appendonly no) and private
redis-servers started here with deploy/redis.conf, with everysec, and with CONFIG
disabled as on a managed Redis."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from solrace.store import Store

from tests.deploy.conftest import DEPLOY
from tests.support.redis import REDIS_URL
from tests.support.server_process import solrace_server

REDIS_CONF = str(DEPLOY / "redis.conf")


async def _level(url: str) -> tuple[str, str]:
    store = await Store.connect(url)
    try:
        found = await store.durability()
        return found.level, found.detail
    finally:
        await store.close()


def _get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _http(ws_url: str) -> str:
    return ws_url.replace("ws://", "http://")


async def test_deploy_redis_conf_keeps_the_promise(private_redis: Callable[..., str]) -> None:
    url = private_redis(REDIS_CONF)
    assert await _level(url) == ("aof-always", "AOF fsynced before every reply")


@pytest.mark.parametrize(
    ("args", "level"),
    [
        (("--appendonly", "yes", "--appendfsync", "everysec"), "aof-everysec"),
        (("--appendonly", "yes", "--appendfsync", "no"), "aof-no"),
        (("--appendonly", "no"), "none"),
    ],
)
async def test_each_aof_setting_is_named(
    private_redis: Callable[..., str], args: tuple[str, ...], level: str
) -> None:
    assert (await _level(private_redis(*args)))[0] == level


async def test_a_redis_that_refuses_config_is_unknown(private_redis: Callable[..., str]) -> None:
    # As managed Redis services do: CONFIG is not available to the client.
    url = private_redis(REDIS_CONF, "--rename-command", "CONFIG", "")
    level, detail = await _level(url)
    assert level == "unknown"
    assert detail == (
        "cannot check: Redis refused CONFIG GET: the command is disabled or renamed there"
        " (managed services often do)"
    )


async def test_a_redis_whose_acl_forbids_config_is_unknown_and_says_so(
    private_redis: Callable[..., str],
) -> None:
    acl = ("default", "on", "nopass", "~*", "&*", "+@all", "-config")
    url = private_redis(REDIS_CONF, "--user", *acl)
    assert await _level(url) == (
        "unknown",
        "cannot check: Redis refused CONFIG GET: this user may not run it (an ACL)",
    )


async def test_an_unreachable_redis_is_unknown_and_asked_again() -> None:
    store = await Store.connect("redis://127.0.0.1:1/0", timeout=0.5)
    try:
        first = await store.durability(max_age_s=60)
        assert (first.level, first.detail) == ("unknown", "cannot check: Redis does not answer")
        assert not first.keeps_promise
    finally:
        await store.close()


async def test_the_embedded_engine_is_aof_always_and_the_fake_is_none(tmp_path: Path) -> None:
    embedded = await Store.start_embedded(tmp_path / "data")
    fake = Store.fake()
    try:
        assert (await embedded.durability()).level == "aof-always"
        assert (await fake.durability()).level == "none"
    finally:
        await embedded.close()
        await fake.close()


async def test_the_ci_redis_is_reported_as_configured() -> None:
    # Whatever the machine's Redis says (CI starts it with appendonly no).
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        aof = client.config_get("appendonly")["appendonly"]
        fsync = client.config_get("appendfsync")["appendfsync"]
    finally:
        client.close()
    expected = "none" if aof != "yes" else f"aof-{fsync}"
    assert (await _level(REDIS_URL))[0] == expected


async def test_server_warns_at_start_and_healthz_reports_no_aof(
    private_redis: Callable[..., str],
) -> None:
    url = private_redis("--appendonly", "no")
    async with solrace_server(args=["--redis-url", url]) as server:
        log = server.log
        assert "durability: none" in log
        assert "WARNING" in next(line for line in server.lines if "durability:" in line)
        assert "appendfsync always" in log  # what to do about it
        status, headers, body = await asyncio.to_thread(_get, _http(server.url) + "/healthz")
        assert (status, body) == (200, b"ok\n")  # durability never changes the status
        assert headers["Solrace-Durability"] == "none"


async def test_server_on_deploy_redis_conf_says_the_promise_holds(
    private_redis: Callable[..., str],
) -> None:
    url = private_redis(REDIS_CONF)
    async with solrace_server(args=["--redis-url", url, "--log-format", "json"]) as server:
        records = [json.loads(line) for line in server.lines if line.startswith("{")]
        said = [r for r in records if r.get("durability")]
        assert [(r["level"], r["durability"]) for r in said] == [("info", "aof-always")]
        status, headers, body = await asyncio.to_thread(
            _get, _http(server.url) + "/healthz?format=json"
        )
        assert status == 200
        assert headers["Content-Type"] == "application/json"
        assert headers["Solrace-Durability"] == "aof-always"
        report = json.loads(body)
        assert abs(report.pop("clock_offset_ms")) < 100  # one machine: Redis's clock is its
        assert abs(report.pop("store_clock_offset_ms")) < 100  # set to it at the start
        assert report == {
            "status": "ok",
            "store": "redis",
            "store_answers": True,
            "store_failing": False,
            "draining": False,
            "durability": "aof-always",
            "durability_detail": "AOF fsynced before every reply",
            "eviction": "noeviction",
            "eviction_detail": "maxmemory-policy noeviction: Redis never deletes a key",
        }


async def test_server_on_a_managed_redis_says_it_cannot_check(
    private_redis: Callable[..., str],
) -> None:
    url = private_redis(REDIS_CONF, "--rename-command", "CONFIG", "")
    async with solrace_server(args=["--redis-url", url]) as server:
        line = next(line for line in server.lines if "durability:" in line)
        assert "WARNING" in line and "durability: unknown" in line
        assert "cannot check" in line
        _, headers, _ = await asyncio.to_thread(_get, _http(server.url) + "/healthz")
        assert headers["Solrace-Durability"] == "unknown"


async def test_embedded_engine_keeps_the_promise_and_healthz_says_so() -> None:
    """Without a Redis URL the node runs its own engine with AOF fsynced on every write:
    the same promise as a Redis configured by deploy/redis.conf, checked the same way
    (CONFIG GET on the engine), logged as info and reported by /healthz."""
    async with solrace_server() as server:
        line = next(line for line in server.lines if "durability:" in line)
        assert "INFO" in line and "durability: aof-always" in line
        status, headers, body = await asyncio.to_thread(
            _get, _http(server.url) + "/healthz?format=json"
        )
        assert status == 200
        assert headers["Solrace-Durability"] == "aof-always"
        report = json.loads(body)
        assert (report["status"], report["store"], report["durability"]) == (
            "ok",
            "embedded",
            "aof-always",
        )
