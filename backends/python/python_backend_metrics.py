"""Custom metrics of the ``pb_utils`` API (part of ``c_python_backend_utils``): :class:`MetricFamily`
and its :class:`Metric` objects, exported on ``/metrics`` as Triton 2.51 exports them.

``MetricFamily(name, description, kind)`` with ``kind`` one of ``MetricFamily.COUNTER``,
``GAUGE`` and ``HISTOGRAM``; ``family.Metric(labels={...}, buckets=[...])`` (buckets: histograms
only, strictly increasing); ``increment(v)`` (counters: ``v >= 0``; gauges), ``set(v)`` (gauges),
``observe(v)`` (histograms), ``value()`` (counters and gauges). A family made twice with one name
and kind is the same family, and a metric made twice with the same labels is the same metric,
as in Triton. Errors are ``TritonModelException`` with Triton's messages; where Triton 2.51
crashes the whole server (``set`` on a counter, ``observe`` on a counter, ``increment`` on a
histogram, a label name Prometheus refuses) the call raises instead, in the same words.

Each metric's values live in a cell of shared memory the core reads at scrape time
(``tritium.core.worker.metric_cells``): an update is a few float operations under a lock, with
no message to the core. Metrics live until the model instance's worker stops (the model
unloads); deleting the Python objects does not remove them. Runs only inside a tritium worker
hosting a ``python`` model.
"""

from __future__ import annotations

import bisect
import enum
import math
import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import python_backend_model_control as _control
from python_backend_errors import TritonModelException

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_KIND_NAMES = (
    "TRITONSERVER_METRIC_KIND_COUNTER",
    "TRITONSERVER_METRIC_KIND_GAUGE",
    "TRITONSERVER_METRIC_KIND_HISTOGRAM",
)


class _MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


def _instance() -> str:
    context = _control._context
    return context.instance_name if context is not None else "<unknown>"


def _failed(what: str, message: str) -> TritonModelException:
    """Triton's words for a metric call the server refused."""
    return TritonModelException(f"{what}: Failed to process the request for model '{_instance()}', message: {message}")


class _Family:
    """What every :class:`MetricFamily` object of one name shares in this worker."""

    __slots__ = ("name", "description", "kind", "metrics")

    def __init__(self, name: str, description: str, kind: _MetricKind) -> None:
        self.name = name
        self.description = description
        self.kind = kind
        #: sorted label items -> the cell and buckets of that metric
        self.metrics: dict[tuple[tuple[str, str], ...], tuple[memoryview[float], tuple[float, ...]]] = {}


_families: dict[str, _Family] = {}
_lock = threading.Lock()  # the registry and every cell's updates


class Metric:
    """One metric of a :class:`MetricFamily`: the family's metric for one set of labels."""

    __slots__ = ("_kind", "_cell", "_buckets")

    def __init__(self, kind: _MetricKind, cell: memoryview[float], buckets: tuple[float, ...]) -> None:
        self._kind = kind
        self._cell = cell
        self._buckets = buckets

    def _refuse(self, verb: str, operation: str) -> TritonModelException:
        return _failed(f"Failed to {verb} metric value", f"{_KIND_NAMES[self._kind]} does not support {operation}")

    def increment(self, value: float) -> None:
        """Add ``value`` (a counter: ``value >= 0``; a gauge: any value).

        :raises TritonModelException: for a negative counter increment, or a histogram.
        """
        value = float(value)
        if self._kind == _MetricKind.HISTOGRAM:
            raise self._refuse("increment", "Increment")
        if self._kind == _MetricKind.COUNTER and value < 0:
            raise _failed(
                "Failed to increment metric value",
                "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by non-negative values.",
            )
        cell = self._cell
        with _lock:
            cell[0] += value
            if self._kind == _MetricKind.GAUGE:
                cell[1] = time.monotonic_ns()

    def set(self, value: float) -> None:
        """Set a gauge to ``value``.

        :raises TritonModelException: for a counter or a histogram.
        """
        if self._kind != _MetricKind.GAUGE:
            raise self._refuse("set", "Set")
        cell = self._cell
        with _lock:
            cell[0] = float(value)
            cell[1] = time.monotonic_ns()

    def observe(self, value: float) -> None:
        """Count ``value`` in a histogram (its sum, its count and the first bucket ``value <= le``).

        :raises TritonModelException: for a counter or a gauge.
        """
        if self._kind != _MetricKind.HISTOGRAM:
            raise self._refuse("observe", "Observe")
        value = float(value)
        slot = 2 + bisect.bisect_left(self._buckets, value)
        cell = self._cell
        with _lock:
            cell[0] += 1
            cell[1] += value
            cell[slot] += 1

    def value(self) -> float:
        """The value of a counter or a gauge.

        :raises TritonModelException: for a histogram.
        """
        if self._kind == _MetricKind.HISTOGRAM:
            raise self._refuse("get", "Value")
        return float(self._cell[0])


class MetricFamily:
    """``MetricFamily(name, description, kind)``: a family of custom metrics on ``/metrics``.

    :raises TypeError: when ``kind`` is not one of ``COUNTER``, ``GAUGE``, ``HISTOGRAM``.
    :raises TritonModelException: for a name Prometheus refuses, or a name already used by a
        family of another kind in this model instance.
    """

    COUNTER = _MetricKind.COUNTER
    GAUGE = _MetricKind.GAUGE
    HISTOGRAM = _MetricKind.HISTOGRAM

    __slots__ = ("_family",)

    def __init__(self, name: str, description: str, kind: _MetricKind) -> None:
        if not isinstance(name, str) or not isinstance(description, str) or not isinstance(kind, _MetricKind):
            raise TypeError(
                "__init__(): incompatible constructor arguments. The following argument types are supported:\n"
                "    1. c_python_backend_utils.MetricFamily(name: str, description: str, "
                "kind: c_python_backend_utils.MetricKind)\n\n"
                f"Invoked with: kwargs: name={name!r}, description={description!r}, kind={kind!r}"
            )
        if not _NAME.fullmatch(name):
            raise _failed("Error when creating MetricFamily", "Invalid metric name")
        with _lock:
            family = _families.get(name)
            if family is None:
                family = _families[name] = _Family(name, description, kind)
            elif family.kind != kind:
                raise _failed("Error when creating MetricFamily", "Family name already exists with different type")
        self._family = family

    def Metric(self, labels: Mapping[str, str] | None = None, buckets: Sequence[float] | None = None) -> Metric:
        """The family's metric with ``labels`` (made now, or the one made before with them).

        :param buckets: a histogram's bucket boundaries, strictly increasing (required for
            a histogram, refused for the other kinds).
        :raises TritonModelException: Triton's ``Missing required buckets``, ``Unexpected buckets
            found``, ``Bucket Boundaries must be strictly sorted``; a label name Prometheus refuses.
        """
        family = self._family
        if family.kind == _MetricKind.HISTOGRAM and buckets is None:
            raise TritonModelException("Failed to create metric. Missing required buckets.")
        if family.kind != _MetricKind.HISTOGRAM and buckets is not None:
            raise TritonModelException("Failed to create metric. Unexpected buckets found.")
        bounds = tuple(float(b) for b in buckets or ())
        if any(not b < c for b, c in zip(bounds, bounds[1:], strict=False)) or any(math.isnan(b) for b in bounds):
            raise _failed("Error when creating Metric", "Bucket Boundaries must be strictly sorted")
        from tritium.core.worker.metric_cells import MAX_BUCKETS

        if len(bounds) > MAX_BUCKETS:
            raise _failed("Error when creating Metric", f"a histogram may have at most {MAX_BUCKETS} buckets")
        items = tuple(sorted((str(k), str(v)) for k, v in dict(labels or {}).items()))
        if not all(_LABEL.fullmatch(k) and not k.startswith("__") for k, _v in items):
            raise _failed("Error when creating Metric", "Invalid label name")
        with _lock:
            made = family.metrics.get(items)
            if made is None:
                made = family.metrics[items] = (_make_cell(family, dict(items), bounds), bounds)
        return Metric(family.kind, made[0], made[1])


def _make_cell(family: _Family, labels: dict[str, str], buckets: tuple[float, ...]) -> memoryview[float]:
    from tritium.core.errors import TritonError as CoreError
    from tritium.core.worker.metric_cells import maker

    context: Any = _control._context
    try:
        return maker().make(
            context.model_name if context is not None else "",
            family.name,
            family.description,
            int(family.kind),
            labels,
            buckets,
        )
    except CoreError as exc:
        raise _failed("Error when creating Metric", exc.message) from None
