"""Worker side of the data path: input views and output placement.

Inputs: each descriptor in an EXECUTE frame is resolved (bounds-checked)
against the mapped segments and viewed as a read-only numpy array: no copy.

Inputs and outputs in a client's registered shared-memory region: inputs are
views of the worker's own mapping of the region (no copy); outputs asked into
a region are written there (one copy, ``pwrite``) and only their descriptor
goes back (see :mod:`tritium.core.memory.region_map`).

Outputs: an array that already lies in shared memory this request may hand
back (one of its own input blocks, e.g. an identity model, or a block from
:meth:`Request.output_buffer`) is sent by descriptor, with no copy. Any other
array is copied once into the worker's output arena. BYTES outputs are
serialized into the arena. The core frees output blocks with RELEASE frames.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backend.api import Request
from ..errors import Code, TritonError
from ..inference.tensor import serialize_bytes, serialized_bytes_size, tensor_from_buffer
from ..inference.types import DataType, by_config_name, by_name, element_count, from_numpy
from ..memory.arena import EMPTY_SEGMENT, Block
from ..memory.shm_region import is_region_id, output_region_too_small
from .protocol import ExecuteRequest, Kind, ResponseFlag

if TYPE_CHECKING:  # pragma: no cover
    from .host import WorkerHost

__all__ = ["OutputWriter"]

NO_RELEASE = -1
_FINAL, _NOT_FINAL, _RESCHEDULE = int(ResponseFlag.FINAL), int(ResponseFlag.NONE), int(ResponseFlag.RESCHEDULE)


class _Token:
    """Where a request's responses go, and the shared memory it may reference."""

    __slots__ = ("batch_id", "index", "inputs", "allocations", "sent", "shm_outputs")

    def __init__(
        self,
        batch_id: int,
        index: int,
        inputs: list[tuple[int, int, int, int]],
        shm_outputs: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        self.batch_id = batch_id
        self.index = index
        #: (segment id, address, offset, nbytes) of each input in an arena segment
        self.inputs = inputs
        #: blocks from :meth:`Request.output_buffer` (created on first use)
        self.allocations: list[Block] = []
        self.sent: set[int] = set()  # ids of allocations handed to the core
        #: outputs asked into a registered region: name -> (region id, offset, byte size)
        self.shm_outputs: Mapping[str, Sequence[int]] = shm_outputs or _NO_REGIONS


_NO_REGIONS: Mapping[str, Sequence[int]] = {}


class OutputWriter:
    """Builds the :class:`Request` objects of a batch and sends their responses.

    Runs on the worker's main thread; :meth:`send_response` may also run on a
    backend's own thread (decoupled models) and only touches the arena under
    the worker's arena lock.
    """

    def __init__(self, worker: WorkerHost, config: Mapping[str, Any]) -> None:
        self.worker = worker
        self.model_name = str(config.get("name", ""))
        self.output_types: dict[str, DataType] = {}
        for output in config.get("output", []):
            dt = by_config_name(str(output.get("data_type", "")))
            if dt is not None:
                self.output_types[str(output["name"])] = dt
        self.output_ns = 0
        #: while set, responses (``[index, flags, outputs, error, parameters]``) are collected
        #: here and sent inside the batch's EXECUTE_DONE frame (one frame per batch); only on
        #: the executing thread of a non-decoupled model
        self.held: list[list[Any]] | None = None
        self._holder = 0

    def hold(self) -> None:
        """Start collecting the responses sent from this thread (see :attr:`held`)."""
        self.held = []
        self._holder = threading.get_ident()

    def release_held(self) -> list[list[Any]]:
        """Stop collecting; return the responses collected."""
        held, self.held = self.held or [], None
        return held

    # -- inputs -----------------------------------------------------------
    def build_requests(self, batch_id: int, wire_requests: Sequence[ExecuteRequest]) -> list[Request]:
        """Turn the request dicts of an EXECUTE frame (:class:`~.protocol.ExecuteRequest`) into
        :class:`Request` objects.

        :raises TritonError: for a descriptor outside its segment or a BYTES
            tensor whose length prefixes do not fit (INTERNAL/INVALID_ARG).
        """
        segments = self.worker.segments
        requests = []
        for index, wire in enumerate(wire_requests):
            inputs: dict[str, np.ndarray] = {}
            ranges = []
            for name, datatype, shape, seg_id, offset, nbytes in wire["inputs"]:
                dt = by_name(datatype)
                if dt is None:
                    raise TritonError(Code.INTERNAL, f"unknown datatype '{datatype}' in EXECUTE frame")
                if is_region_id(seg_id):  # the client's region, mapped here: read in place
                    view = self.worker.regions.view(seg_id, offset, nbytes)
                else:
                    view = segments.resolve(seg_id, offset, nbytes)
                    segment = segments.get(seg_id)
                    if segment is not None:
                        ranges.append((seg_id, segment.address + offset, offset, nbytes))
                if dt.is_bytes:
                    array = tensor_from_buffer(dt, shape, view)
                else:
                    array = np.frombuffer(view, dt.numpy)
                    if array.size != element_count(shape):
                        tensor_from_buffer(dt, shape, view)  # raises the size error
                    array = array.reshape(shape)
                array.flags.writeable = False
                inputs[name] = array
            requests.append(
                Request(
                    wire.get("id", ""),
                    wire.get("corr", 0),
                    wire.get("flags", 0),
                    wire.get("params") or {},
                    inputs,
                    wire.get("outputs") or [],
                    self,
                    _Token(batch_id, index, ranges, wire.get("shm_outputs")),
                    int(wire.get("timeout") or 0),
                )
            )
        return requests

    def is_cancelled(self, request: Request) -> bool:
        """See :meth:`Request.is_cancelled` (any thread)."""
        board = self.worker.cancels
        token: _Token = request._token
        return board is not None and board.is_set(token.batch_id, token.index)

    # -- outputs ----------------------------------------------------------
    def output_buffer(self, request: Request, datatype: str, shape: Sequence[int]) -> np.ndarray:
        """See :meth:`Request.output_buffer`."""
        dt = by_name(datatype)
        if dt is None or dt.is_bytes:
            raise TritonError(Code.INVALID_ARG, f"output_buffer: unsupported datatype '{datatype}'")
        count = element_count(shape)
        block = self._allocate(count * dt.itemsize)
        request._token.allocations.append(block)
        return np.frombuffer(block.view, dtype=dt.numpy, count=count).reshape(shape)

    def send_response(
        self,
        request: Request,
        outputs: Mapping[str, np.ndarray] | None,
        error: TritonError | None,
        parameters: Mapping[str, Any] | None,
        final: bool,
    ) -> None:
        """Place the outputs in shared memory and send a RESPONSE frame (see :meth:`Request.respond`)."""
        start = time.perf_counter_ns()
        token: _Token = request._token
        wire_outputs: list[list[Any]] = []
        placed: list[Block] = []
        if error is None and outputs:
            wanted = request.requested_output_names
            try:
                for name, array in outputs.items():
                    if not wanted or name in wanted:
                        wire_outputs.append(self._place(token, name, array, placed))
            except Exception as exc:
                error = (
                    exc
                    if isinstance(exc, TritonError)
                    else TritonError(
                        Code.INTERNAL,
                        f"failed to send output of model '{self.model_name}': {type(exc).__name__}: {exc}",
                    )
                )
                wire_outputs = []
                self._free(placed)
                token.sent.clear()
        self._emit(
            token,
            [
                token.index,
                _FINAL if final else _NOT_FINAL,
                wire_outputs,
                error.to_wire() if error is not None else None,
                dict(parameters) if parameters else None,
            ],
            final,
        )
        self.output_ns += time.perf_counter_ns() - start

    def reschedule(self, request: Request) -> None:
        """Send the RESCHEDULE flag for ``request`` (see :meth:`Request.reschedule`): no outputs."""
        token: _Token = request._token
        self._emit(token, [token.index, _RESCHEDULE, [], None, None], True)

    def _emit(self, token: _Token, response: list[Any], last: bool) -> None:
        """Send one ``[index, flags, outputs, error, parameters]`` (held for EXECUTE_DONE when
        collecting); ``last``: the request's last one in this execution, its unsent output blocks go back."""
        if last and token.allocations:
            self._free([b for b in token.allocations if id(b) not in token.sent])
            token.allocations.clear()
        if self.held is not None and threading.get_ident() == self._holder:
            self.held.append(response)
        else:
            self.worker.channel.send([Kind.RESPONSE, token.batch_id, *response])

    def send_error(self, batch_id: int, index: int, error: TritonError) -> None:
        """Send a final error response for a request that never became a :class:`Request`."""
        self.worker.channel.send([Kind.RESPONSE, batch_id, index, int(ResponseFlag.FINAL), [], error.to_wire(), None])

    def finish_batch(self, requests: Sequence[Request]) -> None:
        """Called when execute returned; nothing to do for requests still open (decoupled)."""
        del requests

    # -- internals ----------------------------------------------------------
    def _datatype(self, name: str, array: np.ndarray) -> DataType:
        declared = self.output_types.get(name)
        actual = from_numpy(array.dtype)
        if declared is None:
            if actual is None:
                raise TritonError(
                    Code.INTERNAL, f"output '{name}' of model '{self.model_name}' has unsupported dtype {array.dtype}"
                )
            return actual
        if declared.is_bytes:
            ok = array.dtype.kind in ("O", "S", "U")
        else:
            ok = array.dtype == declared.numpy
        if not ok:
            raise TritonError(
                Code.INTERNAL,
                f"output '{name}' of model '{self.model_name}' has dtype {array.dtype}, "
                f"but the model config declares {declared.config_name}",
            )
        return declared

    def _place(self, token: _Token, name: str, array: Any, placed: list[Block]) -> list[Any]:
        if type(array) is not np.ndarray:
            array = np.asarray(array)
        dt = self.output_types.get(name)
        if dt is None or dt.is_bytes or array.dtype != dt.numpy:
            dt = self._datatype(name, array)  # checks (and words the error)
        shape = list(array.shape)
        if token.shm_outputs:
            target = token.shm_outputs.get(name)
            if target is not None:
                return self._place_in_region(name, dt, shape, array, target)
        if dt.is_bytes:
            size = serialized_bytes_size(array)
            block = self._allocate(size)
            placed.append(block)
            serialize_bytes(array, out=block.view)
            seg_id, offset, nbytes = block.descriptor
            return [name, dt.name, shape, seg_id, offset, nbytes, offset if block.segment else NO_RELEASE]
        array = np.ascontiguousarray(array)
        nbytes = array.nbytes
        if nbytes == 0:
            return [name, dt.name, shape, EMPTY_SEGMENT, 0, 0, NO_RELEASE]
        if array.base is not None:  # a view: of an input, or of an output buffer? then no copy
            address = array.__array_interface__["data"][0]
            for seg_id, base, offset, size in token.inputs:
                delta = address - base
                if 0 <= delta and delta + nbytes <= size:
                    return [name, dt.name, shape, seg_id, offset + delta, nbytes, NO_RELEASE]
            for block in token.allocations:
                assert block.segment is not None
                delta = address - (block.segment.address + block.offset)
                if 0 <= delta and delta + nbytes <= block.nbytes:
                    release = NO_RELEASE if id(block) in token.sent else block.offset
                    token.sent.add(id(block))
                    return [name, dt.name, shape, block.segment.id, block.offset + delta, nbytes, release]
        block = self._allocate(nbytes)
        placed.append(block)
        segment = block.segment
        assert segment is not None
        offset = block.offset
        segment.view[offset : offset + nbytes] = memoryview(array).cast("B")
        return [name, dt.name, shape, segment.id, offset, nbytes, offset]

    def _place_in_region(
        self, name: str, dt: DataType, shape: list[int], array: np.ndarray, target: Sequence[int]
    ) -> list[Any]:
        """Write an output into the client's region it was asked into; return its descriptor."""
        region_id, offset, byte_size = (int(v) for v in target)
        if dt.is_bytes:
            data: bytes | memoryview = serialize_bytes(array)
        else:
            data = memoryview(np.ascontiguousarray(array)).cast("B")  # type: ignore[arg-type]  # numpy 1.26 stubs: ndarray lacks __buffer__
        nbytes = memoryview(data).nbytes
        if nbytes > byte_size:
            raise output_region_too_small(name, byte_size, nbytes)
        self.worker.regions.write(region_id, offset, data)
        return [name, dt.name, shape, region_id, offset, nbytes, NO_RELEASE]

    def _allocate(self, nbytes: int) -> Block:
        return self.worker.allocate(nbytes)

    def _free(self, blocks: Sequence[Block]) -> None:
        self.worker.free_blocks(blocks)
