"""Tensors in a client's registered region, for request paths that hold tensor bytes in the core.

A model's own request path passes region descriptors to its worker (system
regions) or copies once into the arena (CUDA regions); see
:mod:`tritium.core.model.model`. An ensemble instead hands tensors from step to
step inside the core, so its inputs are read out of their regions once when
the request arrives (:func:`stage_input`) and its outputs asked into regions
are written there when its response is ready (:func:`deliver_output`).
"""

from __future__ import annotations

import os

from ..errors import Code, TritonError
from ..inference.request import InferInput
from ..inference.response import OutputTensor
from .cuda import CudaRef
from .shm_region import ShmRef, output_region_too_small

__all__ = ["deliver_output", "stage_input"]


def stage_input(inp: InferInput) -> None:
    """Replace an input that lies in a registered region by a copy of its ``byte_size`` bytes.

    No-op for an input sent in the request body.

    :raises TritonError: INVALID_ARG for a region the client truncated; INTERNAL
        when a CUDA copy fails.
    """
    ref = inp.shared_memory
    if ref is None:
        return
    if isinstance(ref, CudaRef):
        buffer = bytearray(ref.byte_size)
        if ref.byte_size:
            ref.copy_to_host(inp.name, memoryview(buffer))
        data: bytes = bytes(buffer)
    else:
        data = ref.region.read(ref.offset, ref.byte_size)
    inp.data = data
    inp.shared_memory = None


def deliver_output(ref: ShmRef | CudaRef, tensor: OutputTensor) -> OutputTensor:
    """Write ``tensor``'s bytes at the start of the window ``ref`` and return it without data.

    The returned tensor names the region (frontends then send no bytes for it,
    as Triton does).

    :raises TritonError: INTERNAL (Triton's message) when the window is smaller
        than the tensor; INVALID_ARG for a truncated system region; INTERNAL when
        a copy fails.
    """
    data = memoryview(tensor.data).cast("B")
    if len(data) > ref.byte_size:
        raise output_region_too_small(tensor.name, ref.byte_size, len(data))
    if isinstance(ref, CudaRef):
        ref.copy_from_host(tensor.name, data)
    else:
        ref.region.check_size()
        try:
            written = os.pwrite(ref.region.fd, data, ref.offset) if len(data) else 0
        except OSError as exc:
            raise TritonError(
                Code.INTERNAL,
                f"failed to write output '{tensor.name}' to shared memory region '{ref.region.name}': {exc}",
            ) from None
        if written != len(data):
            raise TritonError(
                Code.INTERNAL, f"failed to write output '{tensor.name}' to shared memory region '{ref.region.name}'"
            )
    out = OutputTensor(tensor.name, tensor.datatype, list(tensor.shape), b"", dict(tensor.parameters))
    out.shared_memory_region = ref.region.name
    return out
