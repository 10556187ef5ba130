"""Triton's classification extension: an output replaced by its top-K classes.

A requested output with the ``classification: K`` parameter comes back as a
BYTES tensor of strings ``"<value>:<index>"`` or, when the output has a
``label_filename``, ``"<value>:<index>:<label>"``. Floating-point values are
written with six decimals (``"11.905578"``), integers as integers. A batched
model gets K classes per batch element (shape ``[batch, K]``); a model that
does not batch gets K over all elements (shape ``[K]``). K larger than the
class count is cut to the class count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import Code, TritonError
from ..inference.response import OutputTensor
from ..inference.tensor import serialize_bytes, tensor_from_buffer
from ..inference.types import by_name

__all__ = ["classify", "classify_output", "classify_outputs"]


def _top_k(row: np.ndarray, k: int, labels: Sequence[str], is_float: bool) -> list[bytes]:
    k = min(k, row.size)
    # stable sort on the negated values: ties keep the lower index first
    order = np.argsort(-row.astype(np.float64), kind="stable")[:k]
    out = []
    for index in order:
        value = row[index]
        text = f"{float(value):f}" if is_float else str(int(value))
        item = f"{text}:{int(index)}"
        if labels and int(index) < len(labels):
            item += f":{labels[int(index)]}"
        out.append(item.encode("utf-8"))
    return out


def classify(array: np.ndarray, k: int, batched: bool, labels: Sequence[str] = ()) -> tuple[list[int], bytes]:
    """Return the shape and serialized BYTES data of the top-``k`` classes of ``array``.

    :param array: the output (numeric, any shape; ``[batch, ...]`` when ``batched``).
    :param k: how many classes (>= 1).
    :param batched: whether the first dimension is the batch.
    :param labels: class labels by index (may be empty).
    :raises TritonError: INVALID_ARG for a BYTES output (nothing to rank).
    """
    if array.dtype.kind not in "biuf":
        raise TritonError(Code.INVALID_ARG, "classification is not supported for BYTES outputs")
    is_float = array.dtype.kind == "f"
    if batched and array.ndim >= 1:
        rows = array.reshape(array.shape[0], -1) if array.shape[0] else array.reshape(0, 0)
        classes = [_top_k(row, k, labels, is_float) for row in rows]
        width = min(k, rows.shape[1]) if rows.shape[0] else 0
        shape = [int(array.shape[0]), width]
        flat = [c for row in classes for c in row]
    else:
        flat = _top_k(array.reshape(-1), k, labels, is_float)
        shape = [len(flat)]
    data = serialize_bytes(np.array(flat, dtype=np.object_))
    assert isinstance(data, bytes)
    return shape, data


def classify_output(tensor: OutputTensor, k: int, batched: bool, labels: Sequence[str] = ()) -> OutputTensor:
    """``tensor`` replaced by its top-``k`` classes (a BYTES tensor, parameters kept); see :func:`classify`.

    :param labels: the output's class labels (its ``label_filename``), by index; may be empty.
    :raises TritonError: INVALID_ARG for a BYTES output (Triton's message names the output).
    """
    dt = by_name(tensor.datatype)
    if dt is None or dt.is_bytes:
        raise TritonError(Code.INVALID_ARG, f"classification is not supported for output '{tensor.name}' of type BYTES")
    array = tensor_from_buffer(dt, tensor.shape, tensor.data)
    shape, data = classify(array, k, batched, labels)
    return OutputTensor(tensor.name, "BYTES", shape, data, dict(tensor.parameters))


def classify_outputs(
    tensors: list[OutputTensor], wanted: Mapping[str, int], batched: bool, labels: Mapping[str, Sequence[str]]
) -> list[OutputTensor]:
    """The outputs of a response with the classification extension applied where asked.

    :param wanted: output name -> top-K asked (outputs not named are kept as they are).
    :param batched: whether the model batches (K classes per batch element).
    :param labels: output name -> its class labels (the output's ``label_filename``).
    :raises TritonError: INVALID_ARG for a BYTES output asked to be classified.
    """
    out = []
    for tensor in tensors:
        k = wanted.get(tensor.name)
        out.append(classify_output(tensor, k, batched, labels.get(tensor.name, ())) if k else tensor)
    return out
