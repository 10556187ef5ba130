"""The dynamic batcher's batch formation and bookkeeping, with fake instances (no processes)."""

from __future__ import annotations

from typing import Any

from tritium.core.scheduler.base import Batch, Payload
from tritium.core.scheduler.dynamic_batcher import DynamicBatcher


class _Handler:
    def __init__(self) -> None:
        self.responses: list[Any] = []

    def on_response(
        self, payload: Payload, outputs: Any, error: Any, parameters: Any, final: bool, worker: Any
    ) -> None:
        payload.final = final
        self.responses.append(error)

    def on_executed(self, payload: Payload) -> None:
        pass


class _Instance:
    name = "fake"

    def __init__(self) -> None:
        self.batches: list[Batch] = []

    def execute(self, batch: Batch) -> None:
        self.batches.append(batch)

    def finish(self) -> None:
        batch = self.batches[-1]
        for i in range(len(batch.payloads)):
            batch.on_response(i, [], None, None, True, None)
        batch.on_done([0, 0, 0], None)


def _payload(handler: _Handler, rows: int = 1, cols: int = 4) -> Payload:
    wire = {"id": "", "inputs": [["X", "FP32", [rows, cols], 0, 0, 16 * rows]], "priority": 0, "timeout": 0}
    return Payload(wire, rows, handler, None)


def _batcher(**dynamic: Any) -> tuple[DynamicBatcher, list[int]]:
    executed: list[int] = []
    config = {"max_batch_size": 8, "input": [{"name": "X"}], "dynamic_batching": dynamic}
    return DynamicBatcher("'m' version 1", config, lambda size, t: executed.append(size), lambda e: True), executed


def test_queued_requests_go_together_and_inflight_returns_to_zero() -> None:
    batcher, executed = _batcher()
    instance = _Instance()
    batcher.add_executor(instance)
    handler = _Handler()
    batcher.enqueue(_payload(handler))  # the instance is free: runs alone at once
    for _ in range(5):
        batcher.enqueue(_payload(handler))  # queued behind it
    assert [len(b.payloads) for b in instance.batches] == [1]
    assert batcher.inflight_count() == 6
    instance.finish()  # the five queued go as one batch
    assert [len(b.payloads) for b in instance.batches] == [1, 5]
    instance.finish()
    assert batcher.inflight_count() == 0
    assert executed == [1, 5] and handler.responses == [None] * 6


def test_rows_count_toward_max_batch_size_and_shapes_split_batches() -> None:
    batcher, _ = _batcher()
    instance = _Instance()
    handler = _Handler()
    batcher.add_executor(instance)
    for payload in (_payload(handler, rows=5), _payload(handler, rows=4), _payload(handler, cols=2)):
        batcher.enqueue(payload)
    instance.finish()
    instance.finish()
    # 5 rows alone (5 + 4 > 8), then 4 rows; the request of another shape goes alone
    assert [sum(p.batch_size for p in b.payloads) for b in instance.batches] == [5, 4, 1]
