"""A request's inputs staged for its worker: validated, in the core's arena, described in the EXECUTE frame.

:meth:`InputStaging.stage` is step 1-2 of a model's request path (see
:mod:`.model`): it checks the request against the config, writes each
input's bytes once into the arena (an input already received into the arena
is referenced, not copied; one in a client's system shared-memory region is
passed as its descriptor, read in place by the worker; one in a CUDA region
is copied device→host once), applies the config's input ``reshape`` and
builds the request's wire form and its :class:`PendingRequest`, the state the
model keeps until the request's last response is released. Runs on the
core's event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import Code, TritonError
from ..inference.request import InferenceRequest, InferInput
from ..inference.types import element_count
from ..memory.arena import EMPTY_SEGMENT, Block
from ..memory.cuda import CudaRef
from ..memory.pool import SharedBlock, TensorPool
from ..memory.shm_region import RegisteredRegion, ShmRef
from ..scheduler.base import Payload, ResponseHandler
from .validation import ModelSignature, check_bytes_elements, check_input_bytes, validate_request

if TYPE_CHECKING:  # pragma: no cover
    from ..inference.response import InferenceResponse
    from .reshape import Reshape
    from .servable import Done

__all__ = ["InputStaging", "PendingRequest", "RESERVED_PARAMETERS", "free_blocks"]

_SEQUENCE_START, _SEQUENCE_END = 1, 2  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_START / _END
#: request parameters the server itself consumes (Triton keeps them from backends too)
RESERVED_PARAMETERS = frozenset(
    {"sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "binary_data_output", "headers"}
)


@dataclass(slots=True)
class PendingRequest:
    """Per-request state of a payload (what :attr:`Payload.context` holds for a model)."""

    request: InferenceRequest
    blocks: list[Block | SharedBlock]
    #: gets the final response (or the error) of a request that is not streamed, once
    done: Done | None
    queue: asyncio.Queue[InferenceResponse] | None
    classification: dict[str, int] = field(default_factory=dict)
    open_responses: int = 0
    done_ns: int = 0
    error: TritonError | None = None
    recorded: bool = False
    regions: list[RegisteredRegion] = field(default_factory=list)  # registered regions in use
    #: called with each implicit-state output ``(name, datatype, shape, bytes)`` (sequence batcher)
    on_state: Any = None
    #: a null request of the sequence batcher (fills an idle slot; its response is dropped, not counted)
    null: bool = False
    #: the request stops counting as active (``Model.drain``) when its response is released
    leave_on_release: bool = False


def free_blocks(pool: TensorPool, blocks: list[Any]) -> None:
    """Give a request's input blocks back: shared ones lose a reference, its own go back to ``pool``."""
    for block in blocks:
        if isinstance(block, SharedBlock):
            block.release()
        else:
            pool.free(block)


class InputStaging:
    """Stages the requests of one model version (built once per version).

    :param signature: the version's inputs and outputs (request checks).
    :param pool: the core's tensor pool (the arena the inputs go into).
    :param input_reshape: the config's input ``reshape`` by input name (None: no input has one).
    :param handler: where the payloads' responses go (the model).
    """

    __slots__ = ("signature", "pool", "input_reshape", "handler")

    def __init__(
        self,
        signature: ModelSignature,
        pool: TensorPool,
        input_reshape: dict[str, Reshape] | None,
        handler: ResponseHandler,
    ) -> None:
        self.signature = signature
        self.pool = pool
        self.input_reshape = input_reshape
        self.handler = handler

    def stage(self, request: InferenceRequest, stream: bool, done: Done | None = None) -> Payload:
        """The payload of ``request``: its inputs in the arena, its wire form, its :class:`PendingRequest`.

        :param stream: its responses go to a queue (``infer_stream``) instead of ``done``.
        :param done: gets the final response of a request that is not streamed.
        :raises TritonError: INVALID_ARG (Triton's messages) for a request that
            does not fit the config; UNAVAILABLE when the arena cannot grow.
            Nothing stays allocated or acquired when it raises.
        """
        sig = self.signature
        batch_size = validate_request(sig, request)
        blocks: list[Block | SharedBlock] = []
        regions: list[RegisteredRegion] = []
        wire_inputs = []
        shm_outputs: dict[str, list[int]] = {}
        itemsizes = sig.itemsizes
        shared = request.buffer
        try:
            for inp in request.inputs:
                if inp.shared_memory is not None:
                    wire_inputs.append(self._region_input(request, inp, blocks, regions))
                    continue
                data = inp.data
                if data is None:
                    raise TritonError(Code.INVALID_ARG, f"input '{inp.name}' has no data")
                view = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
                nbytes = len(view)
                itemsize = itemsizes[inp.name]
                if not itemsize:
                    check_bytes_elements(sig, request, inp, view)
                elif nbytes != element_count(inp.shape) * itemsize:
                    check_input_bytes(sig, request, inp, nbytes)  # raises Triton's message
                if shared is not None and inp.buffer_offset >= 0:  # already in the arena: no copy
                    shared.acquire()
                    blocks.append(shared)
                    block = shared.block
                    offset = block.offset + inp.buffer_offset
                else:
                    block = self.pool.allocate(nbytes)
                    blocks.append(block)
                    if nbytes:
                        block.view[:] = view
                    offset = block.offset
                seg_id = block.segment.id if block.segment is not None else EMPTY_SEGMENT
                wire_inputs.append([inp.name, inp.datatype, list(inp.shape), seg_id, offset, nbytes])
            outputs = request.outputs
            classification: dict[str, int] = {}
            for out in outputs:
                ref = out.shared_memory
                if ref is not None:  # a CUDA region's output comes through the arena (copied in on_response)
                    ref.region.acquire()
                    regions.append(ref.region)
                    if isinstance(ref, ShmRef):
                        shm_outputs[out.name] = list(ref.descriptor)
                if out.parameters and out.classification > 0:
                    classification[out.name] = out.classification
        except BaseException:
            free_blocks(self.pool, blocks)
            for region in regions:
                region.release()
            raise
        if self.input_reshape is not None:  # the model sees the reshaped shapes
            for wire_input in wire_inputs:
                reshape = self.input_reshape.get(wire_input[0])
                if reshape is not None:
                    wire_input[2] = reshape.apply(wire_input[2])
        params = request.parameters
        if params:
            flags = (_SEQUENCE_START if params.get("sequence_start") else 0) | (
                _SEQUENCE_END if params.get("sequence_end") else 0
            )
            timeout, priority = params.get("timeout", 0), params.get("priority", 0)
            wire = {
                "id": request.id,
                "corr": params.get("sequence_id", 0),
                "flags": flags,
                "timeout": timeout if type(timeout) is int else 0,
                "priority": priority if type(priority) is int else 0,
                "inputs": wire_inputs,
                "outputs": [o.name for o in outputs],
                "params": _backend_parameters(params),
            }
        else:
            wire = {
                "id": request.id,
                "corr": 0,
                "flags": 0,
                "timeout": 0,
                "priority": 0,
                "inputs": wire_inputs,
                "outputs": [o.name for o in outputs],
                "params": {},
            }
        if shm_outputs:
            wire["shm_outputs"] = shm_outputs
        pending = PendingRequest(
            request, blocks, done, asyncio.Queue() if stream else None, classification, regions=regions
        )
        return Payload(wire, batch_size, self.handler, pending)

    def _region_input(
        self,
        request: InferenceRequest,
        inp: InferInput,
        blocks: list[Block | SharedBlock],
        regions: list[RegisteredRegion],
    ) -> list[Any]:
        """The wire descriptor of an input in a registered region (system: read in place by the
        worker; CUDA: copied device→host once, into the arena)."""
        sig = self.signature
        ref = inp.shared_memory
        is_bytes = not sig.itemsizes[inp.name]
        if isinstance(ref, CudaRef):
            if not is_bytes:
                check_input_bytes(sig, request, inp, ref.byte_size)
            block = self.pool.allocate(ref.byte_size)
            blocks.append(block)
            ref.copy_to_host(inp.name, block.view)
            if is_bytes:
                check_bytes_elements(sig, request, inp, block.view)
            return [inp.name, inp.datatype, list(inp.shape), *block.descriptor]
        assert ref is not None
        if is_bytes:
            check_bytes_elements(sig, request, inp, ref.region.read(ref.offset, ref.byte_size))
        else:
            check_input_bytes(sig, request, inp, ref.byte_size)
        ref.region.acquire()
        regions.append(ref.region)
        return [inp.name, inp.datatype, list(inp.shape), *ref.descriptor]


def _backend_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """The request parameters a backend sees: scalars, without the ones the server consumes."""
    return {
        k: v
        for k, v in parameters.items()
        if k not in RESERVED_PARAMETERS and not k.startswith("triton_") and isinstance(v, (bool, int, float, str))
    }
