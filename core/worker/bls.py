"""Model code calling other models from inside a worker (Triton's BLS: business logic scripting).

Worker side. A backend (the python backend's ``pb_utils.InferenceRequest.exec``)
calls :func:`client` and :meth:`BlsClient.infer`; the request goes to the core
as an INFER frame whose inputs are descriptors into this worker's arena (an
input that already lies in shared memory — e.g. one of the calling request's
own inputs — is sent by reference). The core runs it like any request, on any
model it hosts, and returns each response as an INFER_RESPONSE frame whose
outputs are descriptors into the callee's shared memory; this side copies
them into private numpy arrays at once and tells the core (INFER_RELEASE), so
nothing the caller keeps can point at memory that is reused later.

Model code can also load and unload models and ask whether one is ready
(:meth:`BlsClient.control`): an INFER frame with a ``control`` key, run by the
core as the model repository extension runs its requests (same rules: explicit
mode, uploads only with ``--model-load-allow-file-override``).

Using BLS switches the worker to threaded receiving (a reader thread), so
responses arrive while the executing thread waits. Thread-safe.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import Code, TritonError
from ..inference.tensor import serialize_bytes, serialized_bytes_size, tensor_from_buffer
from ..inference.types import by_name, from_numpy
from .protocol import Kind

if TYPE_CHECKING:  # pragma: no cover
    from .host import WorkerHost

__all__ = ["BlsClient", "BlsCall", "BlsResponse", "client"]

_client: BlsClient | None = None


def client() -> BlsClient:
    """The BLS client of this worker process.

    :raises TritonError: UNAVAILABLE outside a worker process.
    """
    if _client is None:
        raise TritonError(Code.UNAVAILABLE, "BLS requests can only be made from model code running in tritium")
    return _client


@dataclass(slots=True)
class BlsResponse:
    """One response to a BLS request.

    :ivar outputs: output name -> (KServe datatype, numpy array owned by the caller).
    :ivar error: the callee's error, if the request failed.
    :ivar parameters: response parameters.
    :ivar final: True for the last response.
    """

    outputs: dict[str, tuple[str, np.ndarray]] = field(default_factory=dict)
    error: TritonError | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    final: bool = True


class BlsCall:
    """A BLS request in flight; its responses can be iterated or waited for."""

    def __init__(self, call_id: int) -> None:
        self.call_id = call_id
        self._queue: queue.SimpleQueue[BlsResponse] = queue.SimpleQueue()
        self._first: concurrent.futures.Future[BlsResponse] = concurrent.futures.Future()
        self._lock = threading.Lock()
        self.done = False

    def _deliver(self, response: BlsResponse) -> None:
        with self._lock:
            if not self._first.done():
                self._first.set_result(response)
            self._queue.put(response)
            if response.final:
                self.done = True

    def result(self, timeout: float | None = None) -> BlsResponse:
        """The (first) response, waiting for it (a model that is not decoupled sends exactly one)."""
        return self._first.result(timeout)

    def future(self) -> concurrent.futures.Future[BlsResponse]:
        """A future of the (first) response."""
        return self._first

    def responses(self, timeout: float | None = None) -> Iterator[BlsResponse]:
        """Every response in order, blocking between them; ends after the final one.

        A decoupled callee may end with a flags-only final response: it is not yielded
        when it carries no outputs and no error.
        """
        while True:
            response = self._queue.get(timeout=timeout)
            if not (response.final and not response.outputs and response.error is None):
                yield response
            if response.final:
                return


class BlsClient:
    """Sends BLS requests from this worker and routes their responses back."""

    def __init__(self, worker: WorkerHost) -> None:
        self._worker = worker
        self._ids = itertools.count(1)
        self._calls: dict[int, BlsCall] = {}
        self._held: dict[int, list[Any]] = {}  # call id -> blocks of its inputs
        self._lock = threading.Lock()

    def infer(
        self,
        model_name: str,
        inputs: Sequence[tuple[str, str, np.ndarray]],
        requested_outputs: Sequence[str] = (),
        *,
        model_version: str = "",
        request_id: str = "",
        correlation_id: int | str = 0,
        flags: int = 0,
        parameters: Mapping[str, Any] | None = None,
        timeout_us: int = 0,
        decoupled: bool | None = None,
    ) -> BlsCall:
        """Send one request to ``model_name`` (any model the server hosts).

        :param inputs: ``(name, KServe datatype, array)`` per input.
        :param timeout_us: fail the request when it has not finished by then (0: no limit).
        :param decoupled: False when the caller takes exactly one response (Triton's ``exec()``):
            a decoupled model is then refused up front, with Triton's message; None: no check.
        :raises TritonError: INVALID_ARG for an input whose array does not fit its datatype.
        """
        worker = self._worker
        worker.enable_threaded()
        call_id = next(self._ids)
        wire_inputs: list[Any] = []
        blocks: list[Any] = []
        try:
            for name, datatype, array in inputs:
                wire_inputs.append(
                    [name, datatype, [int(d) for d in array.shape], *self._place(datatype, array, blocks)]
                )
        except BaseException:
            worker.free_blocks(blocks)
            raise
        call = BlsCall(call_id)
        with self._lock:
            self._calls[call_id] = call
            self._held[call_id] = blocks
        request = {
            "model": model_name,
            "version": model_version,
            "id": request_id,
            "corr": correlation_id,
            "flags": flags,
            "params": dict(parameters or {}),
            "timeout_us": int(timeout_us),
            "inputs": wire_inputs,
            "outputs": list(requested_outputs),
        }
        if decoupled is not None:
            request["decoupled"] = bool(decoupled)
        worker.channel.send([Kind.INFER, call_id, request])
        return call

    def control(self, action: str, model_name: str, **arguments: Any) -> BlsCall:
        """Send a model-control request to the core: ``action`` is ``"load"``, ``"unload"``
        or ``"ready"`` (Triton's python backend ``load_model``, ``unload_model``,
        ``is_model_ready``); the core answers with one final response whose error is the
        load's or unload's, and whose parameters carry ``ready`` for ``"ready"``.

        :param arguments: ``version`` (ready), ``config`` and ``files`` (load: JSON config,
            ``{"file:<path>": bytes}``), ``unload_dependents`` (unload).
        """
        worker = self._worker
        worker.enable_threaded()
        call_id = next(self._ids)
        call = BlsCall(call_id)
        with self._lock:
            self._calls[call_id] = call
            self._held[call_id] = []
        worker.channel.send([Kind.INFER, call_id, {"control": action, "model": model_name, **arguments}])
        return call

    def _place(self, datatype: str, array: np.ndarray, blocks: list[Any]) -> tuple[int, int, int]:
        dt = by_name(datatype)
        if dt is None:
            raise TritonError(Code.INVALID_ARG, f"BLS input has unknown datatype '{datatype}'")
        if dt.is_bytes:
            block = self._worker.allocate(serialized_bytes_size(array))
            blocks.append(block)
            serialize_bytes(array, out=block.view)
            return block.descriptor
        array = np.ascontiguousarray(array)
        if from_numpy(array.dtype) is None or array.dtype.itemsize != dt.itemsize:
            raise TritonError(Code.INVALID_ARG, f"BLS input of dtype {array.dtype} does not match datatype {datatype}")
        located = self._worker.segments.locate(array.__array_interface__["data"][0], array.nbytes)
        if located is not None and array.nbytes:
            return (located[0], located[1], array.nbytes)
        block = self._worker.allocate(array.nbytes)
        blocks.append(block)
        if array.nbytes:
            block.view[:] = memoryview(array).cast("B")  # type: ignore[arg-type]  # numpy 1.26 stubs: ndarray lacks __buffer__
        return block.descriptor

    def on_response(self, message: list[Any]) -> None:
        """An INFER_RESPONSE frame (reader thread): copy the outputs out, release, deliver."""
        _, call_id, index, final, outputs, error, parameters = message
        with self._lock:
            call = self._calls.get(call_id)
        response = BlsResponse(
            error=TritonError.from_wire(error) if error is not None else None,
            parameters=dict(parameters or {}),
            final=bool(final),
        )
        try:
            for name, datatype, shape, seg_id, offset, nbytes in outputs:
                dt = by_name(datatype)
                if dt is None:
                    raise TritonError(Code.INTERNAL, f"BLS response output '{name}' has unknown datatype '{datatype}'")
                view = self._worker.segments.resolve(seg_id, offset, nbytes)
                array = tensor_from_buffer(dt, shape, view)
                response.outputs[name] = (datatype, array if dt.is_bytes else array.copy())
        except TritonError as exc:
            response.outputs.clear()
            response.error = exc
        self._worker.channel.send([Kind.INFER_RELEASE, call_id, index])
        if final:
            with self._lock:
                self._calls.pop(call_id, None)
                blocks = self._held.pop(call_id, [])
            self._worker.free_blocks(blocks)
        if call is not None:
            call._deliver(response)

    def fail_all(self, error: TritonError) -> None:
        """The core is gone: every call in flight ends with ``error``."""
        with self._lock:
            calls, self._calls = self._calls, {}
        for call in calls.values():
            call._deliver(BlsResponse(error=error, final=True))
