"""Statistics per model version: the numbers behind Triton's statistics extension and metrics.

Counts and durations follow Triton's ``ModelStatistics`` message: per request
``success``/``fail``/``queue``/``compute_input``/``compute_infer``/
``compute_output`` (count and cumulative nanoseconds), per execution
``batch_stats`` by batch size, ``inference_count`` (inferences, i.e. batch
elements) and ``execution_count`` (backend executions). The metrics endpoint
reads the same objects, so the two can never disagree.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "Duration",
    "ModelStats",
    "LatencySummaries",
    "configure_summaries",
    "DEFAULT_QUANTILES",
    "LatencySummary",
    "ModelMetrics",
    "MemoryMetrics",
    "MetricsSnapshot",
    "WorkerMetrics",
    "model_metrics",
]

#: Triton's default ``summary_quantiles`` (quantile: allowed error)
DEFAULT_QUANTILES = ((0.5, 0.05), (0.9, 0.01), (0.95, 0.001), (0.99, 0.001), (0.999, 0.0001))
#: the latency summaries' window: the most recent observations, and for how long (Triton: a sliding window)
SUMMARY_WINDOW = 4096
SUMMARY_MAX_AGE_S = 60.0

_summary_quantiles: tuple[tuple[float, float], ...] | None = None


def configure_summaries(quantiles: tuple[tuple[float, float], ...] | None) -> None:
    """Turn the latency summaries (``--metrics-config summary_latencies=true``) on with ``quantiles``,
    or off (None), for the models loaded from now on in this process."""
    global _summary_quantiles
    _summary_quantiles = quantiles


class LatencySummaries:
    """Recent request latencies of one model, for Triton's ``nv_inference_*_summary_us`` summaries.

    Each of ``request``, ``queue``, ``compute_input``, ``compute_infer`` and ``compute_output``
    keeps its count and sum (microseconds) since the model loaded, and its last
    :data:`SUMMARY_WINDOW` observations of the last :data:`SUMMARY_MAX_AGE_S` seconds, from
    which :meth:`quantiles` computes the quantiles exactly at scrape time. Updated on the
    core's event loop.
    """

    KINDS: ClassVar[tuple[str, ...]] = ("request", "queue", "compute_input", "compute_infer", "compute_output")

    def __init__(self, quantiles: tuple[tuple[float, float], ...]) -> None:
        self.quantile_list = tuple(q for q, _err in quantiles)
        self.count = dict.fromkeys(self.KINDS, 0)
        self.sum_us = dict.fromkeys(self.KINDS, 0.0)
        self.window: dict[str, deque[tuple[float, float]]] = {k: deque(maxlen=SUMMARY_WINDOW) for k in self.KINDS}

    def observe(self, *values_ns: int) -> None:
        """One request's durations in ns, in :attr:`KINDS` order."""
        now = time.monotonic()
        for kind, ns in zip(self.KINDS, values_ns):
            us = max(0, ns) / 1000.0
            self.count[kind] += 1
            self.sum_us[kind] += us
            self.window[kind].append((now, us))

    def quantiles(self, kind: str) -> list[tuple[float, float]]:
        """``[(quantile, microseconds)]`` of the window (NaN when it is empty)."""
        window = self.window[kind]
        horizon = time.monotonic() - SUMMARY_MAX_AGE_S
        while window and window[0][0] < horizon:
            window.popleft()
        values = sorted(us for _t, us in window)
        if not values:
            return [(q, float("nan")) for q in self.quantile_list]
        last = len(values) - 1
        return [(q, values[min(last, int(q * len(values)))]) for q in self.quantile_list]


@dataclass(slots=True)
class Duration:
    """A count and the total of its durations in nanoseconds."""

    count: int = 0
    ns: int = 0

    def add(self, ns: int, count: int = 1) -> None:
        """Add ``count`` events lasting ``ns`` nanoseconds in total."""
        self.count += count
        if ns > 0:
            self.ns += ns

    def to_dict(self) -> dict[str, int]:
        """``{"count": ..., "ns": ...}`` as Triton writes it."""
        return {"count": self.count, "ns": self.ns}


@dataclass(slots=True)
class _BatchStats:
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)


class ModelStats:
    """The statistics of one model version (updated on the core's event loop).

    :param name: model name.
    :param version: model version.
    """

    _DURATIONS = (
        "success",
        "fail",
        "queue",
        "compute_input",
        "compute_infer",
        "compute_output",
        "cache_hit",
        "cache_miss",
    )

    def __init__(self, name: str, version: int) -> None:
        self.name = name
        self.version = version
        self.last_inference_ms = 0
        self.inference_count = 0
        self.execution_count = 0
        self.durations: dict[str, Duration] = {k: Duration() for k in self._DURATIONS}
        self.batches: dict[int, _BatchStats] = {}
        self.failures_by_reason: dict[str, int] = {}
        #: the latency summaries, when ``summary_latencies`` is on
        self.summaries = LatencySummaries(_summary_quantiles) if _summary_quantiles else None
        d = self.durations  # the ones every request updates, without a lookup
        self._per_request = (d["success"], d["queue"], d["compute_input"], d["compute_infer"], d["compute_output"])

    def record_success(
        self, batch_size: int, request_ns: int, queue_ns: int, input_ns: int, infer_ns: int, output_ns: int
    ) -> None:
        """Account one successful request (durations in ns; the compute ones are its execution's)."""
        # the request path: Duration.add inlined
        success, queue, compute_input, compute_infer, compute_output = self._per_request
        success.count += 1
        queue.count += 1
        compute_input.count += 1
        compute_infer.count += 1
        compute_output.count += 1
        if request_ns > 0:
            success.ns += request_ns
        if queue_ns > 0:
            queue.ns += queue_ns
        if input_ns > 0:
            compute_input.ns += input_ns
        if infer_ns > 0:
            compute_infer.ns += infer_ns
        if output_ns > 0:
            compute_output.ns += output_ns
        self.inference_count += batch_size if batch_size > 1 else 1
        self.last_inference_ms = int(time.time() * 1000)
        if self.summaries is not None:
            self.summaries.observe(request_ns, queue_ns, input_ns, infer_ns, output_ns)

    def record_failure(self, request_ns: int, reason: str = "BACKEND") -> None:
        """Account one failed request (``reason``: REJECTED, CANCELED, BACKEND or OTHER)."""
        self.durations["fail"].add(request_ns)
        self.failures_by_reason[reason] = self.failures_by_reason.get(reason, 0) + 1
        self.last_inference_ms = int(time.time() * 1000)

    def record_cache_hit(self, request_ns: int, lookup_ns: int) -> None:
        """Account a request the response cache answered: a success, no inference or execution."""
        d = self.durations
        d["success"].add(request_ns)
        d["queue"].add(0)
        d["cache_hit"].add(lookup_ns)
        self.last_inference_ms = int(time.time() * 1000)

    def record_cache_miss(self, ns: int) -> None:
        """Account a cache miss: ``ns`` = its lookup plus the insertion of the response."""
        self.durations["cache_miss"].add(ns)

    def record_execution(self, batch_size: int, input_ns: int, infer_ns: int, output_ns: int) -> None:
        """Account one backend execution of ``batch_size`` inferences."""
        self.execution_count += 1
        stats = self.batches.get(batch_size)
        if stats is None:
            stats = self.batches[batch_size] = _BatchStats()
        stats.compute_input.add(input_ns)
        stats.compute_infer.add(infer_ns)
        stats.compute_output.add(output_ns)

    def to_dict(self) -> dict[str, Any]:
        """The ``ModelStatistics`` JSON object of Triton's statistics extension."""
        return {
            "name": self.name,
            "version": str(self.version),
            "last_inference": self.last_inference_ms,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {k: v.to_dict() for k, v in self.durations.items()},
            "response_stats": {},
            "batch_stats": [
                {
                    "batch_size": size,
                    "compute_input": s.compute_input.to_dict(),
                    "compute_infer": s.compute_infer.to_dict(),
                    "compute_output": s.compute_output.to_dict(),
                }
                for size, s in sorted(self.batches.items())
            ],
            "memory_usage": [],
        }


def parse_metrics_config(settings: dict[str, str]) -> dict[str, Any]:
    """``--metrics-config`` settings, checked: ``summary_latencies`` (bool, default false),
    ``summary_quantiles`` (``<q>:<error>,...``, default Triton's), ``counter_latencies`` (bool,
    default true: the ``*_duration_us`` counters).

    :returns: ``{"summary_latencies", "summary_quantiles", "counter_latencies"}``.
    :raises ValueError: for an unknown setting or a bad value (the message names it).
    """

    def boolean(key: str, default: bool) -> bool:
        text = settings.get(key)
        if text is None:
            return default
        if text.lower() in ("true", "1", "on", "yes"):
            return True
        if text.lower() in ("false", "0", "off", "no"):
            return False
        raise ValueError(f"--metrics-config {key} must be true or false, got '{text}'")

    for key in settings:
        if key not in ("summary_latencies", "summary_quantiles", "counter_latencies"):
            if key == "histogram_latencies":
                raise ValueError(
                    "--metrics-config histogram_latencies: tritium builds no latency histograms "
                    "(Triton 2.51 reports none either); use summary_latencies=true"
                )
            raise ValueError(f"unknown --metrics-config setting '{key}'")
    quantiles: tuple[tuple[float, float], ...] = DEFAULT_QUANTILES
    if "summary_quantiles" in settings:
        parsed = []
        for item in settings["summary_quantiles"].split(","):
            q, colon, err = item.partition(":")
            try:
                value, error = float(q), float(err)
            except ValueError:
                raise ValueError(
                    f"--metrics-config summary_quantiles must be '<quantile>:<error>,...', got '{item}'"
                ) from None
            if not colon or not 0.0 <= value <= 1.0 or not 0.0 <= error <= 1.0:
                raise ValueError(f"--metrics-config summary_quantiles must be '<quantile>:<error>,...', got '{item}'")
            parsed.append((value, error))
        quantiles = tuple(parsed)
    return {
        "summary_latencies": boolean("summary_latencies", False),
        "summary_quantiles": quantiles,
        "counter_latencies": boolean("counter_latencies", True),
    }


# -- the metrics snapshot (what the metrics endpoint reads, see InferenceServer.metrics_snapshot) --
@dataclass(frozen=True, slots=True)
class LatencySummary:
    """One latency kind of a model's :class:`LatencySummaries` at scrape time.

    ``count`` observations since the model loaded, their ``sum_us``
    (microseconds), and ``quantiles``: ``(quantile, microseconds)`` over the
    recent window (NaN when it is empty).
    """

    count: int
    sum_us: float
    quantiles: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class ModelMetrics:
    """One loaded model version's figures for Triton's ``nv_inference_*`` families.

    ``durations`` maps Triton's ``inference_stats`` keys (``success``,
    ``queue``, ``compute_input``, ``cache_hit``, ...) to copies of their
    :class:`Duration` (count, nanoseconds); ``failures_by_reason`` counts failed
    requests by Triton's reason (``REJECTED``, ``CANCELED``, ``BACKEND``,
    ``OTHER``). ``pending`` is the requests queued or executing now,
    ``restarts`` the worker restarts of its instances since it loaded,
    ``instance_pids`` each instance's name and the pid of the worker process it runs in
    (None while it has none), ``cache_enabled`` whether it sits behind the response cache, and
    ``summaries`` its latency summaries by kind (None without
    ``--metrics-config summary_latencies=true``), ``tags`` its config's ``metric_tags``
    (key, value), sorted by key.
    """

    name: str
    version: int
    inference_count: int
    execution_count: int
    durations: dict[str, Duration]
    failures_by_reason: dict[str, int]
    pending: int
    restarts: int
    cache_enabled: bool
    summaries: dict[str, LatencySummary] | None
    instance_pids: tuple[tuple[str, int | None], ...] = ()
    tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryMetrics:
    """The core's shared memory: its arena (bytes reserved, bytes held by in-flight requests)
    and the client-registered regions (bytes and count, system and CUDA)."""

    arena_reserved_bytes: int
    arena_used_bytes: int
    system_region_bytes: int
    system_region_count: int
    cuda_region_bytes: int
    cuda_region_count: int


@dataclass(frozen=True, slots=True)
class WorkerMetrics:
    """One worker process: how logs name it, its pid and how many model instances it hosts."""

    label: str
    pid: int
    instances: int


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """Everything the metrics endpoint reports about the server, read at one scrape."""

    models: tuple[ModelMetrics, ...]
    memory: MemoryMetrics
    workers: tuple[WorkerMetrics, ...] = ()


def model_metrics(
    name: str,
    version: int,
    stats: ModelStats,
    *,
    pending: int,
    restarts: int,
    cache_enabled: bool,
    instance_pids: tuple[tuple[str, int | None], ...] = (),
    tags: tuple[tuple[str, str], ...] = (),
) -> ModelMetrics:
    """A :class:`ModelMetrics` of model ``name`` version ``version``: a copy of its ``stats``
    and its live figures (event loop)."""
    latency = stats.summaries
    summaries = None
    if latency is not None:
        summaries = {
            kind: LatencySummary(latency.count[kind], latency.sum_us[kind], tuple(latency.quantiles(kind)))
            for kind in LatencySummaries.KINDS
        }
    return ModelMetrics(
        name=name,
        version=version,
        inference_count=stats.inference_count,
        execution_count=stats.execution_count,
        durations={key: Duration(d.count, d.ns) for key, d in stats.durations.items()},
        failures_by_reason=dict(stats.failures_by_reason),
        pending=pending,
        restarts=restarts,
        cache_enabled=cache_enabled,
        summaries=summaries,
        instance_pids=instance_pids,
        tags=tags,
    )
