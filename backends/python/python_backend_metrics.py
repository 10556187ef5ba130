"""Custom metrics of the ``pb_utils`` API (part of ``c_python_backend_utils``).

:class:`MetricFamily` and its :class:`Metric` objects: accepted so models that
define custom metrics load and run; the values stay in the worker (tritium does
not export them on /metrics yet). Runs only inside a tritium worker hosting a
``python`` model.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Sequence

from python_backend_errors import TritonModelException


class _MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


class Metric:
    """One metric of a :class:`MetricFamily` (kept in the worker; not exported by tritium yet)."""

    def __init__(self, family: MetricFamily, labels: dict[str, str] | None, buckets: Sequence[float] | None) -> None:
        self._family = family
        self._labels = dict(labels or {})
        self._buckets = list(buckets or [])
        self._value = 0.0
        self._lock = threading.Lock()

    def increment(self, value: float) -> None:
        if self._family._kind == _MetricKind.COUNTER and value < 0:
            raise TritonModelException("Failed to increment metric value: a counter cannot be decremented")
        with self._lock:
            self._value += value

    def set(self, value: float) -> None:
        if self._family._kind != _MetricKind.GAUGE:
            raise TritonModelException("Failed to set metric value: only gauges can be set")
        with self._lock:
            self._value = float(value)

    def observe(self, value: float) -> None:
        with self._lock:
            self._value += value

    def value(self) -> float:
        return self._value


class MetricFamily:
    """``MetricFamily(name, description, kind)`` — accepted so models that define custom metrics
    load and run; the values stay in the worker (tritium does not export them on /metrics yet)."""

    COUNTER = _MetricKind.COUNTER
    GAUGE = _MetricKind.GAUGE
    HISTOGRAM = _MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: _MetricKind) -> None:
        self._name = name
        self._description = description
        self._kind = _MetricKind(int(kind))

    def Metric(self, labels: dict[str, str] | None = None, buckets: Sequence[float] | None = None) -> Metric:
        return Metric(self, labels, buckets)
