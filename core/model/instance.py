"""The core's handle on one model instance: its place in a worker process, and its restarts.

One ``instance_group`` entry with ``count: N`` gives N instances; each runs in the worker
process its :class:`~.worker.placement.Placement` names (the backend's shared worker, a
worker of the model's own, or one of its own: :mod:`.worker.placement`), on its own
thread there, so instances execute at the same time. An instance whose worker dies (or
stops answering its health checks) is taken out of scheduling at once, its in-flight
requests fail with the reason, and it is restarted with back-off (0.5 s doubling to 30 s)
in a new worker of its placement until it is READY again or the model unloads. Runs on the
core's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import TritonError
from ..memory.pool import TensorPool
from ..scheduler.base import Batch
from ..worker.placement import Placement
from ..worker.process import WorkerProcess
from ..worker.protocol import Kind
from ..worker.supervisor import WorkerSupervisor

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
    bls: Any = None  # the core's BLS router (tritium.core.model.bls.BlsRouter), set by the server
    env: dict[str, str] | None = None  # environment variables of the workers (a model environment)
    execute_timeout_s: float = 0.0  # kill a worker whose batch runs longer (0: no limit)
    rate_limiter: Any = None  # the server's RateLimiter (tritium.core.scheduler.rate_limiter), when on
    workers: WorkerSupervisor | None = None  # the server's worker processes, set by the repository manager


class ModelInstance:
    """One model instance, placed in a worker process.

    :param name: Triton's instance name (``<group name>_<index>``).
    :param kind: ``KIND_CPU`` or ``KIND_GPU``.
    :param device_id: GPU id (0 for CPU).
    :param model_settings: the INIT_MODEL settings (backend, paths, ...), without the config.
    :param pool: the core's tensor pool.
    :param options: start-up and health settings.
    :param placement: the worker it runs in.
    :param model_key: the load of the model it belongs to (its instances placed in one
        worker share the model's initialization there).
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
        placement: Placement,
        model_key: object,
        on_ready: Callable[[ModelInstance], None],
        on_lost: Callable[[ModelInstance, str], None],
    ) -> None:
        self.name = name
        self.kind = kind
        self.device_id = device_id
        self.placement = placement
        self._settings = model_settings
        self._pool = pool
        self._options = options
        self._model_key = model_key
        self._on_ready = on_ready
        self._on_lost = on_lost
        self.worker: WorkerProcess | None = None
        #: the instance's id in its worker (0: not placed)
        self.instance_id = 0
        self._model_id = 0
        self._holds_model = False  # holds a reference to the model's initialization in its worker
        self._initialized = False  # its worker ran its instance initialization
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
        """PID of the worker process it runs in (None while it has none running)."""
        return self.worker.pid if self.worker is not None and self.worker.alive else None

    def _supervisor(self) -> WorkerSupervisor:
        supervisor = self._options.workers
        assert supervisor is not None, "InstanceOptions.workers is set by the repository manager"
        return supervisor

    # -- start -----------------------------------------------------------------
    async def start_model(self, config: dict[str, Any], auto_complete: bool) -> dict[str, Any]:
        """Place the instance in its worker (started when needed) and have the backend's model
        initialization run there (once per worker for all the model's instances).

        :returns: the model config after the backend's auto-complete (JSON form).
        :raises TritonError: why the worker or the backend failed (the instance then leaves the worker).
        """
        worker = await self._supervisor().acquire(self.placement, self._options)
        self.worker = worker
        self.instance_id = worker.place_instance(self, self._options.execute_timeout_s)
        self._holds_model = True
        settings = dict(self._settings, config=config, auto_complete=auto_complete)
        try:
            self._model_id, reply = await worker.init_model(
                self._model_key, settings, self._options.init_timeout_s, self.name
            )
        except TritonError:
            await self._leave(worker)
            raise
        return dict(reply["config"])

    async def start_instance(self, config: dict[str, Any]) -> None:
        """Run the backend's instance initialization with the final config; then the instance is ready.

        :raises TritonError: why it failed (the instance then leaves its worker).
        """
        worker = self.worker
        assert worker is not None
        self._config = config
        settings = {
            "model_id": self._model_id,
            "instance_id": self.instance_id,
            "name": self.name,
            "kind": self.kind,
            "device_id": self.device_id,
            "config": config,
        }
        try:
            await worker.call(Kind.INIT_INSTANCE, settings, self._options.init_timeout_s, self.name)
        except TritonError:
            await self._leave(worker)
            raise
        self._initialized = True
        self.ready = True
        self._on_ready(self)

    async def start(self, config: dict[str, Any]) -> None:
        """Start with a final config (no auto-complete): model then instance initialization."""
        await self.start_model(config, auto_complete=False)
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
            self.worker.execute(batch, self.instance_id)
            return
        worker, instance_id = self.worker, self.instance_id

        def start() -> None:
            batch.add_finalizer(lambda: limiter.release(demand))
            worker.execute(batch, instance_id)

        limiter.submit(demand, start, self)

    def cancel(self, payload: Any) -> bool:
        """Mark ``payload`` cancelled for the model if a batch this instance's worker runs holds it."""
        worker = self.worker
        return worker is not None and worker.cancel(payload)

    # -- leaving the worker, failures and restarts -------------------------------------
    async def _leave(self, worker: WorkerProcess) -> None:
        """Leave ``worker``: finalize the instance and (its last instance there) the model there,
        then let the supervisor stop the worker if nothing is left in it."""
        timeout = self._options.shutdown_timeout_s
        initialized, self._initialized = self._initialized, False
        holds_model, self._holds_model = self._holds_model, False
        try:
            if initialized and worker.alive:
                await worker.call(Kind.FINALIZE_INSTANCE, self.instance_id, timeout, self.name)
        except TritonError as exc:
            log.warning("model instance '%s': finalize failed: %s", self.name, exc)
        worker.remove_instance(self.instance_id)
        try:
            if holds_model:
                await worker.release_model(self._model_key, timeout, self.name)
        except TritonError as exc:
            log.warning("model instance '%s': model finalize failed: %s", self.name, exc)
        await self._supervisor().release(worker, timeout)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def worker_exited(self, worker: WorkerProcess, how: str) -> None:
        """The supervisor: ``worker``, where this instance runs, went away (``how``)."""
        if worker is not self.worker:
            return
        was_ready = self.ready
        self.ready = False
        self._initialized = False
        self._holds_model = False
        worker.remove_instance(self.instance_id)
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
            except Exception as exc:  # any failure (EMFILE at the descriptor limit included) is tried again
                delay = min(delay * 2, self._options.restart_backoff_max_s)
                why = exc.message if isinstance(exc, TritonError) else f"{type(exc).__name__}: {exc}"
                log.error("restart of model instance '%s' failed: %s; trying again in %g s", self.name, why, delay)
                continue
            self.restarts += 1
            log.info("model instance '%s' restarted (pid %s)", self.name, self.pid)
            return

    # -- stop ------------------------------------------------------------------------
    async def stop(self) -> None:
        """Finalize the instance in its worker (the worker stops when nothing is left in it)."""
        self._stopping = True
        self.ready = False
        for task in list(self._tasks):
            task.cancel()
        if self.worker is not None and (self._initialized or self._holds_model):
            await self._leave(self.worker)
