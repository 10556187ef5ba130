"""Inference requests as the core sees them, whichever endpoint they came in through.

Frontends build an :class:`InferenceRequest` from their wire format and hand
it to :meth:`tritium.core.server.InferenceServer.infer`. Tensor data is raw
little-endian bytes (BYTES: 4-byte length-prefixed elements), exactly as the
KServe binary extension and gRPC ``raw_input_contents`` carry it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .tensor import serialize_bytes
from .types import by_name, from_numpy

if TYPE_CHECKING:  # pragma: no cover
    from ..memory.cuda import CudaRef
    from ..memory.pool import SharedBlock
    from ..memory.shm_region import ShmRef

__all__ = ["InferInput", "RequestedOutput", "InferenceRequest", "ParameterValue"]

ParameterValue = bool | int | float | str


@dataclass(slots=True)
class InferInput:
    """One input tensor of a request.

    :ivar name: input name.
    :ivar datatype: KServe datatype name (``"FP32"``, ``"BYTES"``).
    :ivar shape: the shape, batch dimension included when the model batches.
    :ivar data: the tensor bytes (raw little-endian elements; BYTES as
        length-prefixed elements). None when the data is in a shared-memory region.
    :ivar parameters: the input's parameters (``binary_data_size``, ...).
    :ivar shared_memory: where the data lies when it is in a registered
        system or CUDA shared-memory region (see :meth:`SharedMemoryManager.resolve
        <tritium.core.memory.shm_region.SharedMemoryManager.resolve>`).
    :ivar buffer_offset: where ``data`` starts in the request's :attr:`InferenceRequest.buffer`,
        in bytes, when it is a slice of it (-1: it is not); the core then sends the
        worker its place in the arena instead of copying it there.
    """

    name: str
    datatype: str
    shape: list[int]
    data: bytes | bytearray | memoryview | None = None
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    shared_memory: ShmRef | CudaRef | None = None
    buffer_offset: int = -1

    @classmethod
    def from_numpy(cls, name: str, array: np.ndarray, datatype: str | None = None) -> InferInput:
        """Build an input from a numpy array (object/str/bytes arrays become BYTES).

        :param datatype: override the datatype (e.g. ``"BF16"`` for a uint16 array).
        :raises ValueError: for a dtype with no KServe datatype.
        """
        dt = by_name(datatype) if datatype else from_numpy(array.dtype)
        if dt is None:
            raise ValueError(f"no KServe datatype for numpy dtype {array.dtype}")
        if dt.is_bytes:
            data: bytes | memoryview = serialize_bytes(array)
        else:
            data = memoryview(np.ascontiguousarray(array, dtype=dt.numpy)).cast("B")  # type: ignore[arg-type]  # numpy 1.26 stubs: ndarray lacks __buffer__
        return cls(name, dt.name, [int(d) for d in array.shape], data)


@dataclass(slots=True)
class RequestedOutput:
    """An output the client asked for.

    :ivar name: output name.
    :ivar parameters: its parameters (``classification`` = top-K count,
        ``binary_data`` for the HTTP binary extension, ...).
    :ivar shared_memory: the registered region window the output is to be
        written into, if any (the response then carries no bytes for it).
    """

    name: str
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    shared_memory: ShmRef | CudaRef | None = None

    @property
    def classification(self) -> int:
        """The requested top-K for the classification extension; 0 when not asked."""
        value = self.parameters.get("classification", 0)
        return int(value) if not isinstance(value, bool) else 0


@dataclass(slots=True)
class InferenceRequest:
    """One inference request (KServe v2 ``ModelInferRequest``).

    :ivar model_name: the model to run.
    :ivar model_version: the version as a string; "" lets the version policy
        choose (the highest ready version).
    :ivar id: the client's request id, echoed in the response.
    :ivar inputs: the input tensors.
    :ivar outputs: the requested outputs; empty means every output of the model.
    :ivar parameters: request parameters (``priority``, ``timeout``,
        ``sequence_id``, ``binary_data_output``, ...).
    :ivar buffer: the block of the core's arena the request's bytes were received
        into, when the frontend received them there
        (:meth:`~tritium.core.server.InferenceServer.request_buffer`); inputs with a
        :attr:`InferInput.buffer_offset` are slices of it. The core takes its own
        reference for every input it sends from it; the frontend still releases its own.
    :ivar trace: its :class:`~tritium.core.tracing.trace.Trace` when the trace extension
        sampled it (the model adds its queue and compute times), else None.
    :ivar cancelled: the caller cancelled it (or went away) before its final response; the
        model's statistics then count it as a failure with reason ``CANCELED``, even when the
        model ran it to the end (Triton 2.51 counts such a request as a success).
    """

    model_name: str
    model_version: str = ""
    id: str = ""
    inputs: list[InferInput] = field(default_factory=list)
    outputs: list[RequestedOutput] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    buffer: SharedBlock | None = None
    trace: Any = None
    cancelled: bool = False
