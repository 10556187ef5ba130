"""Triton's classification extension formatting."""

from __future__ import annotations

import numpy as np

from tritium.core.inference.tensor import deserialize_bytes
from tritium.core.model.classification import classify

LABELS = ["cat", "dog", "bird", "fish", "horse"]


def _strings(shape_data):
    shape, data = shape_data
    return shape, [x.decode() for x in deserialize_bytes(data)]


def test_batched_output_gives_k_classes_per_batch_element():
    logits = np.array([[0.1, 0.5, 0.3, 0.9, 0.2], [1.1, 0.5, 0.3, 0.9, 0.2]], dtype=np.float32)
    shape, items = _strings(classify(logits, 3, batched=True, labels=LABELS))
    assert shape == [2, 3]
    assert items == [
        "0.900000:3:fish",
        "0.500000:1:dog",
        "0.300000:2:bird",
        "1.100000:0:cat",
        "0.900000:3:fish",
        "0.500000:1:dog",
    ]


def test_non_batched_output_ranks_all_elements_and_k_is_capped():
    shape, items = _strings(classify(np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32), 10, batched=False))
    assert shape == [6]
    assert items[:2] == ["6:5", "5:4"]
