"""The core's handle on one model instance: its worker process, health and restarts.

One ``instance_group`` entry with ``count: N`` gives N instances, each in its
own worker process. An instance whose worker dies (or stops answering pings)
is taken out of scheduling at once, its in-flight requests fail with the
reason, and it is restarted with back-off (0.5 s doubling to 30 s) until it
is READY again or the model unloads. Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import TritonError
from .memory.pool import TensorPool
from .scheduler.base import Batch
from .worker.process import WorkerProcess
from .worker.protocol import Kind

log = logging.getLogger("tritium.model")

__all__ = ["InstanceOptions", "ModelInstance"]


@dataclass(slots=True)
class InstanceOptions:
    """How instances start and are watched.

    :ivar python: interpreter of the worker processes.
    :ivar log_verbose: the workers' log verbosity.
    :ivar init_timeout_s: deadline for start-up and each initialize call, seconds.
    :ivar ping_interval_s: seconds between health pings.
    :ivar ping_timeout_s: a worker that does not answer a ping within this is killed.
    :ivar restart_backoff_s: first restart delay (doubles up to ``restart_backoff_max_s``).
    """

    python: str = sys.executable
    log_verbose: int = 0
    init_timeout_s: float = 120.0
    ping_interval_s: float = 5.0
    ping_timeout_s: float = 10.0
    restart_backoff_s: float = 0.5
    restart_backoff_max_s: float = 30.0
    shutdown_timeout_s: float = 30.0
    bls: Any = None  # the core's BLS router (tritium.core.bls.BlsRouter), set by the server
    env: dict[str, str] | None = None  # environment variables of the workers (a model environment)
    execute_timeout_s: float = 0.0  # kill a worker whose batch runs longer (0: no limit)
    rate_limiter: Any = None  # the server's RateLimiter (tritium.core.scheduler.rate_limiter), when on


class ModelInstance:
    """One model instance (one worker process).

    :param name: Triton's instance name (``<group name>_<index>``).
    :param kind: ``KIND_CPU`` or ``KIND_GPU``.
    :param device_id: GPU id (0 for CPU).
    :param model_settings: the INIT_MODEL settings (backend, paths, ...), without the config.
    :param pool: the core's tensor pool.
    :param options: start-up and health settings.
    :param on_ready: called when the instance (re)becomes able to take batches.
    :param on_lost: called with the reason when it stops being able to.
    """

    def __init__(
        self,
        name: str,
        kind: str,
        device_id: int,
        model_settings: dict[str, Any],
        pool: TensorPool,
        options: InstanceOptions,
        on_ready: Callable[[ModelInstance], None],
        on_lost: Callable[[ModelInstance, str], None],
    ) -> None:
        self.name = name
        self.kind = kind
        self.device_id = device_id
        self._settings = model_settings
        self._pool = pool
        self._options = options
        self._on_ready = on_ready
        self._on_lost = on_lost
        self.worker: WorkerProcess | None = None
        self.ready = False
        self.restarts = 0
        self._config: dict[str, Any] | None = None
        self._stopping = False
        self._tasks: set[asyncio.Task[Any]] = set()
        #: the resources and priority its group's ``rate_limiter`` asks for (None: not limited)
        self.rate_demand: Any = None

    @property
    def available(self) -> bool:
        """True when the instance can take a batch now."""
        return self.ready and self.worker is not None and self.worker.alive

    @property
    def pid(self) -> int | None:
        """PID of the worker process (None before start)."""
        return self.worker.pid if self.worker else None

    # -- start -----------------------------------------------------------------
    async def start_model(self, config: dict[str, Any], auto_complete: bool) -> dict[str, Any]:
        """Spawn the worker and run the backend's model initialization.

        :returns: the model config after the backend's auto-complete (JSON form).
        :raises TritonError: why the worker or the backend failed.
        """
        worker = WorkerProcess(
            self.name,
            self._pool,
            self._worker_exited,
            self._options.python,
            self._options.log_verbose,
            self._options.bls,
            self._options.env,
            self._settings.get("model_path"),
            self._options.execute_timeout_s,
        )
        self.worker = worker
        await worker.start(self._options.init_timeout_s)
        settings = dict(self._settings, config=config, auto_complete=auto_complete)
        reply = await worker.call(Kind.INIT_MODEL, settings, self._options.init_timeout_s)
        return dict(reply["config"])

    async def start_instance(self, config: dict[str, Any]) -> None:
        """Run the backend's instance initialization with the final config; then the instance is ready.

        :raises TritonError: why it failed (the worker is then stopped).
        """
        assert self.worker is not None
        self._config = config
        settings = {"name": self.name, "kind": self.kind, "device_id": self.device_id, "config": config}
        try:
            await self.worker.call(Kind.INIT_INSTANCE, settings, self._options.init_timeout_s)
        except TritonError:
            await self.worker.stop(self._options.shutdown_timeout_s)
            raise
        self.ready = True
        self._spawn(self._ping_loop(self.worker))
        self._on_ready(self)

    async def start(self, config: dict[str, Any]) -> None:
        """Start with a final config (no auto-complete): model then instance initialization."""
        try:
            await self.start_model(config, auto_complete=False)
        except TritonError:
            if self.worker is not None:
                await self.worker.stop(self._options.shutdown_timeout_s)
            raise
        await self.start_instance(config)

    # -- data path ---------------------------------------------------------------
    def execute(self, batch: Batch) -> None:
        """Send a batch to the worker (fails it at once when the worker is gone).

        With the rate limiter on, the batch first waits for the resources of
        the instance's group; they are given back when the execute returns.
        """
        assert self.worker is not None
        limiter, demand = self._options.rate_limiter, self.rate_demand
        if limiter is None or demand is None:
            self.worker.execute(batch)
            return
        worker = self.worker

        def start() -> None:
            batch.add_finalizer(lambda: limiter.release(demand))
            worker.execute(batch)

        limiter.submit(demand, start, self)

    # -- health and restarts -------------------------------------------------------
    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ping_loop(self, worker: WorkerProcess) -> None:
        while worker.alive and not self._stopping:
            await asyncio.sleep(self._options.ping_interval_s)
            if not worker.alive or self._stopping:
                return
            if worker.busy:  # executing: the control channel answers between batches; the heartbeat thread now
                if not await worker.heartbeat(self._options.ping_timeout_s) and worker.alive and worker.busy:
                    reason = (
                        f"stopped answering health checks for {self._options.ping_timeout_s:g} s while executing "
                        "and was killed"
                    )
                    log.error("model instance '%s' %s", self.name, reason)
                    worker.kill(reason)
                    return
                continue
            try:
                await worker.ping(self._options.ping_timeout_s)
            except TritonError as exc:
                log.error("model instance '%s' failed its health check: %s", self.name, exc)
                worker.kill()
                return

    def _worker_exited(self, worker: WorkerProcess, how: str) -> None:
        if worker is not self.worker:
            return
        was_ready = self.ready
        self.ready = False
        if self._stopping:
            return
        self._on_lost(self, how)
        if was_ready and self._config is not None:
            self._spawn(self._restart())

    async def _restart(self) -> None:
        delay = self._options.restart_backoff_s
        while not self._stopping:
            await asyncio.sleep(delay)
            if self._stopping or self._config is None:
                return
            log.info("restarting model instance '%s'", self.name)
            try:
                await self.start(self._config)
            except TritonError as exc:
                log.error("restart of model instance '%s' failed: %s", self.name, exc)
                delay = min(delay * 2, self._options.restart_backoff_max_s)
                continue
            self.restarts += 1
            log.info("model instance '%s' restarted (pid %s)", self.name, self.pid)
            return

    # -- stop ------------------------------------------------------------------------
    async def stop(self) -> None:
        """Finalize the backend and end the worker (killed after the shutdown timeout)."""
        self._stopping = True
        self.ready = False
        for task in list(self._tasks):
            task.cancel()
        if self.worker is not None:
            await self.worker.stop(self._options.shutdown_timeout_s)
