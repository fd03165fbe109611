"""Group commit: many scripts, one Redis round trip.

A race node receives moves from many racers at once. Acknowledging each only after its
own EVALSHA round trip would make Redis latency the ceiling on moves per second per
node. Instead every call is queued; one flusher task sends everything queued so far in
ONE non-transactional pipeline, then resolves each caller's future with its own reply
(or its own exception). While that pipeline is in flight, new calls queue for the next
one, so batches grow exactly when Redis is the bottleneck and stay at size 1 when the
node is idle (the only added latency is one event-loop iteration).

On one Redis the batches go through the store's own connection (:mod:`._link`), and
there a batch does not wait for the one before it: up to :data:`FLUSHES_IN_FLIGHT`
batches are on the wire at once, written in order on one connection, which Redis
executes in the order it reads them. Waiting for the batch in flight cost every move
that arrived meanwhile a whole extra round trip: two racers moving back to back on a
node 10 ms (round trip) from its Redis took turns, 24.5 ms a move at the median (two
round trips), 14.4 ms now. Only past that many batches in flight do calls queue for
the next one, and batches grow as before.

Atomicity is per call, not per batch: each EVALSHA is an atomic script, and a
non-transactional pipeline is just the calls written back to back on one connection,
executed by Redis in submission order. A batch therefore never needs to be all-or-
nothing, and one failing call (e.g. WRONGTYPE) does not fail its neighbours.

On Redis Cluster a batch becomes one pipeline per master, sent concurrently (see
``_execute``): calls on one master keep their submission order (two moves of one
racer share a room, so a slot, so a master), and a failing master fails only the calls
it owns.

A move that finishes a racer's game decides a place, and on a cluster whose master has
a replica it is answered only once the replica holds it (:meth:`GroupCommit.
call_replicated`: the script, then ``WAIT 1`` on the same connection). Redis
replicates after it replies, so without that a failover in the next milliseconds could
promote a replica that never had the finish, and the place would go to whoever
finished next. Such a call has its own pipeline beside the batches, so that a slow
replica holds up that finish only, never the node's other moves. Other moves do not
wait: a lost move is detected and resynchronised (docs/deploy.md), and a replica round
trip on every move would cost them all.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any, Final

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import AskError, MovedError, NoPermissionError, NoScriptError

from ._errors import translate
from ._link import RespLink
from ._lua import SCRIPT_LOADS, LuaScript
from .errors import StoreClosed, StoreUnavailable

__all__ = ["GroupCommit"]

Arg = bytes | str | int

#: A call of the batch whose reply has not come (yet).
_PENDING: Any = object()

#: How long a finish waits for a replica's acknowledgement before it is answered
#: anyway (its write stands on the master; the answer says no replica has it yet).
REPLICA_WAIT_MS: Final = 1000
#: Slot moves followed by a replicated call before it stores the ordinary way.
MAX_REDIRECTS: Final = 2
#: Batches on the wire at once on the store's own connection to one Redis (a cluster's
#: and a TLS store's pipelines take one at a time): enough that a node far from its
#: Redis never holds a move back for the round trip of the batch before it.
FLUSHES_IN_FLIGHT: Final = 16


@dataclass(slots=True)
class _Call:
    script: LuaScript
    keys: tuple[str, ...]
    args: tuple[Arg, ...]
    future: asyncio.Future[Any]


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(translate(exc))


log = logging.getLogger("solrace.store")


async def _has_replicas(client: RedisCluster, master: ClusterNode) -> bool:
    """Whether ``master`` has a replica connected now, by its own account (``INFO
    replication``): the slot map names only the replicas of when it was read, maybe
    none yet. Not ``ROLE``: it is ``@dangerous``, which the Redis user docs/deploy.md
    documents refuses, and every finish on a cluster was refused ``unavailable`` for
    ever (the operator audit); ``INFO`` that user may run, as the node's own checks
    (eviction, replicas) need. A user refused that too cannot be waited for: its
    finishes are answered as on a master without replicas, and a warning says so."""
    try:
        info = await client.info("replication", target_nodes=master)
    except NoPermissionError as exc:
        global _said_refused  # one line a process, not one a finish
        if not _said_refused:
            _said_refused = True
            log.warning(
                "cannot ask Redis whether a master has a replica (%s): finishes are "
                "answered without waiting for one; give the node's user +info "
                "(docs/deploy.md)",
                exc,
            )
        return False
    return info.get("role") == "master" and int(info.get("connected_slaves", 0)) > 0


#: Whether the warning of :func:`_has_replicas` has been logged (once a process).
_said_refused = False


class GroupCommit:
    """Queue script calls and flush them together; see the module docstring."""

    def __init__(
        self, client: Redis | RedisCluster, max_batch: int = 1024, link: RespLink | None = None
    ) -> None:
        """Flush through ``link`` when given (one Redis: :mod:`._link`), else through
        ``client``'s pipelines; ``client`` loads scripts either way."""
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self._client = client
        self._link = link
        self._max_batch = max_batch
        self._queue: deque[_Call] = deque()
        self._task: asyncio.Task[None] | None = None
        #: The tasks of batches not yet answered (on the link one a batch, see the
        #: module docstring; else the one flusher), and the link's slots left for more.
        self._in_flight: set[asyncio.Task[None]] = set()
        self._window = asyncio.Semaphore(FLUSHES_IN_FLIGHT)
        #: The last batch sent on the link (a NOSCRIPT resend waits for it: below).
        self._last_sent: asyncio.Task[None] | None = None
        self._closed = False
        self.flushes = 0
        """Batches sent (each one pipeline, plus one more only after a NOSCRIPT)."""
        self.flushed_calls = 0
        """Calls sent in those batches."""

    async def call(self, script: LuaScript, keys: tuple[str, ...], args: tuple[Arg, ...]) -> Any:
        """Run ``script`` in the next flush and return its raw reply.

        Raises the translated store error for this call alone. If the caller is
        cancelled before the flush picks its call up, the call is dropped (never sent);
        once sent, its outcome is whatever Redis did.
        """
        if self._closed:
            raise StoreClosed
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.append(_Call(script, keys, args, future))
        if self._task is None:
            self._start()
        return await future

    def _start(self) -> None:
        """A task for the calls queued. Its first step runs on the next loop
        iteration, so every call made in this iteration (e.g. by the tasks of one
        asyncio.gather) joins the batch."""
        task = asyncio.get_running_loop().create_task(
            self._run(), name="solrace-store-group-commit"
        )
        self._task = task
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def call_replicated(
        self, script: LuaScript, keys: tuple[str, ...], args: tuple[Arg, ...]
    ) -> tuple[Any, int | None]:
        """:meth:`call`, answered once a replica of the keys' master holds the write,
        or ``REPLICA_WAIT_MS`` later: the raw reply, and how many replicas acknowledged
        it (0 if none did in time, or none could be asked: the slot was being migrated;
        None if there is no replica to ask — one Redis, or a master without replicas —
        and the call went the ordinary way). The replicas asked are always those of the
        master that ran the script: a MOVED reply sends both again to the new master."""
        client = self._client
        if self._link is not None or not isinstance(client, RedisCluster):
            return await self.call(script, keys, args), None
        if self._closed:
            raise StoreClosed
        try:
            await client.initialize()  # the slot map; a no-op once known
            master = client.get_node_from_key(keys[0])
            if master is None or not await _has_replicas(client, master):
                return await self.call(script, keys, args), None
            loads = 0
            for _ in range(MAX_REDIRECTS + 1 + SCRIPT_LOADS):  # and resends after loads
                pipe = client.pipeline(transaction=False)
                pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
                # WAIT counts the replicas holding everything its connection wrote
                # before it: the pipeline sends both on one connection to ``master``.
                pipe.execute_command("WAIT", 1, REPLICA_WAIT_MS, target_nodes=master)
                # Never redirected inside the pipeline: redis-py would resend a MOVED
                # script alone to the slot's new master while WAIT had asked the old
                # one, whose replicas say nothing of that write — a finish claimed
                # replicated that no replica held (tests/deploy/test_cluster_failover.py).
                reply, acked = await pipe.execute(raise_on_error=False, allow_redirections=False)
                if isinstance(reply, NoScriptError) and loads < SCRIPT_LOADS:
                    loads += 1
                    await client.script_load(script.source)  # it did not run: resend
                    continue
                if isinstance(reply, MovedError):
                    # It did not run: the slot has a new master (a failover, a
                    # resharding). Send both again there.
                    await client.nodes_manager.move_slot(reply)
                    master = client.get_node_from_key(keys[0])
                    if master is None or not await _has_replicas(client, master):
                        return await self.call(script, keys, args), None
                    continue
                if isinstance(reply, AskError):
                    break  # the slot is being migrated: below
                if isinstance(reply, BaseException):
                    raise reply
                return reply, acked if isinstance(acked, int) else 0
            # Still redirected (a slot in migration answers ASK, or MOVED again): the
            # ordinary way follows the redirection; no replica was asked, so none is
            # claimed.
            return await self.call(script, keys, args), 0
        except StoreUnavailable:
            raise
        except Exception as exc:
            raise translate(exc) from exc

    async def close(self) -> None:
        """Refuse new calls and wait until everything queued has been flushed."""
        self._closed = True
        try:
            while self._in_flight:  # (a batch's task may start the next: calls past it)
                await asyncio.shield(asyncio.gather(*self._in_flight, return_exceptions=True))
        finally:
            if self._link is not None:
                await self._link.close()

    async def _run(self) -> None:
        if self._link is not None:
            await self._run_one_batch(self._link)
            return
        try:
            while self._queue:
                batch = self._take_batch()
                if batch:
                    await self._flush(batch)
        except BaseException as exc:
            # Only a cancellation of this task gets here (_flush handles everything
            # else): fail whatever is still queued so no caller waits forever.
            self._fail_queued(exc)
            raise
        finally:
            # No await between the emptiness check above and this line, so no call can
            # have been queued in between: the next call will start a new task.
            self._task = None

    async def _run_one_batch(self, link: RespLink) -> None:
        """On the link: take a slot on the wire (calls queue meanwhile and go together),
        then the batch, and flush it. Once the batch is taken the next call starts the
        next batch's task, which writes its batch after this one's (a task's steps run
        in the order the tasks were made, and this one writes before it first waits),
        without waiting for this one's replies. One task a batch, as the one flusher
        was when batches did not overlap (a task more a move cost 3 % of a move's
        instructions, docs/performance.md round 24)."""
        task = asyncio.current_task()
        try:
            await self._window.acquire()
        except BaseException as exc:
            self._task = None
            self._fail_queued(exc)
            raise
        try:
            batch = self._take_batch()
            after, self._last_sent = self._last_sent, task
            self._task = None
            if self._queue:  # more than a batch was queued: the rest is the next one's
                self._start()
            if batch:
                await self._flush(batch, after)
        finally:
            self._window.release()

    def _take_batch(self) -> list[_Call]:
        batch: list[_Call] = []
        while self._queue and len(batch) < self._max_batch:
            call = self._queue.popleft()
            if not call.future.done():  # done = its caller was cancelled
                batch.append(call)
        return batch

    def _fail_queued(self, exc: BaseException) -> None:
        while self._queue:
            _fail(self._queue.popleft().future, exc)

    async def _flush(self, batch: list[_Call], after: asyncio.Task[None] | None = None) -> None:
        self.flushes += 1
        self.flushed_calls += len(batch)
        try:
            replies = await self._execute(batch, after)
        except BaseException as exc:
            for call in batch:
                _fail(call.future, exc)
            if not isinstance(exc, Exception):
                raise
            return
        for call, reply in zip(batch, replies, strict=True):
            if call.future.done():
                continue
            if isinstance(reply, BaseException):
                call.future.set_exception(translate(reply))
            else:
                call.future.set_result(reply)

    async def _execute(
        self, batch: list[_Call], after: asyncio.Task[None] | None = None
    ) -> list[Any]:
        """Each call's reply (or exception), in batch order. ``after``: the batch sent
        before this one on the link, if it may still be in flight (see
        :meth:`_execute_group`).

        On one Redis the whole batch is one pipeline. On a cluster it is one pipeline
        per master (grouped by the master that owns each call's slot), sent
        concurrently: a script may only run on the master of its keys, and a master
        that fails (connection lost, failover under way) then fails only its own
        calls — the others' outcomes are known and are reported as they are.
        """
        groups: list[list[int]]
        if self._link is None and isinstance(self._client, RedisCluster):
            await self._client.initialize()  # the slot map; a no-op once known
            by_node: dict[str, list[int]] = {}
            for i, call in enumerate(batch):
                node = self._client.get_node_from_key(call.keys[0])
                by_node.setdefault(node.name if node is not None else "", []).append(i)
            groups = list(by_node.values())
        else:
            groups = [list(range(len(batch)))]
        results: list[Any] = [_PENDING] * len(batch)
        outcomes: list[BaseException | None]
        if len(groups) == 1:  # one Redis: no task to gather (one per flush was measurable)
            try:
                await self._execute_group(batch, groups[0], results, after)
                outcomes = [None]
            except Exception as exc:
                outcomes = [exc]
        else:
            outcomes = await asyncio.gather(
                *(self._execute_group(batch, group, results) for group in groups),
                return_exceptions=True,
            )
        for group, outcome in zip(groups, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                for i in group:
                    # a call whose reply came before the failure keeps it (e.g. the
                    # calls that ran when SCRIPT LOAD for the others then failed)
                    if results[i] is _PENDING:
                        results[i] = outcome
        return results

    async def _execute_group(
        self,
        batch: list[_Call],
        group: list[int],
        results: list[Any],
        after: asyncio.Task[None] | None = None,
    ) -> None:
        """One pipeline of EVALSHAs; on NOSCRIPT load the scripts and resend only those.

        A NOSCRIPT reply means that call did not run, so resending it cannot apply
        anything twice. Calls that did run are never resent. ``SCRIPT LOAD`` goes to
        every master of a cluster (redis-py routes it so): a master promoted by a
        failover starts without scripts. EVALSHA is queued with ``execute_command``
        because redis-py's cluster pipeline refuses its ``evalsha`` method; the cluster
        pipeline still routes the command by its keys and follows MOVED/ASK (which mean
        the command did not run) one command at a time, in order.
        """
        todo = group
        for loads in range(SCRIPT_LOADS + 1):
            replies = await self._send(batch, todo)
            missing: list[int] = []
            for i, reply in zip(todo, replies, strict=True):
                if loads < SCRIPT_LOADS and isinstance(reply, NoScriptError):
                    missing.append(i)
                else:
                    results[i] = reply
            if not missing:
                break
            if after is not None:
                # Batches overlap on the link, so the ones after this one met the same
                # missing scripts: resent only once the batch before this one is done
                # (its own resend included), they run in the order they were sent, as
                # one batch at a time did (tests/store/test_link.py).
                await asyncio.wait([after])
            for script in {batch[i].script for i in missing}:
                await self._client.script_load(script.source)
            todo = missing

    async def _send(self, batch: list[_Call], todo: list[int]) -> list[Any]:
        """The EVALSHAs of ``todo`` in one round trip; replies (errors as exceptions)
        in order."""
        if self._link is not None:
            return await self._link.execute(
                [
                    ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)
                    for call in (batch[i] for i in todo)
                ]
            )
        pipe = self._client.pipeline(transaction=False)
        for i in todo:
            call = batch[i]
            pipe.execute_command("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies
