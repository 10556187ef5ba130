"""batch_input: one array for a batch, a view when the dynamic batcher laid the inputs out contiguously."""

from __future__ import annotations

import numpy as np

from tritium.core.backend.api import Request, batch_input


def _request(array: np.ndarray) -> Request:
    return Request("", 0, 0, {}, {"X": array}, [], sink=None)  # type: ignore[arg-type]


def test_contiguous_slices_give_a_view_without_copy() -> None:
    whole = np.arange(12, dtype=np.float32).reshape(6, 2)
    whole.flags.writeable = False
    requests = [_request(whole[0:1]), _request(whole[1:4]), _request(whole[4:6])]
    batch = batch_input(requests, "X")
    assert np.shares_memory(batch, whole)
    assert batch.shape == (6, 2) and not batch.flags.writeable
    np.testing.assert_array_equal(batch, whole)


def test_scattered_arrays_are_concatenated() -> None:
    a = np.ones((1, 2), np.float32)
    b = np.zeros((2, 2), np.float32)
    batch = batch_input([_request(a), _request(b)], "X")
    np.testing.assert_array_equal(batch, np.concatenate([a, b]))
    assert not np.shares_memory(batch, a)


def test_one_dimensional_slices_of_different_lengths_join_as_a_view() -> None:
    whole = np.arange(6, dtype=np.int32)
    flat = batch_input([_request(whole[0:2]), _request(whole[2:6])], "X")
    assert flat.shape == (6,) and np.shares_memory(flat, whole)
