"""The worker supervisor: which worker processes run, who is placed in them, their health.

Model instances ask for the worker of their :class:`~.placement.Placement`
(:meth:`WorkerSupervisor.acquire`): a running one with that placement's key, or a new one
(forked from the template process through the :class:`~.launcher.TemplateLauncher`, or
spawned in a model's own Python environment). Instances that ask while it starts wait for
the same start. A worker with no instance left is stopped (:meth:`release`).

The supervisor checks each worker's health (PING between batches, the heartbeat thread
while it executes; one that does not answer within the ping timeout is killed) and, when a
worker goes away, tells every instance placed in it: each fails its requests in flight,
leaves scheduling and restarts with back-off in a new worker of the same placement
(:mod:`~tritium.core.model.instance`). Core process, event loop.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import Code, TritonError
from ..memory.pool import TensorPool
from .launcher import TemplateLauncher
from .placement import Placement
from .process import BlsHandler, WorkerProcess
from .reply_poll import ReplyPoll


class WorkerSettings(Protocol):
    """What starting and watching a worker takes (``InstanceOptions`` of :mod:`~tritium.core.model.instance`)."""

    python: str
    log_verbose: int
    bls: BlsHandler | None
    env: dict[str, str] | None
    init_timeout_s: float
    ping_interval_s: float
    ping_timeout_s: float


log = logging.getLogger("tritium.worker")

__all__ = ["WorkerSupervisor"]


@dataclass(slots=True)
class _Entry:
    worker: WorkerProcess
    starting: asyncio.Task[None]
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)


class WorkerSupervisor:
    """The server's worker processes, by placement key.

    :param pool: the core's tensor pool.
    :param python: the server's interpreter (the template process runs it).
    :param backend_directory: the global backend directory (the template preloads its python backend).
    :param fork: fork workers from the template process (False: start each as a program).
    :param reply_poll_us: how long the core polls a fast worker's socket for its reply while
        that worker's batch is the only one in flight, µs (see :mod:`.reply_poll`; 0: never).
    """

    def __init__(
        self, pool: TensorPool, python: str, backend_directory: str, fork: bool = True, reply_poll_us: int = 0
    ) -> None:
        self.pool = pool
        self.reply_poll = ReplyPoll(reply_poll_us) if reply_poll_us else None
        self.launcher = TemplateLauncher(python, backend_directory) if fork else None
        self._workers: dict[tuple[Any, ...], _Entry] = {}

    @property
    def workers(self) -> list[WorkerProcess]:
        """The worker processes running now."""
        return [entry.worker for entry in self._workers.values()]

    async def acquire(self, placement: Placement, options: WorkerSettings) -> WorkerProcess:
        """The running worker of ``placement``, started first when there is none.

        The caller places its instance at once (:meth:`WorkerProcess.place_instance`, no
        ``await`` in between), so the worker is not stopped under it.

        :param options: the instance options (interpreter, environment, log level, BLS,
            health and timeout settings).
        :raises TritonError: INTERNAL when the worker cannot start.
        """
        entry = self._workers.get(placement.key)
        if entry is not None and entry.starting.done() and not entry.worker.alive:
            del self._workers[placement.key]  # gone since it started: a new one
            entry = None
        if entry is None:
            worker = WorkerProcess(
                placement.label,
                self.pool,
                self._exited,
                options.python,
                options.log_verbose,
                options.bls,
                options.env,
                placement.cwd,
                self.launcher,
                placement.preload,
                self.reply_poll,
            )
            entry = _Entry(worker, asyncio.ensure_future(self._start(placement.key, worker, options)))
            self._workers[placement.key] = entry
        try:
            await asyncio.shield(entry.starting)
        except BaseException:
            if self._workers.get(placement.key) is entry:
                del self._workers[placement.key]
            raise
        if not entry.worker.alive:
            raise TritonError(Code.INTERNAL, f"worker process '{placement.label}' exited as it started")
        return entry.worker

    async def _start(self, key: tuple[Any, ...], worker: WorkerProcess, options: WorkerSettings) -> None:
        await worker.start(options.init_timeout_s)
        entry = self._workers.get(key)
        if entry is not None and entry.worker is worker:  # (not forgotten while it started)
            task = asyncio.ensure_future(self._ping_loop(worker, options))
            entry.tasks.add(task)
            task.add_done_callback(entry.tasks.discard)

    async def release(self, worker: WorkerProcess, timeout_s: float) -> None:
        """Stop ``worker`` when no instance is placed in it any more (finalizing its backends)."""
        if worker.instances or worker.models:
            return
        self._forget(worker)
        await worker.stop(timeout_s)

    def _forget(self, worker: WorkerProcess) -> None:
        for key, entry in list(self._workers.items()):
            if entry.worker is worker:
                del self._workers[key]
                for task in entry.tasks:
                    task.cancel()

    def _exited(self, worker: WorkerProcess, how: str) -> None:
        """``worker`` went away unasked: every instance placed in it is told (they restart)."""
        self._forget(worker)
        for owner in list(worker.instances.values()):
            owner.worker_exited(worker, how)

    async def _ping_loop(self, worker: WorkerProcess, options: WorkerSettings) -> None:
        while worker.alive:
            await asyncio.sleep(options.ping_interval_s)
            if not worker.alive:
                return
            if worker.calling:  # a model (de)initializes: a backend may hold the interpreter for long
                continue  # (compiling a model); the call's own deadline bounds it
            if worker.busy:  # executing: the control channel answers between batches; the heartbeat thread now
                if not await worker.heartbeat(options.ping_timeout_s) and worker.alive and worker.busy:
                    reason = (
                        f"stopped answering health checks for {options.ping_timeout_s:g} s while executing "
                        "and was killed"
                    )
                    log.error("worker process '%s' (pid %s) %s", worker.label, worker.pid, reason)
                    worker.kill(reason)
                    return
                continue
            try:
                await worker.ping(options.ping_timeout_s)
            except TritonError as exc:
                log.error("worker process '%s' failed its health check: %s", worker.label, exc)
                worker.kill()
                return

    async def close(self, timeout_s: float = 30.0) -> None:
        """Stop every worker still running and the template process (at shutdown)."""
        entries, self._workers = list(self._workers.values()), {}
        for entry in entries:
            for task in entry.tasks:
                task.cancel()
        await asyncio.gather(*(entry.worker.stop(timeout_s) for entry in entries), return_exceptions=True)
        if self.launcher is not None:
            await self.launcher.close()
