"""The cancel board: tokens marked by the core are read by the worker, exactly, in shared memory."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tritium.core.errors import TritonError
from tritium.core.worker.cancel_board import PROBES, SLOTS, CancelBoard


@pytest.fixture
def boards() -> Iterator[tuple[CancelBoard, CancelBoard]]:
    core = CancelBoard.create()
    worker = CancelBoard.attach(core.segment.size, os.dup(core.fd))  # the worker's own mapping
    yield core, worker
    worker.close()
    core.close()


def test_a_marked_request_is_seen_by_the_other_mapping_and_no_other(boards: tuple[CancelBoard, CancelBoard]) -> None:
    core, worker = boards
    assert not worker.is_set(7, 0)
    assert core.mark(7, 0, lambda batch: True)
    assert worker.is_set(7, 0)
    assert not worker.is_set(7, 1) and not worker.is_set(8, 0)
    assert core.mark(7, 0, lambda batch: True)  # marking twice is harmless
    assert worker.is_set(7, 0)


def test_requests_whose_slots_collide_each_keep_theirs_while_in_flight(boards: tuple[CancelBoard, CancelBoard]) -> None:
    core, worker = boards
    # batch ids that hash to the same first slot for index 0: b and b + SLOTS
    batches = [5 + SLOTS * k for k in range(PROBES)]
    for batch in batches:
        assert core.mark(batch, 0, lambda b: True)
    assert all(worker.is_set(batch, 0) for batch in batches)
    # one more: all its slots hold requests still in flight
    extra = 5 + SLOTS * PROBES
    assert not core.mark(extra, 0, lambda b: True)
    assert not worker.is_set(extra, 0)
    # once the first batch finished, its slot is taken again
    assert core.mark(extra, 0, lambda b: b != batches[0])
    assert worker.is_set(extra, 0) and not worker.is_set(batches[0], 0)


def test_a_board_of_the_wrong_size_is_refused(boards: tuple[CancelBoard, CancelBoard]) -> None:
    core, _ = boards
    with pytest.raises(TritonError, match="cancel board of 100 bytes"):
        CancelBoard.attach(100, os.dup(core.fd))
