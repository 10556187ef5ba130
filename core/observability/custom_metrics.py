"""Custom metrics of model code on ``/metrics``: the core's side of :mod:`.worker.metric_cells`.

Each worker process has a :class:`WorkerCustomMetrics`: the cells its model code made (one METRIC
frame each), read at scrape time. :func:`collect` merges the cells of every running worker
into families as Triton 2.51 renders them (``# HELP`` with the family's description,
``# TYPE counter|gauge|histogram``, one sample per label set; a histogram as ``_count``,
``_sum`` and cumulative ``_bucket{le=...}`` samples). Cells of one family and label set made
in several workers (the instances of a model, each in a worker of its own) are one metric, as
in Triton, where every instance updates the same one: counts and sums add up, a gauge reads
its most recent update. Runs on the core's event loop.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import Code, TritonError
from ..worker.metric_cells import COUNTER, GAUGE, HISTOGRAM, KIND_NAMES, MAX_BUCKETS, MAX_CELLS, cell_size

log = logging.getLogger("tritium.metrics")

__all__ = ["CustomFamily", "CustomSample", "WorkerCustomMetrics", "collect"]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


@dataclass(slots=True)
class _Cell:
    model: str
    family: str
    description: str
    kind: int
    labels: tuple[tuple[str, str], ...]
    buckets: tuple[float, ...]
    values: memoryview[float]


@dataclass(slots=True)
class CustomSample:
    """One sample line: ``name{labels} value``."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass(slots=True)
class CustomFamily:
    """One custom metric family as ``/metrics`` renders it: name, help text, Prometheus type, samples."""

    name: str
    description: str
    type: str
    samples: list[CustomSample] = field(default_factory=list)


class WorkerCustomMetrics:
    """The custom-metric cells of one worker process (core side).

    :param resolve: maps a ``(segment id, offset, byte size)`` of the worker's arena
        (bounds-checked; raises TritonError INTERNAL for a window outside its segment).
    """

    def __init__(self, resolve: Any) -> None:
        self._resolve = resolve
        self._cells: list[_Cell] = []

    def add(self, message: list[Any]) -> None:
        """Record the cell a METRIC frame announces.

        :raises TritonError: INTERNAL for a malformed frame (the worker is broken).
        """
        try:
            _, model, family, description, kind, labels, buckets, seg_id, offset, nbytes = message
            kind = int(kind)
            bounds = tuple(float(b) for b in buckets)
            items = tuple(sorted((str(k), str(v)) for k, v in dict(labels).items()))
        except (TypeError, ValueError) as exc:
            raise TritonError(Code.INTERNAL, f"malformed METRIC frame: {exc}") from exc
        if (
            kind not in (COUNTER, GAUGE, HISTOGRAM)
            or not _NAME.fullmatch(str(family))
            or not all(_LABEL.fullmatch(k) for k, _v in items)
        ):
            raise TritonError(Code.INTERNAL, f"METRIC frame with kind {kind}, a bad name or bad label names")
        if len(bounds) > MAX_BUCKETS or (kind != HISTOGRAM and bounds) or len(self._cells) >= MAX_CELLS:
            raise TritonError(Code.INTERNAL, "METRIC frame beyond the limits on buckets or metrics")
        if int(nbytes) != cell_size(kind, len(bounds)) * 8:
            raise TritonError(Code.INTERNAL, f"METRIC frame with a cell of {nbytes} bytes")
        values = self._resolve(int(seg_id), int(offset), int(nbytes)).cast("d")
        self._cells.append(_Cell(str(model), str(family), str(description), kind, items, bounds, values))

    @property
    def cells(self) -> Sequence[_Cell]:
        """The cells, in the order they were made."""
        return self._cells

    def clear(self) -> None:
        """Forget every cell (the worker is gone)."""
        for cell in self._cells:
            cell.values.release()
        self._cells = []


_warned: set[tuple[str, str]] = set()


def collect(workers: Iterable[WorkerCustomMetrics]) -> list[CustomFamily]:
    """The custom metric families of ``workers`` now, in the order their families were first made.

    A cell whose family was made elsewhere with another kind, or whose histogram has other
    buckets than the same label set elsewhere, is left out (and logged once).
    """
    families: dict[str, tuple[int, str, dict[tuple[tuple[str, str], ...], list[_Cell]]]] = {}
    for worker in workers:
        for cell in worker.cells:
            entry = families.get(cell.family)
            if entry is None:
                entry = families[cell.family] = (cell.kind, cell.description, {})
            kind, _description, metrics = entry
            same = metrics.get(cell.labels)
            if kind != cell.kind or (same and same[0].buckets != cell.buckets):
                _warn_once(cell, "another kind" if kind != cell.kind else "other buckets")
                continue
            metrics.setdefault(cell.labels, []).append(cell)
    out = []
    for name, (kind, description, metrics) in families.items():
        family = CustomFamily(name, description, KIND_NAMES[kind])
        for labels in sorted(metrics):
            _samples(family, kind, dict(labels), metrics[labels])
        out.append(family)
    return out


def _samples(family: CustomFamily, kind: int, labels: dict[str, str], cells: list[_Cell]) -> None:
    name = family.name
    if kind == COUNTER:
        family.samples.append(CustomSample(name, labels, sum(cell.values[0] for cell in cells)))
    elif kind == GAUGE:
        latest = max(cells, key=lambda cell: cell.values[1])
        family.samples.append(CustomSample(name, labels, latest.values[0]))
    else:
        bounds = cells[0].buckets
        counts = [sum(cell.values[2 + i] for cell in cells) for i in range(len(bounds) + 1)]
        family.samples.append(CustomSample(name + "_count", labels, sum(cell.values[0] for cell in cells)))
        family.samples.append(CustomSample(name + "_sum", labels, sum(cell.values[1] for cell in cells)))
        total = 0.0
        for bound, count in zip([*bounds, math.inf], counts, strict=True):
            total += count
            family.samples.append(CustomSample(name + "_bucket", {**labels, "le": _bound(bound)}, total))


def _bound(value: float) -> str:
    """A bucket boundary as Prometheus clients write ``le`` (``1``, ``2.5``, ``+Inf``)."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() else repr(value)


def _warn_once(cell: _Cell, why: str) -> None:
    key = (cell.family, why)
    if key not in _warned:
        _warned.add(key)
        log.warning(
            "custom metric family '%s' of model '%s' is left out of /metrics: it was created elsewhere with %s",
            cell.family,
            cell.model,
            why,
        )
