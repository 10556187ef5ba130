"""The server API's protocol, :class:`ServerAPI`: what endpoints, integrations and hooks are handed.

Defined below the server (which implements it) and the plugin hooks (which
pass it), so that neither imports the other; callers import it, with the
types its methods take, from :mod:`tritium.core.api`.

Every method runs on the server's event loop. Errors are
:class:`~.errors.TritonError` with Triton's codes and messages; each method
names the ones it raises.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from .inference.request import InferenceRequest
    from .inference.response import InferenceResponse
    from .memory.cuda import CudaRef
    from .memory.pool import SharedBlock
    from .memory.regions import RegionKind, ShmRef
    from .model.servable import Cancellable, Done, Servable
    from .observability.custom_metrics import CustomFamily
    from .observability.stats import MetricsSnapshot
    from .settings.network import BodyBudget
    from .settings.options import ServerOptions
    from .tracing.trace import Trace

__all__ = ["ServerAPI"]


class ServerAPI(Protocol):
    """A running tritium server, as its endpoints and integrations use it.

    Settings: :attr:`options` (the parsed command line), :attr:`metrics_config`
    (``--metrics-config``), :attr:`body_budget` (the bytes of request bodies the
    endpoints may hold at once).
    """

    # -- settings --------------------------------------------------------------------------
    @property
    def options(self) -> ServerOptions:
        """The server's settings (``tritium-server``'s flags); read-only for its users."""
        ...

    @property
    def metrics_config(self) -> dict[str, Any]:
        """``--metrics-config`` parsed: ``counter_latencies`` (bool), ``summary_latencies``, quantiles."""
        ...

    @property
    def body_budget(self) -> BodyBudget:
        """The request-body bytes all endpoints together may hold (``--max-inflight-request-bytes``)."""
        ...

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self, frontends: bool = True) -> None:
        """Load the models and start the endpoints (``frontends=False``: none, for an embedding caller).

        :raises TritonError: UNAVAILABLE naming the port when an endpoint's port is taken;
            a load failure with ``--exit-on-error``.
        """
        ...

    async def stop(self) -> None:
        """Stop admitting requests, let in-flight ones finish (``--exit-timeout-secs``), unload every model."""
        ...

    # -- health and metadata (KServe v2 health and metadata APIs) --------------------------
    @property
    def live(self) -> bool:
        """KServe ``server live``."""
        ...

    @property
    def ready(self) -> bool:
        """KServe ``server ready``: started, not stopping and, with strict readiness, every model READY."""
        ...

    def metadata(self) -> dict[str, Any]:
        """KServe server metadata: ``name``, ``version``, ``extensions`` (Triton's list)."""
        ...

    def model(self, name: str, version: str = "") -> Servable:
        """The version that serves ``name``/``version`` (``""``: the highest READY one).

        :raises TritonError: NOT_FOUND for an unknown model or version, UNAVAILABLE for one not ready.
        """
        ...

    def model_ready(self, name: str, version: str = "") -> bool:
        """KServe ``model ready``."""
        ...

    def model_metadata(self, name: str, version: str = "") -> dict[str, Any]:
        """KServe model metadata: ``name``, ``versions``, ``platform``, ``inputs``, ``outputs``.

        :raises TritonError: as :meth:`model`.
        """
        ...

    def model_config(self, name: str, version: str = "") -> dict[str, Any]:
        """Triton's model configuration extension: the normalized config in its JSON form.

        :raises TritonError: as :meth:`model`.
        """
        ...

    def statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        """Triton's statistics extension: ``{"model_stats": [...]}`` (durations in nanoseconds).

        :raises TritonError: INVALID_ARG for a model or version not loaded.
        """
        ...

    # -- the model repository extension ----------------------------------------------------
    def repository_index(self, ready: bool = False) -> list[dict[str, str]]:
        """Triton's repository index: ``name``, ``version``, ``state``, ``reason`` per model version."""
        ...

    def load_failures(self) -> list[str]:
        """The models that failed to load, as ``'name': reason`` lines (empty when all loaded)."""
        ...

    async def load_model(
        self, name: str, config: str | None = None, files: dict[str, bytes] | None = None, folder: Path | None = None
    ) -> None:
        """Load or reload ``name`` (Triton's repository load, with its ``config`` and ``file:`` overrides).

        :param folder: a model folder to load as ``name`` instead of the repositories' (SageMaker).
        :raises TritonError: with Triton's codes and messages.
        """
        ...

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        """Unload ``name`` (and, with ``unload_dependents``, the ensembles that use it).

        :raises TritonError: with Triton's codes and messages.
        """
        ...

    # -- inference (KServe v2 inference API) -----------------------------------------------
    def request_buffer(self, nbytes: int) -> SharedBlock:
        """``nbytes`` of the core's shared-memory arena to receive a request body into (no copy to workers).

        :raises TritonError: UNAVAILABLE when the arena cannot grow to hold it.
        """
        ...

    async def infer(self, request: InferenceRequest, model: Servable | None = None) -> InferenceResponse:
        """Run one request; the caller releases the response (``response.release()``).

        :param model: the version ``request`` names, when the caller looked it up already.

        :raises TritonError: NOT_FOUND/UNAVAILABLE for the model, INVALID_ARG for a request that does
            not fit its config, UNSUPPORTED for a decoupled model, what the model raised.
        """
        ...

    def submit(self, request: InferenceRequest, done: Done, model: Servable | None = None) -> Cancellable:
        """Start one request; ``done(response, None)`` or ``done(None, error)`` is called once, on the loop.

        :param model: the version ``request`` names, when the caller looked it up already.
        :returns: what cancels the request when its client goes away.
        :raises TritonError: as :meth:`infer`, for a request refused before it is queued.
        """
        ...

    def infer_stream(
        self, request: InferenceRequest, model: Servable | None = None
    ) -> AsyncGenerator[InferenceResponse, None]:
        """Run one request and yield each response (a decoupled model: zero or more).

        :param model: the version ``request`` names, when the caller looked it up already.
        """
        ...

    # -- metrics ---------------------------------------------------------------------------
    def metrics_snapshot(self) -> MetricsSnapshot:
        """The figures Triton's Prometheus metrics report, read at once (durations in microseconds)."""
        ...

    def custom_metrics(self) -> list[CustomFamily]:
        """The metric families model code created (``pb_utils.MetricFamily``)."""
        ...

    # -- the trace and logging extensions --------------------------------------------------
    @property
    def tracing(self) -> bool:
        """Whether the trace extension may sample requests now (frontends skip :meth:`begin_trace` when not)."""
        ...

    def begin_trace(
        self, request: InferenceRequest, protocol: str, recv_start_ns: int, parent: str | None = None
    ) -> Trace | None:
        """Sample ``request``; when traced, stamp its receive times (``perf_counter_ns``) and attach the trace.

        :param protocol: ``HTTP`` or ``GRPC``.
        :param parent: the client's W3C ``traceparent`` header, if any.
        """
        ...

    def traced(self, trace: Trace, done: Done) -> Done:
        """``done`` wrapped so that the response's end and send times (and outputs) are recorded."""
        ...

    def trace_settings(self, model: str = "") -> dict[str, Any]:
        """Triton's trace extension: the (model's) trace settings, values as lists of strings."""
        ...

    def update_trace_settings(self, model: str, changes: Any) -> dict[str, Any]:
        """Change the (model's) trace settings (``null`` clears a model's own) and answer the new ones.

        :raises TritonError: INVALID_ARG for an unknown setting or a bad value (Triton's messages).
        """
        ...

    def log_settings(self) -> dict[str, Any]:
        """Triton's logging extension: ``log_file``, ``log_info``, ``log_warning``, ``log_error``, ..."""
        ...

    def update_log_settings(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Change the log settings and answer the new ones.

        :raises TritonError: INVALID_ARG for an unknown setting or a bad value (Triton's messages).
        """
        ...

    # -- the shared-memory extensions ------------------------------------------------------
    def shared_memory_status(self, kind: RegionKind, name: str = "") -> list[dict[str, Any]]:
        """The registered regions of ``kind`` (or the one named).

        :raises TritonError: NOT_FOUND for an unknown ``name``.
        """
        ...

    def register_system_shared_memory(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Register a POSIX shared-memory region (``key``: its ``shm_open`` name; sizes in bytes).

        :raises TritonError: Triton's codes and messages.
        """
        ...

    def register_cuda_shared_memory(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """Register a CUDA region from its IPC handle (UNAVAILABLE where no GPU exists).

        :raises TritonError: Triton's codes and messages.
        """
        ...

    def unregister_shared_memory(self, kind: RegionKind, name: str = "") -> None:
        """Unregister one region of ``kind``, or all of them (``name=""``)."""
        ...

    def resolve_shared_memory(self, name: str, offset: int, byte_size: int | None) -> ShmRef | CudaRef:
        """The place of a tensor given as ``(region, offset, byte_size)`` in a registered region (bytes).

        :raises TritonError: NOT_FOUND for an unknown region, INVALID_ARG for a window outside it.
        """
        ...
