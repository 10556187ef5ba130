"""The server object: model repository manager, tensor pool and frontends, and their start/stop order.

``InferenceServer`` is also the in-process API every frontend is built on:
``await server.infer(request)`` runs a request; ``server.model(name)``,
``server.metadata()``, ``server.statistics()`` answer the other KServe and
Triton calls. Start-up: tensor pool, frontends created and their ports
checked (a taken port aborts before any model loads), models (all loaded,
failures recorded; with ``exit_on_error`` any failure aborts), Triton's model
and options tables in the log, then the frontends start. Shutdown (SIGTERM):
stop admitting, let in-flight requests finish (bounded by
``exit_timeout_s``), unload models (finalize backends, stop workers), free
the shared memory. Runs on one asyncio event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from .. import __version__
from .cache import open_cache
from .errors import Code, TritonError
from .hookspecs import Frontend
from .inference.request import InferenceRequest
from .inference.response import InferenceResponse
from .inference.tensor_metadata import tensor_metadata
from .memory.cuda import CudaRef, CudaSharedMemoryManager
from .memory.pool import SharedBlock, TensorPool
from .memory.regions import RegionKind, ShmRef
from .memory.shm_region import SharedMemoryManager
from .model.bls import BlsRouter
from .model.servable import Cancellable, Done, Servable
from .model_repository.manager import ModelRepositoryManager
from .observability.custom_metrics import CustomFamily
from .observability.custom_metrics import collect as collect_custom_metrics
from .observability.logging import log_manager
from .observability.stats import (
    MemoryMetrics,
    MetricsSnapshot,
    WorkerMetrics,
    configure_summaries,
    model_metrics,
    parse_metrics_config,
)
from .settings.composition import read_composition
from .settings.network import BodyBudget
from .settings.options import ServerOptions, default_backend_directory
from .settings.plugins import create_frontends, default_plugins_file, load_plugin_settings, with_settings
from .startup import check_ports, endpoint_lines, model_table, options_table, protobuf_warning
from .tracing import Tracer
from .tracing.requests import begin_trace, traced_done
from .tracing.trace import Trace

log = logging.getLogger("tritium.server")

__all__ = ["InferenceServer", "EXTENSIONS"]

#: Triton protocol extensions this server implements (server metadata lists them), in Triton's
#: order. "generate" is the HTTP generate extension (Triton 2.51 serves it without listing it).
#: The trace and logging extensions are added here when they are built ("trace", "logging" after
#: "statistics", as Triton lists them).
EXTENSIONS = [
    "classification",
    "sequence",
    "model_repository",
    "model_repository(unload_dependents)",
    "schedule_policy",
    "model_configuration",
    "system_shared_memory",
    "cuda_shared_memory",
    "binary_tensor_data",
    "parameters",
    "statistics",
    "generate",
    "trace",
    "logging",
]


class InferenceServer:
    """A tritium server.

    :param options: its settings.
    :param plugins: the parsed ``plugins.toml`` (default: read the installation's).
    :param cuda_runtime: the CUDA runtime for CUDA shared memory, an object with
        cuda-python's runtime API (default: cuda-python's, when there is a GPU;
        see :class:`~.memory.cuda.CudaSharedMemoryManager`). Tests inject a fake.
    """

    def __init__(
        self, options: ServerOptions, plugins: dict[str, Any] | None = None, *, cuda_runtime: Any = None
    ) -> None:
        self.options = options
        self.plugins = plugins if plugins is not None else load_plugin_settings()
        options.composition = read_composition(self.plugins, default_plugins_file().parent)
        composed_directory = options.composition.backend_directory
        if composed_directory is not None and options.backend_directory == default_backend_directory():
            options.backend_directory = str(composed_directory)
        self.pool = TensorPool(directory=options.arena_dir)
        self.repository = ModelRepositoryManager(options, self.pool)
        #: Triton's system and CUDA shared-memory extensions (client-registered regions)
        self.shared_memory = SharedMemoryManager(self.pool)
        self.cuda_shared_memory = CudaSharedMemoryManager(cuda_runtime)
        self.shared_memory.cuda = self.cuda_shared_memory
        self.repository.instance_options.bls = BlsRouter(self)
        #: ``--metrics-config`` (checked): the latency summaries are kept from the first model loaded
        try:
            self.metrics_config = parse_metrics_config(options.metrics_config)
        except ValueError as exc:
            raise TritonError(Code.INVALID_ARG, str(exc)) from None
        configure_summaries(
            self.metrics_config["summary_quantiles"] if self.metrics_config["summary_latencies"] else None
        )
        #: Triton's trace extension (read by the frontends per request: keep it cheap when off)
        self.tracer = Tracer(options.trace, options.trace_otel, self._known_model)
        #: Triton's logging extension (the process's log settings)
        self.logging = log_manager()
        #: bytes of request bodies held by the HTTP and gRPC endpoints together (``--max-inflight-request-bytes``)
        self.body_budget = BodyBudget.for_limits(options.network.max_inflight_request_bytes, options.max_request_bytes)
        self.frontends: list[Frontend] = []
        self._started = False
        self._stopping = False
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    # -- lifecycle -------------------------------------------------------------------
    async def start(self, frontends: bool = True) -> None:
        """Create the frontends and check their ports, load the models, log Triton's tables, start the frontends.

        :raises TritonError: UNAVAILABLE naming the port when an endpoint's
            port is taken (before any model loads); INTERNAL when a model
            failed to load and ``exit_on_error`` is set; a frontend's own
            error when it cannot be created or started.
        """
        created: list[Frontend] = []
        if frontends:  # created and their ports checked before any model loads: a taken port fails at once
            created = create_frontends(
                self,
                with_settings(self.plugins, self.options.frontend_settings),
                {"http": self.options.http, "grpc": self.options.grpc, "metrics": self.options.metrics},
            )
            check_ports(created)
        self.repository.cache = await open_cache(self.options.cache_config)
        await self.repository.start()
        log.info("\n%s", model_table(self.repository.index()))
        log.info("\n%s", options_table(self.options, __version__, EXTENSIONS, endpoint_lines(created)))
        slow_protobuf = protobuf_warning()
        if slow_protobuf:
            log.warning("%s", slow_protobuf)
        failures = self.repository.lookups.failures
        if failures and self.options.exit_on_error:
            await self.repository.unload_all()
            raise TritonError(Code.INTERNAL, "failed to load all models: " + "; ".join(failures))
        if frontends:
            started: list[Frontend] = []
            try:
                for frontend in created:
                    await frontend.start()
                    started.append(frontend)
            except BaseException:
                for frontend in started:
                    await frontend.stop(0)
                await self.repository.unload_all()
                raise
            self.frontends = created
            names = [getattr(f, "name", type(f).__name__) for f in self.frontends]
            missing = [n for n in ("http", "grpc", "metrics") if n not in names]
            log.info(
                "endpoints: %s%s",
                ", ".join(names) or "none",
                f" (not enabled or not in this server: {', '.join(missing)})" if missing else "",
            )
        self._started = True

    async def stop(self) -> None:
        """Drain and shut down (idempotent)."""
        if self._stopping:
            return
        self._stopping = True
        if self._inflight:
            log.info("waiting for %d in-flight requests", self._inflight)
            try:
                await asyncio.wait_for(self._idle.wait(), self.options.exit_timeout_s)
            except TimeoutError:
                log.warning("timeout: %d requests still in flight", self._inflight)
        for frontend in reversed(self.frontends):
            try:
                await frontend.stop(1.0)
            except Exception as exc:  # a frontend failing to stop must not block shutdown
                log.error("stopping frontend %s: %s", getattr(frontend, "name", frontend), exc)
        await self.repository.unload_all()
        self.shared_memory.close()
        self.cuda_shared_memory.close()
        if self.repository.cache is not None:
            await self.repository.cache.close()
        self.pool.close()
        self.tracer.close()

    # -- health and metadata -----------------------------------------------------------
    @property
    def live(self) -> bool:
        """The server process can answer (KServe ``server live``)."""
        return True

    @property
    def ready(self) -> bool:
        """KServe ``server ready``: started, not stopping, and (strict readiness) every model READY."""
        if not self._started or self._stopping:
            return False
        return self.repository.lookups.all_ready if self.options.strict_readiness else True

    def metadata(self) -> dict[str, Any]:
        """KServe server metadata; ``name`` is ``--id`` (``tritium`` by default; Triton's ``triton``)."""
        return {"name": self.options.server_id, "version": __version__, "extensions": list(EXTENSIONS)}

    def _known_model(self, name: str) -> bool:
        entry = self.repository.models.get(name)
        return entry is not None and bool(entry.versions)

    def model(self, name: str, version: str = "") -> Servable:
        """The model that serves ``name``/``version`` ("" = highest READY version).

        :raises TritonError: NOT_FOUND / UNAVAILABLE with Triton's messages.
        """
        return self.repository.lookups.get(name, version)

    def model_ready(self, name: str, version: str = "") -> bool:
        """KServe ``model ready``."""
        return self.repository.lookups.is_ready(name, version)

    def model_metadata(self, name: str, version: str = "") -> dict[str, Any]:
        """KServe model metadata: name, versions, platform, inputs and outputs with batch dim.

        :raises TritonError: as :meth:`model`.
        """
        model = self.model(name, version)
        return {
            "name": model.name,
            # Triton lists only the version asked for, or every READY version
            "versions": [str(model.version)]
            if version
            else [str(v) for v in self.repository.lookups.versions(model.name)],
            "platform": model.platform,
            "inputs": tensor_metadata(model.config, "input"),
            "outputs": tensor_metadata(model.config, "output"),
        }

    def model_config(self, name: str, version: str = "") -> dict[str, Any]:
        """Triton's model configuration extension: the config in its JSON form.

        :raises TritonError: as :meth:`model`.
        """
        return self.model(name, version).config

    def statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        """Triton's statistics extension: ``{"model_stats": [...]}``.

        :raises TritonError: INVALID_ARG for a model or version not loaded.
        """
        return {"model_stats": self.repository.lookups.statistics(name, version)}

    # -- the model repository extension ---------------------------------------------------
    def repository_index(self, ready: bool = False) -> list[dict[str, str]]:
        """``POST /v2/repository/index``: models and their versions' states (see the manager)."""
        return self.repository.index(ready)

    async def load_model(
        self, name: str, config: str | None = None, files: dict[str, bytes] | None = None, folder: Path | None = None
    ) -> None:
        """``POST /v2/repository/models/<name>/load`` (see :meth:`ModelRepositoryManager.load`).

        :param folder: a model folder to load as ``name`` instead of the repositories' (SageMaker's
            multi-model endpoint; the caller checks the path).
        :raises TritonError: with Triton's codes and messages.
        """
        await self.repository.load(name, config, files, folder)

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        """``POST /v2/repository/models/<name>/unload`` (see :meth:`ModelRepositoryManager.unload`)."""
        await self.repository.unload(name, unload_dependents)

    def load_failures(self) -> list[str]:
        """The models that failed to load, as ``'name': reason`` lines (empty when all loaded)."""
        return self.repository.lookups.failures

    # -- inference ------------------------------------------------------------------------
    def request_buffer(self, nbytes: int) -> SharedBlock:
        """A block of ``nbytes`` in the core's shared-memory arena to receive a request's bytes into.

        A frontend that receives an inference request's body here, and builds the
        request with :attr:`InferenceRequest.buffer` set to it and the inputs'
        :attr:`~tritium.core.inference.request.InferInput.buffer_offset`, has the inputs go to
        the worker without a copy. The caller holds one reference and releases it
        (``buffer.release()``) once the response is sent or the request abandoned.

        :raises TritonError: UNAVAILABLE when the arena cannot grow to hold it.
        """
        return self.pool.shared(nbytes)

    def _admit(self) -> None:
        if self._stopping:
            raise TritonError(Code.UNAVAILABLE, "Server is stopping, request rejected")

    async def infer(self, request: InferenceRequest, model: Servable | None = None) -> InferenceResponse:
        """Run one request; the response's outputs stay valid until ``response.release()``.

        :param model: the model ``request`` names, when the caller looked it up already.
        :raises TritonError: NOT_FOUND/UNAVAILABLE for the model, INVALID_ARG
            for a request that does not fit it, UNSUPPORTED for a decoupled model, or the backend's error.
        """
        self._admit()
        if model is None:
            model = self.model(request.model_name, request.model_version)
        self._inflight += 1
        self._idle.clear()
        try:
            return await model.infer(request)
        finally:
            self._left()

    def submit(self, request: InferenceRequest, done: Done, model: Servable | None = None) -> Cancellable:
        """Start one request without a coroutine: ``done(response, None)`` or ``done(None, error)``
        is called once, on the event loop (at once for a request refused before it is queued).

        The same as :meth:`infer` for a frontend that answers from a callback (the
        HTTP endpoint: no task per request). The response's outputs stay valid
        until ``response.release()``.

        :param model: the model ``request`` names, when the caller looked it up already.
        :returns: what cancels the request when its client goes away (see :class:`~.servable.Cancellable`).
        :raises TritonError: NOT_FOUND/UNAVAILABLE for the model, INVALID_ARG for a
            request that does not fit it (the backend's errors go to ``done``).
        """
        self._admit()
        if model is None:
            model = self.model(request.model_name, request.model_version)

        def finished(response: InferenceResponse | None, error: BaseException | None) -> None:
            self._left()
            done(response, error)

        self._inflight += 1
        self._idle.clear()
        try:
            return model.submit(request, finished)
        except BaseException:
            self._left()
            raise

    def _left(self) -> None:
        self._inflight -= 1
        if not self._inflight:
            self._idle.set()

    async def infer_stream(
        self, request: InferenceRequest, model: Servable | None = None
    ) -> AsyncGenerator[InferenceResponse, None]:
        """Run one request and yield every response (decoupled models send zero or more).

        :param model: the model ``request`` names, when the caller looked it up already.
        """
        self._admit()
        if model is None:
            model = self.model(request.model_name, request.model_version)
        self._inflight += 1
        self._idle.clear()
        try:
            async for response in model.infer_stream(request):
                yield response
        finally:
            self._inflight -= 1
            if not self._inflight:
                self._idle.set()

    # -- the metrics endpoint's view (plain data, built in core/observability/stats.py) ----------------------
    def metrics_snapshot(self) -> MetricsSnapshot:
        """The figures of Triton's metrics endpoint, read now: every READY model version (by
        name, then version) and the core's shared memory. Event loop thread."""
        models = tuple(
            model_metrics(
                model.name,
                model.version,
                model.stats,
                pending=model.pending_count(),
                restarts=sum(instance.restarts for instance in model.instances),
                cache_enabled=bool(getattr(model, "cache_enabled", False)),
                instance_pids=tuple((instance.name, instance.pid) for instance in model.instances),
                tags=tuple(sorted((model.config.get("metric_tags") or {}).items())),
            )
            for model in self.repository.lookups.loaded_models()
        )
        supervisor = self.repository.instance_options.workers
        workers = tuple(
            WorkerMetrics(worker.label, worker.pid, len(worker.instances))
            for worker in (supervisor.workers if supervisor is not None else ())
            if worker.pid is not None
        )
        memory = MemoryMetrics(
            arena_reserved_bytes=self.pool.reserved_bytes,
            arena_used_bytes=self.pool.used_bytes,
            system_region_bytes=self.shared_memory.registered_bytes,
            system_region_count=self.shared_memory.region_count,
            cuda_region_bytes=self.cuda_shared_memory.registered_bytes,
            cuda_region_count=len(self.cuda_shared_memory.status()),
        )
        return MetricsSnapshot(models, memory, workers)

    def custom_metrics(self) -> list[CustomFamily]:
        """The metric families model code made (pb_utils ``MetricFamily``), their values read now
        from the workers' shared memory (see :mod:`.custom_metrics`). Event loop thread."""
        supervisor = self.repository.instance_options.workers
        return collect_custom_metrics(worker.metrics for worker in (supervisor.workers if supervisor else ()))

    # -- Triton's trace and logging extensions -------------------------------------------------
    @property
    def tracing(self) -> bool:
        """Whether the trace extension may sample requests now (see :attr:`Tracer.enabled`)."""
        return self.tracer.enabled

    def begin_trace(
        self, request: InferenceRequest, protocol: str, recv_start_ns: int, parent: str | None = None
    ) -> Trace | None:
        """Sample ``request`` and stamp its receive times (see :func:`~.tracing.requests.begin_trace`)."""
        return begin_trace(self.tracer, request, protocol, recv_start_ns, parent)

    def traced(self, trace: Trace, done: Done) -> Done:
        """``done`` recording the response's times in ``trace`` (see :func:`~.tracing.requests.traced_done`)."""
        return traced_done(self.tracer, trace, done)

    def trace_settings(self, model: str = "") -> dict[str, Any]:
        """The (model's) trace settings, as Triton's trace extension answers them."""
        return self.tracer.settings(model)

    def update_trace_settings(self, model: str, changes: Any) -> dict[str, Any]:
        """Change the (model's) trace settings; answers the new ones (see :meth:`Tracer.update`).

        :raises TritonError: INVALID_ARG for an unknown setting or a bad value.
        """
        return self.tracer.update(model, changes)

    def log_settings(self) -> dict[str, Any]:
        """The log settings, as Triton's logging extension answers them."""
        return self.logging.settings()

    def update_log_settings(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Change the log settings; answers the new ones (see :meth:`LogManager.update`).

        :raises TritonError: INVALID_ARG for an unknown setting or a bad value.
        """
        return self.logging.update(changes)

    # -- Triton's shared-memory extensions, by region kind ("system" or "cuda") ----------------
    def _regions(self, kind: RegionKind) -> SharedMemoryManager | CudaSharedMemoryManager:
        return self.cuda_shared_memory if kind == "cuda" else self.shared_memory

    def shared_memory_status(self, kind: RegionKind, name: str = "") -> list[dict[str, Any]]:
        """The registered regions of ``kind`` (all, or the one called ``name``), as Triton's
        status calls list them.

        :raises TritonError: NOT_FOUND for an unknown ``name``.
        """
        return self._regions(kind).status(name)

    def register_system_shared_memory(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Register ``byte_size`` bytes at ``offset`` of POSIX shared-memory object ``key`` as ``name``.

        :raises TritonError: Triton's codes and messages (see :meth:`SharedMemoryManager.register`).
        """
        self.shared_memory.register(name, key, offset, byte_size)

    def register_cuda_shared_memory(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """Register ``byte_size`` bytes of the CUDA IPC allocation ``raw_handle`` on GPU ``device_id``.

        :raises TritonError: Triton's codes and messages (see :meth:`CudaSharedMemoryManager.register`).
        """
        self.cuda_shared_memory.register(name, raw_handle, device_id, byte_size)

    def unregister_shared_memory(self, kind: RegionKind, name: str = "") -> None:
        """Unregister the region of ``kind`` called ``name`` (every region of ``kind`` when empty)."""
        self._regions(kind).unregister(name)

    def resolve_shared_memory(self, name: str, offset: int, byte_size: int | None) -> ShmRef | CudaRef:
        """The place of a tensor given as ``(region, offset, byte_size)`` in a registered region.

        :raises TritonError: NOT_FOUND for an unknown region, INVALID_ARG for a window outside it.
        """
        return self.shared_memory.resolve(name, offset, byte_size)
