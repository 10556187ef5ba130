"""Metric families from the server's statistics, and their Prometheus text.

The families are prometheus-client ``Metric`` objects. They are written out
here rather than with ``prometheus_client.generate_latest`` because that
writer renames every counter ``<name>_total``, while Triton's counters
(``nv_inference_count``) have no suffix and dashboards look for those names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client.core import Metric

if TYPE_CHECKING:  # pragma: no cover
    from ...core.api import MetricsSnapshot, ModelMetrics, ServerAPI

__all__ = ["TritiumCollector", "render"]

_COUNTERS: tuple[tuple[str, str, str | tuple[str, str], int], ...] = (
    # name, help, stats key ("count" of a duration or a plain attribute), scale
    (
        "nv_inference_request_success",
        "Number of successful inference requests, all batch sizes",
        ("success", "count"),
        1,
    ),
    ("nv_inference_count", "Number of inferences performed (does not include cached requests)", "inference_count", 1),
    (
        "nv_inference_exec_count",
        "Number of model executions performed (does not include cached requests)",
        "execution_count",
        1,
    ),
    (
        "nv_inference_request_duration_us",
        "Cumulative inference request duration in microseconds (includes cached requests)",
        ("success", "ns"),
        1000,
    ),
    (
        "nv_inference_queue_duration_us",
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
        ("queue", "ns"),
        1000,
    ),
    (
        "nv_inference_compute_input_duration_us",
        "Cumulative compute input duration in microseconds (does not include cached requests)",
        ("compute_input", "ns"),
        1000,
    ),
    (
        "nv_inference_compute_infer_duration_us",
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
        ("compute_infer", "ns"),
        1000,
    ),
    (
        "nv_inference_compute_output_duration_us",
        "Cumulative inference compute output duration in microseconds (does not include cached requests)",
        ("compute_output", "ns"),
        1000,
    ),
)
_FAILURE_REASONS = ("REJECTED", "CANCELED", "BACKEND", "OTHER")
_CACHE = (
    # name, help, stats duration, field, scale (Triton's per-model response-cache families)
    ("nv_cache_num_hits_per_model", "Number of cache hits per model", "cache_hit", "count", 1),
    ("nv_cache_hit_duration_per_model", "Total cache hit duration per model, in microseconds", "cache_hit", "ns", 1000),
    ("nv_cache_num_misses_per_model", "Number of cache misses per model", "cache_miss", "count", 1),
    (
        "nv_cache_miss_duration_per_model",
        "Total cache miss (insert+lookup) duration per model, in microseconds",
        "cache_miss",
        "ns",
        1000,
    ),
)


_SUMMARIES = (
    # name, help, LatencySummaries kind (Triton's summary families, with summary_latencies=true)
    (
        "nv_inference_request_summary_us",
        "Summary of inference request duration in microseconds (includes cached requests)",
        "request",
    ),
    (
        "nv_inference_queue_summary_us",
        "Summary of inference queuing duration in microseconds (includes cached requests)",
        "queue",
    ),
    (
        "nv_inference_compute_input_summary_us",
        "Summary of compute input duration in microseconds (does not include cached requests)",
        "compute_input",
    ),
    (
        "nv_inference_compute_infer_summary_us",
        "Summary of compute inference duration in microseconds (does not include cached requests)",
        "compute_infer",
    ),
    (
        "nv_inference_compute_output_summary_us",
        "Summary of inference compute output duration in microseconds (does not include cached requests)",
        "compute_output",
    ),
)


class TritiumCollector:
    """Builds the metric families of one server at scrape time (on the event loop).

    :param system: the CPU/GPU sampler whose last sample is reported (None: none).
    :param counter_latencies: report the ``*_duration_us`` counters (``--metrics-config counter_latencies``).
    """

    def __init__(self, server: ServerAPI, system: Any = None, counter_latencies: bool = True) -> None:
        self.server = server
        self.system = system
        self.counter_latencies = counter_latencies

    def collect(self) -> Iterable[Metric]:
        """Yield every metric family (one :meth:`ServerAPI.metrics_snapshot` per scrape)."""
        snapshot = self.server.metrics_snapshot()
        families = list(_model_families(snapshot))
        if not self.counter_latencies:
            families = [f for f in families if not f.name.endswith("_duration_us")]
        summaries = [Metric(name, doc, "summary") for name, doc, _kind in _SUMMARIES]
        for model in snapshot.models:
            latency = model.summaries
            if latency is None:
                continue
            labels = model_labels(model)
            for family, (_n, _d, kind) in zip(summaries, _SUMMARIES):
                summary = latency[kind]
                family.add_sample(family.name + "_count", labels, summary.count)
                family.add_sample(family.name + "_sum", labels, summary.sum_us)
                for quantile, value in summary.quantiles:
                    family.add_sample(family.name, {**labels, "quantile": _number(quantile)}, value)
        families += [f for f in summaries if f.samples]
        if self.system is not None:
            families += self.system.families()
        for custom in self.server.custom_metrics():  # model code's (pb_utils MetricFamily)
            family = Metric(custom.name, custom.description, custom.type)
            for sample in custom.samples:
                family.add_sample(sample.name, sample.labels, sample.value)
            families.append(family)
        return families


def model_labels(model: ModelMetrics) -> dict[str, str]:
    """A model version's labels: ``model``, ``version`` and each of its config's ``metric_tags``
    as ``_<key>`` (Triton 2.51's label names, e.g. ``_team="blue"``)."""
    return {**{f"_{key}": value for key, value in model.tags}, "model": model.name, "version": str(model.version)}


def _model_families(snapshot: MetricsSnapshot) -> list[Metric]:
    success = Metric(*_COUNTERS[0][:2], "counter")
    failure = Metric("nv_inference_request_failure", "Number of failed inference requests, all batch sizes", "counter")
    others = [Metric(name, doc, "counter") for name, doc, _key, _scale in _COUNTERS[1:]]
    pending = Metric(
        "nv_inference_pending_request_count",
        "Instantaneous number of pending requests awaiting execution per-model.",
        "gauge",
    )
    restarts = Metric("tritium_instance_restarts", "Model instance worker restarts since the model loaded", "counter")
    instance_pid = Metric("tritium_instance_worker_pid", "PID of the worker process a model instance runs in", "gauge")
    cache = [Metric(name, doc, "counter") for name, doc, *_rest in _CACHE]
    for model in snapshot.models:
        labels = model_labels(model)
        for family, (_name, _doc, key, scale) in zip([success, *others], _COUNTERS):
            if isinstance(key, tuple):
                value = getattr(model.durations[key[0]], key[1])
            else:
                value = getattr(model, key)
            family.add_sample(family.name, labels, value // scale)
        for reason in _FAILURE_REASONS:
            failure.add_sample(failure.name, {**labels, "reason": reason}, model.failures_by_reason.get(reason, 0))
        pending.add_sample(pending.name, labels, model.pending)
        restarts.add_sample(restarts.name, labels, model.restarts)
        for instance, pid in model.instance_pids:
            if pid is not None:
                instance_pid.add_sample(instance_pid.name, {**labels, "instance": instance}, pid)
        if model.cache_enabled:  # models behind the response cache, as Triton lists them
            for family, (_n, _d, duration, key, scale) in zip(cache, _CACHE):
                family.add_sample(family.name, labels, getattr(model.durations[duration], key) // scale)
    memory = snapshot.memory
    arena_reserved = Metric(
        "tritium_arena_reserved_bytes", "Shared-memory arena segments of the core, in bytes", "gauge"
    )
    arena_reserved.add_sample(arena_reserved.name, {}, memory.arena_reserved_bytes)
    arena_used = Metric("tritium_arena_used_bytes", "Shared-memory arena bytes held by in-flight requests", "gauge")
    arena_used.add_sample(arena_used.name, {}, memory.arena_used_bytes)
    regions = Metric(
        "tritium_shared_memory_region_bytes",
        "Client-registered shared-memory regions, in bytes (not allocated by the server)",
        "gauge",
    )
    regions.add_sample(regions.name, {"kind": "system"}, memory.system_region_bytes)
    regions.add_sample(regions.name, {"kind": "cuda"}, memory.cuda_region_bytes)
    region_count = Metric("tritium_shared_memory_region_count", "Client-registered shared-memory regions", "gauge")
    region_count.add_sample(region_count.name, {"kind": "system"}, memory.system_region_count)
    region_count.add_sample(region_count.name, {"kind": "cuda"}, memory.cuda_region_count)
    cache = [family for family in cache if family.samples]
    workers = Metric(
        "tritium_worker_instances", "Model instances hosted by each worker process (by its name and pid)", "gauge"
    )
    for worker in snapshot.workers:
        workers.add_sample(workers.name, {"worker": worker.label, "pid": str(worker.pid)}, worker.instances)
    return [
        success,
        failure,
        *others,
        *cache,
        pending,
        restarts,
        instance_pid,
        workers,
        arena_reserved,
        arena_used,
        regions,
        region_count,
    ]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if value != value:
        return "NaN"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _label_order(item: tuple[str, Any]) -> tuple[bool, str]:
    return (item[0] == "le", item[0])


def render(families: Iterable[Metric]) -> bytes:
    """Prometheus text exposition (format 0.0.4) of ``families``, names unchanged, labels sorted
    (a histogram bucket's ``le`` last, as Triton writes it)."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {family.documentation}")
        lines.append(f"# TYPE {family.name} {family.type}")
        for sample in family.samples:
            if sample.labels:
                items = sorted(sample.labels.items(), key=_label_order)
                labels = ",".join(f'{k}="{_escape(str(v))}"' for k, v in items)
                lines.append(f"{sample.name}{{{labels}}} {_number(sample.value)}")
            else:
                lines.append(f"{sample.name} {_number(sample.value)}")
    return ("\n".join(lines) + "\n").encode("utf-8")
