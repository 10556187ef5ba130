"""The core's side of custom metrics: METRIC frames checked, cells merged and read at scrape time."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tritium.core.errors import TritonError
from tritium.core.memory.arena import Segment, SegmentTable
from tritium.core.observability.custom_metrics import WorkerCustomMetrics, collect
from tritium.core.worker.metric_cells import COUNTER, GAUGE, HISTOGRAM
from tritium.core.worker.protocol import Kind


@pytest.fixture
def table() -> Iterator[SegmentTable]:
    segments = SegmentTable()
    segments.add(Segment.create(1 << 24, 4096))
    yield segments
    for segment in list(segments):
        segments.remove(segment.id)


def _frame(family: str, kind: int, labels: dict[str, str], buckets: list[float], offset: int, nbytes: int) -> list:
    return [Kind.METRIC, "m", family, "help", kind, labels, buckets, 1 << 24, offset, nbytes]


def _cell(table: SegmentTable, offset: int, nbytes: int) -> memoryview:
    return table.resolve(1 << 24, offset, nbytes).cast("d")


def test_cells_of_two_workers_merge_into_one_metric(table: SegmentTable) -> None:
    one, two = WorkerCustomMetrics(table.resolve), WorkerCustomMetrics(table.resolve)
    one.add(_frame("c", COUNTER, {"b": "2", "a": "1"}, [], 0, 8))
    two.add(_frame("c", COUNTER, {"a": "1", "b": "2"}, [], 64, 8))
    one.add(_frame("g", GAUGE, {}, [], 128, 16))
    two.add(_frame("g", GAUGE, {}, [], 192, 16))
    one.add(_frame("h", HISTOGRAM, {}, [1.0, 2.5], 256, 40))
    _cell(table, 0, 8)[0] = 2
    _cell(table, 64, 8)[0] = 3.5
    first, second = _cell(table, 128, 16), _cell(table, 192, 16)
    first[0], first[1] = 7, time.monotonic_ns()
    second[0], second[1] = 9, first[1] - 1  # updated earlier: the first worker's value is the latest
    histogram = _cell(table, 256, 40)
    histogram[0], histogram[1], histogram[2], histogram[3], histogram[4] = 3, 21.5, 1, 0, 2
    families = collect([one, two])
    assert [(f.name, f.type) for f in families] == [("c", "counter"), ("g", "gauge"), ("h", "histogram")]
    assert [(s.name, s.labels, s.value) for s in families[0].samples] == [("c", {"a": "1", "b": "2"}, 5.5)]
    assert [(s.name, s.value) for s in families[1].samples] == [("g", 7)]
    assert [(s.name, s.labels, s.value) for s in families[2].samples] == [
        ("h_count", {}, 3),
        ("h_sum", {}, 21.5),
        ("h_bucket", {"le": "1"}, 1),
        ("h_bucket", {"le": "2.5"}, 1),
        ("h_bucket", {"le": "+Inf"}, 3),
    ]
    one.clear()
    assert [f.name for f in collect([one, two])] == ["c", "g"]


def test_a_family_made_elsewhere_with_another_kind_is_left_out(table: SegmentTable) -> None:
    one, two = WorkerCustomMetrics(table.resolve), WorkerCustomMetrics(table.resolve)
    one.add(_frame("x", COUNTER, {}, [], 0, 8))
    two.add(_frame("x", GAUGE, {"k": "v"}, [], 64, 16))
    families = collect([one, two])
    assert [(f.name, f.type, len(f.samples)) for f in families] == [("x", "counter", 1)]


@pytest.mark.parametrize(
    "frame",
    [
        _frame("c", COUNTER, {}, [], 4090, 8),  # outside its segment
        _frame("c", COUNTER, {}, [], 0, 16),  # the wrong size for a counter
        _frame("c", COUNTER, {}, [1.0], 0, 8),  # buckets on a counter
        _frame("bad name", COUNTER, {}, [], 0, 8),
        _frame("c", COUNTER, {"bad-label": "x"}, [], 0, 8),
        _frame("c", 5, {}, [], 0, 8),
        [Kind.METRIC, "m", "c"],
    ],
)
def test_a_malformed_frame_is_refused(table: SegmentTable, frame: list) -> None:
    with pytest.raises(TritonError):
        WorkerCustomMetrics(table.resolve).add(frame)
