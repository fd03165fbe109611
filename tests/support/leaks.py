"""The leak guard: a test that leaves keys of its own prefix in the shared Redis (or on
the test cluster) fails, and the failure names the test and the keys.

Tests delete exactly their prefix's keys (tests/support/redis.py), but a test that
forgot, or whose server wrote after the delete, left keys nobody could trace to it (a
full run once left 18). So, after each test's teardown — every fixture finalized,
every delete done, the test's event loop closed — :func:`check_test` scans the
prefixes the test made (:func:`~tests.support.redis.new_prefix`) on the Redis and on
every master of the cluster, deletes what it finds and says what it was: the test
errors at teardown. The last test of each worker (of the run, without xdist) also runs
:func:`check_worker`, one scan for every prefix this worker made, for keys written
later still (a process or thread that outlived its test): that test errors, naming the
test that made the prefix. Only this run's prefixes are looked at: other runs sharing
the Redis write theirs at the same time, and their keys are none of this run's business.
A backend the guard cannot look at (it does not answer, a scan fails) errors the test
whose check it was, saying so, and the next check connects again: a guard that could
not check never passes as one that found nothing.

Cost: a test that made no prefix (rules, protocol, most client tests) costs nothing.
SCAN walks the whole database whatever it matches, about 1 ms per 1,000 keys (measured
on the local Redis: 1.0 ms a test on an empty database, 12.9 ms with 10,000 keys, 77 ms
with 50,000), so a test's own scan is made only while the database holds at most
:data:`PER_TEST_MAX_KEYS` (in CI it holds the live tests' few hundred); above that, the
worker's last scan alone finds the leak, and still names the test. In a full run
(``-n 2``, 4,317 tests, 20 min 34 s) the guard checked 1,828 tests, 1.1 ms each
(median; 15 ms at the 99th percentile), 4.3 s in all.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator

import pytest
import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError
from solrace.store._cluster import parse_cluster_url

from tests.support.redis import CLUSTER_URL, ISSUED, REDIS_URL, TEST_PREFIX

__all__ = ["check_test", "check_worker", "pytest_runtest_setup", "pytest_runtest_teardown"]

#: Keys each SCAN call may walk: more than a test database holds, so a scan is one
#: round trip (SCAN's work on the server is the database's size either way).
SCAN_COUNT = 10_000

#: The most keys a database may hold for each test's own scan (about 25 ms); a
#: bigger one is left to the worker's last scan.
PER_TEST_MAX_KEYS = 20_000

#: Leaked keys named in a failure, per prefix (the count says the rest).
NAMED_KEYS = 12

#: Which test made each prefix: the worker's last scan names it.
_OWNERS: dict[str, str] = {}

_Client = redis.Redis | RedisCluster

#: The clients of the shared Redis and of the cluster, made once a test needs them and
#: dropped when one fails (the next check makes a new one).
_clients: dict[str, _Client] = {}

_FAILURES = (RedisError, RedisClusterException, OSError)

Unchecked = dict[str, str]
"""backend URL -> why the guard could not look there."""


def _client(url: str) -> _Client:
    """The backend's client, connected (raises what connecting raised)."""
    if url not in _clients:
        client: _Client
        if url == CLUSTER_URL:
            first, _others = parse_cluster_url(url)
            client = RedisCluster.from_url(first, socket_timeout=5, socket_connect_timeout=2)
        else:
            client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
            client.ping()
        _clients[url] = client
    return _clients[url]


def _failed(url: str, exc: BaseException, unchecked: Unchecked) -> None:
    """The backend could not be checked: said (``unchecked``), and its client dropped so
    that the next check connects again. Before, one failed connect made the guard skip
    the backend for the rest of the run, and say nothing: a Redis that did not answer
    once (a restart, a loaded machine) was never checked again."""
    unchecked[url] = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    client = _clients.pop(url, None)
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()


def _backends(*, small_only: bool, unchecked: Unchecked) -> Iterator[tuple[str, _Client]]:
    """The Redis and the cluster (once if they are one), those that answer (the others
    in ``unchecked``); with ``small_only``, only those holding at most
    PER_TEST_MAX_KEYS keys (DBSIZE)."""
    for url in dict.fromkeys((REDIS_URL, CLUSTER_URL)):
        try:
            client = _client(url)
            if small_only and int(client.dbsize()) > PER_TEST_MAX_KEYS:
                continue
        except (*_FAILURES, ValueError) as exc:
            _failed(url, exc, unchecked)
            continue
        yield url, client


def _scan(client: _Client, pattern: str) -> list[str]:
    """Every key matching ``pattern`` (on a cluster: on every master)."""
    return [k.decode(errors="replace") for k in client.scan_iter(pattern, SCAN_COUNT)]


def _said_unchecked(unchecked: Unchecked, whose: str) -> str:
    """One line per backend the guard could not look at: a guard that cannot check says
    so (the test errors), never passes for one that found nothing."""
    return "\n".join(
        f"the leak guard could not check {url} for {whose} ({why}; tests/support/leaks.py)"
        for url, why in unchecked.items()
    )


def _glob(prefix: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"


Leaks = dict[str, dict[str, list[str]]]
"""prefix -> backend URL -> the keys left under it there."""


def _take(leaks: Leaks) -> Leaks:
    """Delete the leaked keys (so a leak fails one test, not every run after it)."""
    for found in leaks.values():
        for url, keys in found.items():
            client = _clients.get(url)
            try:
                for key in keys:  # one by one: a cluster refuses a DEL across slots
                    if client is not None:
                        client.delete(key)
            except _FAILURES:
                pass  # gone meanwhile: the leak is said all the same
    return leaks


def _report(leaks: Leaks) -> str:
    """One line per leaking prefix and backend: whose, how many, the first few."""
    lines = []
    for prefix, found in leaks.items():
        for url, keys in found.items():
            keys = sorted(keys)
            named = ", ".join(k.removeprefix(prefix) for k in keys[:NAMED_KEYS])
            more = f" and {len(keys) - NAMED_KEYS} more" if len(keys) > NAMED_KEYS else ""
            owner = _OWNERS.get(prefix, "no test (made outside one)")
            many = f"{len(keys)} key{'s' if len(keys) > 1 else ''}"
            lines.append(f"{owner}: {many} left under {prefix} on {url}: {named}{more}")
    return "\n".join(lines)


def check_test(nodeid: str, prefixes: Iterable[str]) -> str | None:
    """After a test's teardown: what it left under the prefixes it made (deleted now),
    and the backends that could not be checked, as the failure's message; None if
    nothing (or its database is too big to scan for each test: the worker's last scan
    looks)."""
    prefixes = list(prefixes)
    for prefix in prefixes:
        _OWNERS[prefix] = nodeid
    if not prefixes:
        return None
    leaks: Leaks = {}
    unchecked: Unchecked = {}
    for url, client in _backends(small_only=True, unchecked=unchecked):
        try:
            for prefix in prefixes:
                if keys := _scan(client, _glob(prefix)):
                    leaks.setdefault(prefix, {})[url] = keys
        except _FAILURES as exc:
            _failed(url, exc, unchecked)
    said = [f"keys leaked (tests/support/leaks.py):\n{_report(_take(leaks))}"] if leaks else []
    if unchecked:
        said.append(_said_unchecked(unchecked, "this test's keys"))
    return "\n".join(said) or None


def check_worker() -> str | None:
    """After this worker's last test: keys under any prefix it made — left by a test
    whose own scan was skipped, or written after that scan (a server, task or thread
    that outlived its test) — deleted now, and the backends that could not be checked,
    as the failure's message; None if nothing."""
    mine = set(ISSUED)
    if not mine:
        return None
    leaks: Leaks = {}
    unchecked: Unchecked = {}
    for url, client in _backends(small_only=False, unchecked=unchecked):
        try:
            for key in _scan(client, f"{TEST_PREFIX}*"):
                prefix = ":".join(key.split(":", 2)[:2]) + ":"  # what new_prefix makes
                if prefix in mine:
                    leaks.setdefault(prefix, {}).setdefault(url, []).append(key)
        except _FAILURES as exc:
            _failed(url, exc, unchecked)
    said = []
    if leaks:
        said.append(
            "keys under this worker's prefixes, found after its last test (written after "
            "their test's own check, or not checked then; tests/support/leaks.py):\n"
            f"{_report(_take(leaks))}"
        )
    if unchecked:
        said.append(_said_unchecked(unchecked, "this worker's keys after its last test"))
    return "\n".join(said) or None


_FIRST = pytest.StashKey[int]()
"""Where in ISSUED the prefixes a test makes begin."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_FIRST] = len(ISSUED)


def _said(item: pytest.Item, nextitem: pytest.Item | None) -> list[str]:
    """What the test (and, after the worker's last test, the worker) left behind."""
    said = [check_test(item.nodeid, ISSUED[item.stash.get(_FIRST, len(ISSUED)) :])]
    if nextitem is None:
        said.append(check_worker())
    return [s for s in said if s]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The guard runs once every fixture of the test is finalized. A leak is an error
    at the test's teardown: the run fails, and says which test."""
    try:
        result = yield
    except BaseException as failed:  # its teardown failed: the leak is said with it
        for leaked in _said(item, nextitem):
            failed.add_note(leaked)
        raise
    if said := _said(item, nextitem):
        pytest.fail("\n".join(said), pytrace=False)
    return result
