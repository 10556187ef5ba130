"""The core's handle on one worker process: start, calls, batches, ping, stop.

A worker hosts one model instance or, shared, the instances of many models (see
:mod:`.main`); this handle gives each model and instance placed in it its id in the
worker, runs each model's initialization there once (:meth:`WorkerProcess.init_model`),
and sends each batch to the instance it names. Runs on the core's event loop. Every wait
has a deadline and ends early when the worker exits; a worker that exits or breaks
protocol fails everything it had in flight, each request naming its own model instance,
and tells its owner (the worker supervisor), which tells the instances it hosted.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import Code, TritonError
from ..memory.arena import Segment
from ..memory.pool import TensorPool
from ..observability.custom_metrics import WorkerCustomMetrics
from ..observability.logging import log_manager
from .cancel_board import CancelBoard
from .channel import AsyncChannel
from .heartbeat import Heartbeat
from .launcher import ProcessHandle, TemplateError, TemplateLauncher, spawn_worker
from .log_relay import relay_worker_log
from .protocol import PROTOCOL_VERSION, Kind, ResponseFlag
from .reply_poll import ReplyPoll
from .timeouts import ExecuteTimeouts

log = logging.getLogger("tritium.worker")

__all__ = ["WorkerProcess", "BatchSink", "BlsHandler", "WorkerExited", "RELEASE_DELAY_S"]

_worker_ids = itertools.count(1)
#: seconds released output blocks wait for an EXECUTE frame to travel with (then a RELEASE frame)
RELEASE_DELAY_S = 0.01
_FINAL, _RESCHEDULE = int(ResponseFlag.FINAL), int(ResponseFlag.RESCHEDULE)
_RESPONSE, _EXECUTE_DONE = int(Kind.RESPONSE), int(Kind.EXECUTE_DONE)


class WorkerExited(TritonError):
    """The worker process is gone (exit status in the message)."""


class BlsHandler(Protocol):
    """Runs the BLS requests a worker sends (see :mod:`tritium.core.model.bls`)."""

    def start(self, worker: WorkerProcess, call_id: int, request: dict[str, Any]) -> None: ...

    def release(self, worker: WorkerProcess, call_id: int, index: int) -> None: ...

    def forget(self, worker: WorkerProcess) -> None: ...


class BatchSink(Protocol):
    """What the core hands a worker to execute, and where results go."""

    wire_requests: list[dict[str, Any]]
    #: the model instance that runs it (``name`` is what errors call it)
    executor: Any

    @property
    def payloads(self) -> Sequence[Any]:
        """The batch's requests, in order, each with ``fail(error)``."""
        ...

    @property
    def complete(self) -> bool:
        """True once every request got its final response or was rescheduled."""
        ...

    def on_response(
        self,
        index: int,
        outputs: list[list[Any]],
        error: TritonError | None,
        parameters: dict[str, Any] | None,
        final: bool,
        worker: WorkerProcess,
        rescheduled: bool = False,
    ) -> None: ...

    def on_done(self, timings: Sequence[int] | None, error: TritonError | None) -> None: ...


@dataclass(slots=True)
class HostedModel:
    """A model placed in a worker: its id there, its INIT_MODEL reply, how many instances use it.

    :ivar id: the model's id in the worker.
    :ivar reply: the INIT_MODEL call (its result: the config after auto-complete).
    :ivar instances: instances of this model placed in the worker (finalized at 0).
    """

    id: int
    reply: asyncio.Future[Any] = field(repr=False)
    instances: int = 0


class WorkerProcess:
    """One worker process, hosting one model instance or, shared, the instances of many models.

    :param label: how logs and errors name it (the model instance name, for a worker of one).
    :param pool: the core's :class:`TensorPool`.
    :param on_exit: called once, with this handle and a description of how it
        exited, when the process goes away without being asked to.
    :param python: the interpreter to start (a model environment's, or the server's).
    :param log_verbose: passed to the worker's logging.
    :param bls: runs the BLS requests the worker sends.
    :param env: environment variables added for the worker (a model environment's import path).
    :param cwd: the worker's working directory (a model's folder, or the backend's: never the
        server's, whose files could shadow the packages the worker imports).
    :param launcher: forks the worker from the template process (None, or a model
        environment: the worker starts as a program of ``python``).
    :param preload: frameworks the template imports before forking it (see :mod:`.preload`).
    """

    def __init__(
        self,
        label: str,
        pool: TensorPool,
        on_exit: Callable[[WorkerProcess, str], None],
        python: str = sys.executable,
        log_verbose: int = 0,
        bls: BlsHandler | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        launcher: TemplateLauncher | None = None,
        preload: tuple[str, ...] = (),
        reply_poll: ReplyPoll | None = None,
    ) -> None:
        self.id = next(_worker_ids)
        self._reply_poll = reply_poll
        #: this worker's usual reply time, ns (EXECUTE sent to EXECUTE_DONE received; moving average)
        self._reply_ns = reply_poll.window_ns / 2 if reply_poll is not None else 0.0
        self._reply_known = False
        self._lone_sent_ns = 0  # when the batch in flight was sent, while it was the server's only one
        self.preload = preload
        self.bls = bls
        self.env = env
        self.cwd = cwd
        self.launcher = launcher
        #: model instances placed here: instance id -> its owner (see :meth:`place_instance`)
        self.instances: dict[int, Any] = {}
        #: models placed here, by the key of their load (see :meth:`init_model`)
        self.models: dict[Any, HostedModel] = {}
        self._ids = itertools.count(1)  # model and instance ids in this worker
        self._timeouts = ExecuteTimeouts(self._execute_timed_out)
        self._kill_reason = ""
        self.label = label
        self.pool = pool
        self._on_exit = on_exit
        self.python = python
        self.log_verbose = log_verbose
        self.pid: int | None = None
        self._proc: ProcessHandle | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._channel: AsyncChannel | None = None
        self._hello: asyncio.Future[list[Any]] | None = None
        self._calls: dict[int, asyncio.Future[Any]] = {}
        self._call_ids = itertools.count(1)
        self._batches: dict[int, BatchSink] = {}
        # batches whose execute returned while some of their requests still wait for their final
        # response (decoupled models answer from other threads after execute returns)
        self._open: dict[int, BatchSink] = {}
        self._batch_ids = itertools.count(1)
        self._pings: dict[int, asyncio.Future[None]] = {}
        self._exited: asyncio.Future[str] | None = None
        self._stopping = False
        self._dead = False
        self._releases: list[list[int]] = []  # output blocks to give back with the next EXECUTE
        self._release_timer: asyncio.TimerHandle | None = None
        self._heartbeat: Heartbeat | None = None
        self._cancels: CancelBoard | None = None  # created once the worker said HELLO
        #: the custom metrics its model code made (pb_utils ``MetricFamily``), read at scrape time
        self.metrics = WorkerCustomMetrics(pool.segments.resolve)

    # -- lifecycle ----------------------------------------------------------
    async def start(self, timeout: float = 60.0) -> None:
        """Start the process (forked from the template, else spawned) and wait for its HELLO.

        :raises TritonError: INTERNAL when it cannot start, exits, speaks
            another protocol version, or says nothing within ``timeout`` seconds.
        """
        loop = asyncio.get_running_loop()
        made: list[socket.socket] = []
        try:  # (out of descriptors, EMFILE: nothing made so far is kept)
            parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            made += (parent, child)
            beat, beat_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            made += (beat, beat_child)
            log_read, log_write = os.pipe()  # the worker's stderr: its log records, relayed by the core
        except OSError as exc:
            for sock in made:
                sock.close()
            raise TritonError(Code.INTERNAL, f"{self.label}: cannot start worker process: {exc}") from exc
        self._exited = loop.create_future()
        self._hello = loop.create_future()
        verbose = max(self.log_verbose, log_manager().log_verbose_level)  # the level now, not at start-up
        try:
            self._proc = None
            if self.launcher is not None and not self.env:
                try:
                    self._proc = await self.launcher.fork(
                        self.id,
                        verbose,
                        self.cwd,
                        [child.fileno(), beat_child.fileno(), log_write],
                        self.preload,
                        self.label,
                    )
                except TemplateError as exc:
                    log.warning("%s: %s; starting the worker as a program instead", self.label, exc.message)
            if self._proc is None:
                self._proc = await spawn_worker(
                    self.python, self.id, verbose, child, beat_child, log_write, self.env, self.cwd, self.label
                )
        except OSError as exc:
            parent.close()
            beat.close()
            os.close(log_read)
            raise TritonError(Code.INTERNAL, f"{self.label}: cannot start worker process: {exc}") from exc
        finally:
            child.close()
            beat_child.close()
            os.close(log_write)
        self._heartbeat = Heartbeat(beat)
        self.pid = self._proc.pid
        self._log_task = asyncio.ensure_future(relay_worker_log(log_read, self.label, self.pid))
        self._channel = AsyncChannel(
            parent, self._on_message, self._on_close, self._poll_budget if self._reply_poll is not None else None
        )
        self._spawn(self._watch(self._proc))
        hello = await self._wait(self._hello, timeout, "start")
        if hello[1] != PROTOCOL_VERSION:
            self.kill()
            raise TritonError(
                Code.INTERNAL,
                f"{self.label}: worker speaks protocol version {hello[1]}, the core speaks {PROTOCOL_VERSION}; "
                "the model environment has a different tritium installed",
            )
        self._cancels = CancelBoard.create()
        self._channel.send([Kind.CANCEL_BOARD, self._cancels.segment.size], [self._cancels.fd])

    def _spawn(self, coro: Any) -> None:
        """Run ``coro`` as a task held by this handle (a task nothing refers to may be collected)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _watch(self, proc: ProcessHandle) -> None:
        returncode = await proc.wait()
        if returncode is None:
            how = "exited"
        elif returncode < 0:
            try:
                how = f"was killed by signal {signal.Signals(-returncode).name}"
            except ValueError:
                how = f"was killed by signal {-returncode}"
        else:
            how = f"exited with status {returncode}"
        if self._exited is not None and not self._exited.done():
            self._exited.set_result(how)
        self._lost(how)

    def _on_close(self, exc: BaseException | None) -> None:
        # The socket closed: the process is exiting (wait briefly for its
        # status, for a better message) or broke protocol (kill it).
        if isinstance(exc, ConnectionResetError):  # it died with frames unread: the exit status tells more
            exc = None
        if exc is not None:
            log.error("%s: control channel failed: %s", self.label, exc)
            self.kill()
        self._spawn(self._lost_after_exit())

    async def _lost_after_exit(self) -> None:
        how = "closed its control channel"
        if self._exited is not None:
            try:
                how = await asyncio.wait_for(asyncio.shield(self._exited), timeout=2.0)
            except TimeoutError:
                self.kill()
        self._lost(how)

    def _lost(self, how: str) -> None:
        """The worker is gone: tell the owner first (no new work), then fail what was in flight."""
        if self._dead:
            return
        self._dead = True
        how = self._kill_reason or how
        self._timeouts.cancel_all()
        if self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None
        self._releases = []
        if self._channel is not None:
            self._channel.close()
        if self._heartbeat is not None:
            self._heartbeat.close()
        if self._cancels is not None:
            self._cancels.close()
            self._cancels = None
        self.metrics.clear()
        if not self._stopping:
            if len(self.instances) > 1:
                executing = sorted({batch.executor.name for batch in self._batches.values()})
                log.error(
                    "worker process '%s' (pid %s, hosting %d model instances) %s%s",
                    self.label,
                    self.pid,
                    len(self.instances),
                    how,
                    f"; executing then: {', '.join(executing)}" if executing else "",
                )
            else:
                log.error("model instance '%s': worker process (pid %s) %s", self._instance_label(), self.pid, how)
            self._on_exit(self, how)
        self._fail_all(how)

    def _instance_label(self) -> str:
        """The name of the one instance placed here (else the worker's label)."""
        if len(self.instances) == 1:
            return str(next(iter(self.instances.values())).name)
        return self.label

    def _fail_all(self, how: str) -> None:
        error = WorkerExited(Code.INTERNAL, f"model instance '{self._instance_label()}': worker process {how}")
        for fut in list(self._calls.values()) + list(self._pings.values()):
            if not fut.done():
                fut.set_exception(error)
        if self._hello is not None and not self._hello.done():
            self._hello.set_exception(error)
        for hosted in self.models.values():
            if not hosted.reply.done():
                hosted.reply.set_exception(error)
                hosted.reply.exception()  # retrieved: an instance that never awaited it is not an error
        self._calls.clear()
        self._pings.clear()
        batches, self._batches = self._batches, {}
        if self._reply_poll is not None:
            self._reply_poll.in_flight -= len(batches)
        for batch in batches.values():
            batch.on_done(None, self._exited_error(batch, how))
        open_batches, self._open = self._open, {}
        for batch in open_batches.values():
            batch_error = self._exited_error(batch, how)
            for payload in batch.payloads:
                payload.fail(batch_error)
        self.pool.forget_peer(self)
        self.pool.remove_owner(self.id)
        if self.bls is not None:
            self.bls.forget(self)

    @staticmethod
    def _exited_error(batch: BatchSink, how: str) -> WorkerExited:
        """The error of a request of ``batch`` when the worker went away: it names its own instance."""
        return WorkerExited(Code.INTERNAL, f"model instance '{batch.executor.name}': worker process {how}")

    @property
    def alive(self) -> bool:
        """True while the process runs and its channel is open."""
        return not self._dead and self._channel is not None and not self._channel.closed

    @property
    def calling(self) -> bool:
        """True while an INIT_* / FINALIZE_* / SHUTDOWN call waits for its reply (each has its own deadline)."""
        return bool(self._calls)

    @property
    def busy(self) -> bool:
        """True while a batch is executing (the worker answers PINGs only between batches)."""
        return bool(self._batches)

    async def heartbeat(self, timeout: float) -> bool:
        """Whether the worker's heartbeat thread answers within ``timeout`` s (works while it executes)."""
        if self._heartbeat is None or not self.alive:
            return False
        return await self._heartbeat.ping(timeout)

    def kill(self, reason: str = "") -> None:
        """SIGKILL the process (ours, by PID); no-op when it is gone.

        :param reason: how its requests' errors and the log say it ended ("... and was killed").
        """
        if reason and not self._kill_reason:
            self._kill_reason = reason
        if self._proc is not None:
            self._proc.kill()

    async def stop(self, timeout: float = 30.0) -> None:
        """Ask the worker to finalize and exit; kill it after ``timeout`` seconds."""
        self._stopping = True
        if self.alive:
            try:
                await self.call(Kind.SHUTDOWN, None, timeout)
            except TritonError as exc:
                if not isinstance(exc, WorkerExited):
                    log.warning("%s: finalize failed: %s", self.label, exc)
        if self._channel is not None:
            self._channel.close()
        if self._exited is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._exited), timeout=5.0)
            except TimeoutError:
                self.kill()
                await asyncio.shield(self._exited)

    # -- calls ------------------------------------------------------------
    async def _wait(self, fut: asyncio.Future[Any], timeout: float, what: str, who: str = "") -> Any:
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            self.kill()
            raise TritonError(
                Code.INTERNAL,
                f"model instance '{who or self.label}': worker did not answer {what} within {timeout:g} s",
            ) from None

    async def call(self, kind: Kind, payload: Any, timeout: float, who: str = "") -> Any:
        """Send INIT_MODEL / INIT_INSTANCE / FINALIZE_* / SHUTDOWN and wait for the REPLY.

        :param who: the model instance the call is for (errors name it).
        :raises TritonError: the error the worker replied with, or INTERNAL
            when it exits or does not answer within ``timeout`` seconds (it is then killed).
        """
        if not self.alive or self._channel is None:
            raise WorkerExited(Code.INTERNAL, f"model instance '{who or self.label}': worker process is not running")
        call_id = next(self._call_ids)
        fut = asyncio.get_running_loop().create_future()
        self._calls[call_id] = fut
        self._channel.send([kind, call_id] if payload is None else [kind, call_id, payload])
        try:
            return await self._wait(fut, timeout, kind.name, who)
        finally:
            self._calls.pop(call_id, None)

    # -- models and instances placed here ---------------------------------------------
    def place_instance(self, owner: Any, execute_timeout_s: float = 0.0) -> int:
        """Place a model instance here: its id in this worker. ``owner`` (its core-side handle,
        with a ``name``) is told when the worker goes away (see the supervisor).

        :param execute_timeout_s: a batch of it still executing after this many seconds gets
            the worker killed; 0 waits forever.
        """
        instance_id = next(self._ids)
        self.instances[instance_id] = owner
        if execute_timeout_s > 0:
            self._timeouts.add_instance(instance_id, execute_timeout_s)
        return instance_id

    def remove_instance(self, instance_id: int) -> None:
        """The instance left (finalized, or never initialized)."""
        self.instances.pop(instance_id, None)
        self._timeouts.remove_instance(instance_id)

    async def init_model(self, key: Any, settings: dict[str, Any], timeout: float, who: str) -> tuple[int, Any]:
        """The model of load ``key`` initialized here (INIT_MODEL once, whoever asks first): its
        id in this worker and the INIT_MODEL result. Each caller holds one reference, given back
        with :meth:`release_model`.

        :raises TritonError: the model's initialization error (for every caller), or INTERNAL
            when the worker exits or does not answer.
        """
        hosted = self.models.get(key)
        if hosted is None:
            model_id = next(self._ids)
            hosted = self.models[key] = HostedModel(
                model_id,
                asyncio.ensure_future(self.call(Kind.INIT_MODEL, dict(settings, model_id=model_id), timeout, who)),
            )
        hosted.instances += 1
        return hosted.id, await asyncio.shield(hosted.reply)

    async def release_model(self, key: Any, timeout: float, who: str) -> None:
        """Give back one reference to the model of load ``key``; the last one finalizes it here."""
        hosted = self.models.get(key)
        if hosted is None:
            return
        hosted.instances -= 1
        if hosted.instances > 0:
            return
        try:
            if hosted.reply.done() and hosted.reply.exception() is None and self.alive:
                await self.call(Kind.FINALIZE_MODEL, hosted.id, timeout, who)
        finally:
            del self.models[key]  # only now: the worker is not stopped while it finalizes

    async def ping(self, timeout: float) -> None:
        """Round-trip a PING.

        :raises TritonError: INTERNAL when no PONG comes within ``timeout`` seconds (the worker is then killed).
        """
        if not self.alive or self._channel is None:
            raise WorkerExited(Code.INTERNAL, f"model instance '{self.label}': worker process is not running")
        nonce = next(self._call_ids)
        fut = asyncio.get_running_loop().create_future()
        self._pings[nonce] = fut
        self._channel.send([Kind.PING, nonce])
        try:
            await self._wait(fut, timeout, "PING")
        finally:
            self._pings.pop(nonce, None)

    # -- waiting for replies (see .reply_poll) ------------------------------------------
    def _poll_budget(self) -> int:
        assert self._reply_poll is not None
        return self._reply_poll.budget_ns(self._reply_ns)

    def _replied(self) -> None:
        """An EXECUTE_DONE came: one batch fewer in flight; learn the reply time of a lone batch."""
        assert self._reply_poll is not None
        self._reply_poll.in_flight -= 1
        if self._lone_sent_ns:
            took = time.perf_counter_ns() - self._lone_sent_ns
            self._lone_sent_ns = 0
            if self._reply_known:
                self._reply_ns += (took - self._reply_ns) * 0.125
            else:
                self._reply_ns, self._reply_known = float(took), True

    # -- data path ----------------------------------------------------------
    def execute(self, batch: BatchSink, instance_id: int) -> None:
        """Send one EXECUTE frame for ``batch`` to instance ``instance_id`` (segments it names go first).

        When the worker is not running, fails the batch at once.
        """
        if not self.alive or self._channel is None:
            batch.on_done(
                None,
                WorkerExited(Code.INTERNAL, f"model instance '{batch.executor.name}': worker process is not running"),
            )
            return
        for wire in batch.wire_requests:
            for descriptor in wire["inputs"]:
                self.pool.ensure_sent(descriptor[3], self)
            for descriptor in (wire.get("shm_outputs") or {}).values():
                self.pool.ensure_sent(descriptor[0], self)
        batch_id = next(self._batch_ids)
        self._batches[batch_id] = batch
        releases, self._releases = self._releases, []
        poll = self._reply_poll
        if poll is not None:
            poll.in_flight += 1
            self._lone_sent_ns = time.perf_counter_ns() if poll.in_flight == 1 else 0
        # lazy: the batches handed to this worker in one loop iteration go out in one write
        self._channel.send(
            [Kind.EXECUTE, batch_id, instance_id, batch.wire_requests, releases], lazy=True, poll=poll is not None
        )
        if self._timeouts.active:
            self._timeouts.handed(batch_id, instance_id)

    def cancel(self, payload: Any) -> bool:
        """Tell the model executing ``payload`` (a request of a batch sent here) that its client
        cancelled it: its ``is_cancelled()`` answers True from now on (see :mod:`.cancel_board`).

        :returns: False when no batch in flight here holds ``payload`` (or the board is full).
        """
        board = self._cancels
        if board is None:
            return False
        for batches in (self._batches, self._open):
            for batch_id, batch in batches.items():
                for index, held in enumerate(batch.payloads):
                    if held is payload:
                        return board.mark(batch_id, index, self._in_flight)
        return False

    def _in_flight(self, batch_id: int) -> bool:
        return batch_id in self._batches or batch_id in self._open

    def _execute_timed_out(self, batch_id: int, instance_id: int, seconds: float) -> None:
        del instance_id
        batch = self._batches.get(batch_id)
        if batch is not None and self.alive:
            shared = (
                f" (a worker shared with {len(self.instances) - 1} other model instances)"
                if len(self.instances) > 1
                else ""
            )
            self._kill_reason = (
                f"did not finish executing within the execute timeout of {seconds:g} s and was killed{shared}"
            )
            log.error("model instance '%s': a batch ran past its execute timeout", batch.executor.name)
            self.kill()

    def release(self, blocks: list[list[int]]) -> None:
        """Give output blocks (``[segment, offset]``) back to the worker.

        They travel with the next EXECUTE frame; a RELEASE frame carries them
        only when no EXECUTE goes out within :data:`RELEASE_DELAY_S` (an idle
        instance), so a busy instance costs no extra frame or system call.
        """
        if not blocks or self._dead:
            return
        if not self._releases and self._release_timer is None:
            self._release_timer = asyncio.get_running_loop().call_later(RELEASE_DELAY_S, self._flush_releases)
        self._releases.extend(blocks)

    def _flush_releases(self) -> None:
        self._release_timer = None
        releases, self._releases = self._releases, []
        if releases and self._channel is not None and not self._dead:
            self._channel.send([Kind.RELEASE, releases])

    def send_infer_response(self, frame: list[Any]) -> None:
        """Send an INFER_RESPONSE frame (a BLS response) to the worker."""
        if self._channel is not None:
            self._channel.send(frame)

    def send_segment(self, segment: Segment) -> None:
        """Send a core segment's fd (see :class:`TensorPool`)."""
        if self._channel is not None:
            self._channel.send([Kind.SEGMENT, segment.id, segment.size], [segment.fd])

    def send_region(self, region: Any) -> None:
        """Send a registered shared-memory region's fd (see :class:`TensorPool`)."""
        if self._channel is not None:
            self._channel.send([Kind.REGION, region.id, region.size, region.name, region.key], [region.fd])

    def drop_segment(self, segment_id: int) -> None:
        """Tell the worker a core segment (or a region) is gone."""
        if self._channel is not None:
            self._channel.send([Kind.DROP_SEGMENT, segment_id])

    # -- frames from the worker -----------------------------------------------
    def _respond(self, batch_id: int, index: int, flags: int, outputs: Any, error: Any, parameters: Any) -> None:
        """One response of request ``index`` of batch ``batch_id`` (from a RESPONSE or EXECUTE_DONE frame)."""
        batch = self._batches.get(batch_id) or self._open.get(batch_id)
        if batch is None:
            raise TritonError(Code.INTERNAL, f"RESPONSE for unknown batch {batch_id}")
        err = TritonError.from_wire(error) if error is not None else None
        batch.on_response(index, outputs, err, parameters, bool(flags & _FINAL), self, bool(flags & _RESCHEDULE))
        if batch_id in self._open and batch.complete:
            del self._open[batch_id]

    def _on_message(self, message: list[Any], fds: list[int]) -> None:
        kind = message[0]
        try:
            if kind == _RESPONSE:
                _, batch_id, index, flags, outputs, error, parameters = message
                self._respond(batch_id, index, flags, outputs, error, parameters)
            elif kind == _EXECUTE_DONE:
                for index, flags, outputs, error, parameters in message[3]:
                    self._respond(message[1], index, flags, outputs, error, parameters)
                if self._timeouts.active:
                    self._timeouts.done(message[1])
                batch = self._batches.pop(message[1], None)
                if batch is not None:
                    if self._reply_poll is not None:
                        self._replied()
                    batch.on_done(message[2], None)
                    if not batch.complete:
                        self._open[message[1]] = batch
            elif kind == Kind.SEGMENT:
                if len(fds) != 1:
                    raise TritonError(Code.INTERNAL, "SEGMENT frame without exactly one fd")
                seg_id, size = int(message[1]), int(message[2])
                if seg_id >> 24 != self.id:
                    os.close(fds[0])
                    raise TritonError(Code.INTERNAL, f"worker announced segment {seg_id:#x} it does not own")
                self.pool.segments.attach(seg_id, size, fds.pop())
            elif kind == Kind.DROP_SEGMENT:
                seg_id = int(message[1])
                if seg_id >> 24 == self.id:
                    self.pool.remove_segment(seg_id)
            elif kind == Kind.INFER:
                if self.bls is None:
                    raise TritonError(Code.INTERNAL, "BLS request from a worker that may not make them")
                self.bls.start(self, int(message[1]), message[2])
            elif kind == Kind.METRIC:
                self.metrics.add(message)
            elif kind == Kind.INFER_RELEASE:
                if self.bls is not None:
                    self.bls.release(self, int(message[1]), int(message[2]))
            elif kind == Kind.REPLY:
                _, call_id, error, result = message
                fut = self._calls.get(call_id)
                if fut is not None and not fut.done():
                    if error is not None:
                        fut.set_exception(TritonError.from_wire(error))
                    else:
                        fut.set_result(result)
            elif kind == Kind.PONG:
                fut = self._pings.get(message[1])
                if fut is not None and not fut.done():
                    fut.set_result(None)
            elif kind == Kind.HELLO:
                if self._hello is not None and not self._hello.done():
                    self._hello.set_result(message)
            else:
                raise TritonError(Code.INTERNAL, f"unexpected message kind {kind!r}")
        except (TritonError, ValueError, TypeError, IndexError) as exc:
            log.error("%s: bad frame from worker: %s", self.label, exc)
            for fd in fds:
                os.close(fd)
            self.kill()
