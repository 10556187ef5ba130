"""Custom metrics of model code (pb_utils ``MetricFamily``): where their values live.

Each metric (a family's metric for one set of labels) gets a *cell*: a few doubles in the
worker's output arena, which the core has mapped too. Model code writes its updates straight
into the cell; the core reads every cell when ``/metrics`` is scraped. The only message is
one METRIC frame per cell, when the cell is made (worker to core): the family's name, help
text and kind, the labels, the histogram buckets, and where the cell is. So an update costs
no system call and no frame, and the core's work is bounded by the number of cells (at most
:data:`MAX_CELLS` per worker), not by how often they change. Cells live as long as their
worker: a python model's worker stops when the model unloads, and its metrics go with it.

Cell layouts (float64 each):

- counter: ``[value]``;
- gauge: ``[value, time of the last update]`` (``time.monotonic_ns()``, the same clock in every
  process: when the instances of a model, each in a worker of its own, update one gauge, the
  core reports the most recent update, as Triton's one shared gauge would read after a ``set``);
- histogram: ``[count, sum, bucket_0, ..., bucket_n-1, above the last bucket]``, per-bucket
  (not cumulative) counts.

Both sides use this module: :func:`cell_size`, :class:`CellMaker` (worker side).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import Code, TritonError
from .protocol import Kind

if TYPE_CHECKING:  # pragma: no cover
    from .host import WorkerHost

__all__ = [
    "COUNTER",
    "GAUGE",
    "HISTOGRAM",
    "KIND_NAMES",
    "MAX_CELLS",
    "MAX_BUCKETS",
    "cell_size",
    "CellMaker",
    "maker",
]

#: metric kinds, numbered as pb_utils ``MetricFamily.COUNTER`` / ``GAUGE`` / ``HISTOGRAM``
COUNTER, GAUGE, HISTOGRAM = 0, 1, 2
#: Prometheus ``# TYPE`` of each kind
KIND_NAMES = ("counter", "gauge", "histogram")
#: cells one worker may make (a model that makes more gets an error)
MAX_CELLS = 4096
#: buckets of one histogram
MAX_BUCKETS = 256


def cell_size(kind: int, buckets: int) -> int:
    """Doubles in the cell of a metric of ``kind`` with ``buckets`` bucket boundaries."""
    if kind == COUNTER:
        return 1
    if kind == GAUGE:
        return 2
    return 3 + buckets


class CellMaker:
    """Makes the cells of one worker (worker side, any thread).

    :param worker: the worker (its output arena and its channel to the core).
    """

    def __init__(self, worker: WorkerHost) -> None:
        self._worker = worker
        self._count = 0
        self._lock = threading.Lock()

    def make(
        self,
        model: str,
        family: str,
        description: str,
        kind: int,
        labels: Mapping[str, str],
        buckets: Sequence[float],
    ) -> memoryview[float]:
        """A new zeroed cell, announced to the core; returns it as a memoryview of doubles.

        :raises TritonError: UNAVAILABLE past :data:`MAX_CELLS` cells, or when the arena cannot grow.
        """
        with self._lock:
            if self._count >= MAX_CELLS:
                raise TritonError(
                    Code.UNAVAILABLE, f"a model instance may create at most {MAX_CELLS} metrics (one per label set)"
                )
            self._count += 1
        size = cell_size(kind, len(buckets)) * 8
        block = self._worker.allocate(size)
        cell = block.view.cast("d")
        for i in range(len(cell)):
            cell[i] = 0.0
        seg_id, offset, nbytes = block.descriptor
        self._worker.channel.send(
            [Kind.METRIC, model, family, description, kind, dict(labels), list(buckets), seg_id, offset, nbytes]
        )
        return cell


#: the cell maker of this worker process (set by the worker as it starts)
_maker: CellMaker | None = None


def maker() -> CellMaker:
    """The cell maker of this worker process.

    :raises TritonError: UNAVAILABLE outside a worker process.
    """
    if _maker is None:
        raise TritonError(Code.UNAVAILABLE, "custom metrics can only be created by model code running in tritium")
    return _maker
