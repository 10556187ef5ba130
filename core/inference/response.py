"""Inference responses as the core hands them to frontends.

Output bytes are memoryviews straight into shared memory (a worker's output
arena, or the request's own input block for a model that echoes an input):
valid until :meth:`InferenceResponse.release`, which a frontend calls once
the bytes are on the wire (or copied).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import TritonError
from .tensor import tensor_from_buffer
from .types import by_name

__all__ = ["OutputTensor", "InferenceResponse"]


@dataclass(slots=True)
class OutputTensor:
    """One output tensor of a response.

    :ivar name: output name.
    :ivar datatype: KServe datatype name.
    :ivar shape: the shape.
    :ivar data: the bytes (raw little-endian elements; BYTES length-prefixed).
    :ivar parameters: output parameters set by the core or the backend.
    """

    name: str
    datatype: str
    shape: list[int]
    data: memoryview | bytes
    parameters: dict[str, Any] = field(default_factory=dict)
    #: ``(segment id, offset, nbytes)`` when ``data`` lies in a shared-memory segment
    location: tuple[int, int, int] | None = None
    #: the name of the client's registered region the output was written into (``data`` is then
    #: empty and frontends send no bytes for it, as Triton does)
    shared_memory_region: str | None = None

    def as_numpy(self) -> np.ndarray:
        """The output as a numpy array (a view for fixed-size types; copy it to keep it past release)."""
        dt = by_name(self.datatype)
        assert dt is not None
        return tensor_from_buffer(dt, self.shape, self.data)


@dataclass(slots=True)
class InferenceResponse:
    """One response (KServe v2 ``ModelInferResponse``), or an error.

    :ivar model_name: the model that ran.
    :ivar model_version: the version that ran, as a string.
    :ivar id: the request id, echoed.
    :ivar outputs: the output tensors (empty for an error or a flags-only
        final response of a decoupled model).
    :ivar parameters: response parameters from the backend.
    :ivar error: set when the request failed.
    :ivar final: True for the last response of the request.
    """

    model_name: str
    model_version: str
    id: str = ""
    outputs: list[OutputTensor] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    error: TritonError | None = None
    final: bool = True
    _release: Callable[[], None] | None = None

    def output(self, name: str) -> OutputTensor | None:
        """The output named ``name``, or None."""
        for out in self.outputs:
            if out.name == name:
                return out
        return None

    def release(self) -> None:
        """Give the shared memory behind :attr:`outputs` back (idempotent)."""
        release, self._release = self._release, None
        if release is not None:
            release()

    def __enter__(self) -> InferenceResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
