"""Ragged inputs, batch inputs and batch outputs: how a framework backend lays out a batch (Triton's ragged batching).

Triton's framework backends (onnxruntime, pytorch, tensorrt) build these
through the backend library's ``BackendInputCollector`` and
``BackendOutputResponder``; :class:`BatchIO` does the same for tritium's
framework backends, in the worker, from the model config:

* an input with ``allow_ragged_batch: true`` reaches the model as one 1-D
  tensor, every request's elements one after the other (shape
  ``[sum of the requests' element counts]``);
* each ``batch_input`` is computed from the batch and given to the model under
  each of its ``target_name``\\ s, with the config's ``data_type`` (TYPE_INT32 or
  TYPE_FP32), from the shapes of its ``source_input`` in the n requests
  (request i: shape ``s_i``, element count ``c_i``, batch size ``s_i[0]``):

  ==========================================  ==============================  ==========================================
  kind                                        shape                           value
  ==========================================  ==============================  ==========================================
  BATCH_ELEMENT_COUNT                         ``[n]``                         ``c_i``
  BATCH_ACCUMULATED_ELEMENT_COUNT             ``[n]``                         ``c_0 + ... + c_i``
  BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO   ``[n + 1]``                     ``0``, then the accumulated counts
  BATCH_MAX_ELEMENT_COUNT_AS_SHAPE            ``[max c_i]``                   zeros (Triton: uninitialized)
  BATCH_ITEM_SHAPE                            ``[sum s_i[0], len(s_i) - 1]``  ``s_i[1:]``, once per batch item
  BATCH_ITEM_SHAPE_FLATTEN                    ``[sum s_i[0] * (len - 1)]``    the same values, flattened
  ==========================================  ==============================  ==========================================

* an output named by a ``batch_output`` (``BATCH_SCATTER_WITH_INPUT_SHAPE``)
  is scattered back: request i gets the output's config shape (the batch
  dimension first when the model batches; ``reshape`` when given) with each
  -1 replaced by the same dimension of its ``source_input``, and the next
  that many elements of the model's output, in request order.

Runs in the worker process, on the executing thread; numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import Code, TritonError
from .api import Request, batch_input

__all__ = ["BatchIO", "flat_input"]

_DTYPES = {"TYPE_INT32": np.dtype(np.int32), "TYPE_FP32": np.dtype(np.float32)}


@dataclass(frozen=True, slots=True)
class _BatchInput:
    kind: str
    targets: tuple[str, ...]
    dtype: np.dtype[Any]
    source: str


@dataclass(frozen=True, slots=True)
class _BatchOutput:
    source: str
    shape: tuple[int, ...]  # the config shape, -1 where the source input's dimension goes


def flat_input(requests: Sequence[Request], name: str) -> np.ndarray:
    """Input ``name`` of every request, flattened and concatenated: a ragged input as Triton's backends give it.

    :returns: a 1-D array of ``sum(request element counts)`` elements; a view of
        the arena when the requests' arrays are adjacent there (the dynamic
        batcher lays a batch out so), a copy otherwise.
    :raises TritonError: INVALID_ARG when a request lacks the input.
    """
    arrays = [r.input(name) for r in requests]
    first = arrays[0]
    if len(arrays) == 1:
        return first.reshape(-1)
    if first.dtype != object and all(a.flags.c_contiguous and a.dtype == first.dtype for a in arrays):
        expected = first.__array_interface__["data"][0]
        for a in arrays:
            if a.size and a.__array_interface__["data"][0] != expected:
                break
            expected += a.nbytes
        else:
            total = sum(int(a.size) for a in arrays)
            return np.lib.stride_tricks.as_strided(
                first.reshape(-1), shape=(total,), strides=(first.itemsize,), writeable=False
            )
    return np.concatenate([a.reshape(-1) for a in arrays])


class BatchIO:
    """A model's ragged inputs, batch inputs and batch outputs (see the module docstring).

    Built once per model instance with :meth:`from_config`; the config was
    checked at load (:mod:`tritium.core.model_config.batch_io`: kinds, data
    types, source inputs and target outputs exist).
    """

    __slots__ = ("ragged", "batch_inputs", "batch_outputs", "batching")

    def __init__(
        self,
        ragged: frozenset[str],
        batch_inputs: tuple[_BatchInput, ...],
        batch_outputs: Mapping[str, _BatchOutput],
        batching: bool,
    ) -> None:
        self.ragged = ragged
        self.batch_inputs = batch_inputs
        self.batch_outputs = dict(batch_outputs)
        self.batching = batching

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BatchIO | None:
        """The config's ragged inputs, batch inputs and outputs; None when it has none of them."""
        ragged = frozenset(str(i["name"]) for i in config.get("input", []) if i.get("allow_ragged_batch"))
        batching = int(config.get("max_batch_size", 0)) > 0
        inputs = tuple(
            _BatchInput(
                str(b.get("kind", "BATCH_ELEMENT_COUNT")),
                tuple(str(t) for t in b.get("target_name", [])),
                _DTYPES.get(str(b.get("data_type", "")), np.dtype(np.float32)),
                str(b["source_input"][0]),
            )
            for b in config.get("batch_input", [])
        )
        shapes: dict[str, tuple[int, ...]] = {}
        for out in config.get("output", []):
            reshape = out.get("reshape")
            dims = [int(d) for d in (reshape.get("shape", []) if reshape is not None else out.get("dims", []))]
            shapes[str(out["name"])] = tuple(([-1] if batching else []) + dims)
        outputs = {
            str(target): _BatchOutput(str(b["source_input"][0]), shapes[str(target)])
            for b in config.get("batch_output", [])
            for target in b.get("target_name", [])
        }
        if not (ragged or inputs or outputs):
            return None
        return cls(ragged, inputs, outputs, batching)

    def inputs(self, requests: Sequence[Request]) -> dict[str, np.ndarray]:
        """The model's inputs for ``requests`` run together: the requests' own inputs (concatenated along
        dim 0; ragged ones flattened) and every batch input's targets.

        :raises TritonError: INVALID_ARG when a request lacks an input.
        """
        out: dict[str, np.ndarray] = {}
        for name in requests[0].inputs:
            if name in self.ragged:
                out[name] = flat_input(requests, name)
            else:
                out[name] = batch_input(requests, name)
        for spec in self.batch_inputs:
            value = _batch_input_value(spec, [r.input(spec.source).shape for r in requests])
            for target in spec.targets:
                out[target] = value
        return out

    def scatter(self, requests: Sequence[Request], name: str, value: np.ndarray) -> list[np.ndarray] | None:
        """Output ``name`` split over ``requests`` when it is a batch output; None for other outputs.

        :raises TritonError: INTERNAL when the model's output holds fewer
            elements than the requests' shapes need, or the output's config
            shape has a -1 past the source input's dimensions.
        """
        spec = self.batch_outputs.get(name)
        if spec is None:
            return None
        flat = np.asarray(value).reshape(-1)
        shapes = []
        for request in requests:
            source = request.input(spec.source).shape
            if any(d == -1 and i >= len(source) for i, d in enumerate(spec.shape)):
                raise TritonError(
                    Code.INTERNAL,
                    f"batch output '{name}' has a variable dimension past the {len(source)} dimensions of its "
                    f"source input '{spec.source}' (BATCH_SCATTER_WITH_INPUT_SHAPE)",
                )
            shapes.append(tuple(int(source[i]) if d == -1 else int(d) for i, d in enumerate(spec.shape)))
        counts = [int(np.prod(shape, dtype=np.int64)) for shape in shapes]
        if sum(counts) > flat.size:
            raise TritonError(
                Code.INTERNAL,
                f"batch output '{name}' has {flat.size} elements, fewer than the {sum(counts)} that its "
                "requests' shapes need (BATCH_SCATTER_WITH_INPUT_SHAPE)",
            )
        parts = []
        start = 0
        for shape, count in zip(shapes, counts):
            parts.append(flat[start : start + count].reshape(shape))
            start += count
        return parts


def _batch_input_value(spec: _BatchInput, shapes: Sequence[tuple[int, ...]]) -> np.ndarray:
    """One batch input's tensor from the source input's shapes in the batch's requests (Triton's kinds)."""
    counts = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    kind = spec.kind
    if kind == "BATCH_ELEMENT_COUNT":
        return np.array(counts, dtype=spec.dtype)
    if kind == "BATCH_ACCUMULATED_ELEMENT_COUNT":
        return np.cumsum(counts, dtype=np.int64).astype(spec.dtype)
    if kind == "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO":
        return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(spec.dtype)
    if kind == "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE":
        return np.zeros([max(counts)], dtype=spec.dtype)
    if kind in ("BATCH_ITEM_SHAPE", "BATCH_ITEM_SHAPE_FLATTEN"):
        rank = len(shapes[0]) - 1 if shapes else 0
        rows = [list(s[1:]) for s in shapes for _ in range(int(s[0]) if s else 1)]
        value = np.array(rows, dtype=spec.dtype).reshape(len(rows), max(rank, 0))
        return value if kind == "BATCH_ITEM_SHAPE" else value.reshape(-1)
    raise TritonError(Code.INTERNAL, f"unsupported batch input kind '{kind}'")
