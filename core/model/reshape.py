"""The model config's ``reshape`` of inputs and outputs, as Triton applies it.

A configured input or output may carry ``reshape { shape: [...] }``: the client
sends and receives the configured ``dims``, the model sees and produces the
``reshape`` shape. For a batching model (``max_batch_size > 0``) the batch
dimension stays outside: ``[batch] + dims`` becomes ``[batch] + reshape``.
Variable dimensions (``-1``) are carried across in order: the values of the
``-1`` positions of one side fill the ``-1`` positions of the other (Triton's
``InferenceRequest::Normalize`` for inputs, ``InferenceResponse::Output`` for
outputs). Config normalization has already checked that both sides hold the
same elements (:mod:`.model_config.normalize`).

The maps are built once, at model load (:func:`reshapes`); a model whose config
has no ``reshape`` gets None and pays nothing per request. Runs in the core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Reshape", "reshapes"]


class Reshape:
    """One tensor's reshape: ``source`` dims (what arrives) to ``target`` dims (what leaves).

    :param source: the dims the shape has now, without the batch dimension.
    :param target: the dims it is given, without the batch dimension.
    :param batched: shapes carry a leading batch dimension that stays as it is.
    """

    __slots__ = ("source_variable", "target", "batched", "fixed")

    def __init__(self, source: Sequence[int], target: Sequence[int], batched: bool) -> None:
        offset = 1 if batched else 0
        #: positions (batch dim included) of the source's variable dims
        self.source_variable = [i + offset for i, d in enumerate(source) if d == -1]
        self.target = [int(d) for d in target]
        self.batched = batched
        #: the target shape when no dim is variable on either side (and no batch dim)
        self.fixed = None if (self.source_variable or -1 in self.target or batched) else list(self.target)

    def apply(self, shape: Sequence[int]) -> list[int]:
        """The reshaped ``shape`` (a shape the request's validation has already accepted).

        :param shape: the tensor's shape, batch dimension first when :attr:`batched`.
        """
        if self.fixed is not None:
            return list(self.fixed)
        variable = iter([shape[i] for i in self.source_variable if i < len(shape)])
        out = [int(shape[0])] if self.batched and shape else []
        for dim in self.target:
            out.append(next(variable, -1) if dim == -1 else dim)
        return out


def reshapes(config: Mapping[str, Any], key: str) -> dict[str, Reshape] | None:
    """The reshapes of the config's inputs (``key="input"``: dims -> reshape) or outputs
    (``key="output"``: reshape -> dims); None when none of them has one.
    """
    batched = int(config.get("max_batch_size", 0) or 0) > 0
    found: dict[str, Reshape] = {}
    for item in config.get(key, []) or []:
        reshape = item.get("reshape")
        if reshape is None:
            continue
        dims = [int(d) for d in item.get("dims", [])]
        shape = [int(d) for d in reshape.get("shape", [])]
        if dims == shape:
            continue
        found[str(item["name"])] = Reshape(dims, shape, batched) if key == "input" else Reshape(shape, dims, batched)
    return found or None
