"""BLS on the core side: running the requests model code sends from inside a worker.

A worker sends an INFER frame (see :mod:`tritium.core.worker.bls`); the
router turns it into an :class:`InferenceRequest` whose input bytes are read
straight from the calling worker's shared memory, runs it through
:meth:`InferenceServer.infer_stream` like any client request (any model, any
backend, decoupled included), and returns each response as an INFER_RESPONSE
frame of descriptors: outputs that lie in shared memory are sent by
reference (the segment's fd is forwarded to the caller once), others are
placed in the core's arena. The response is released when the caller says it
has copied the outputs (INFER_RELEASE), or when the caller exits. An INFER
frame with a ``control`` key is a model-control request instead (load, unload,
readiness: :meth:`BlsRouter._control`).

Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import Code, TritonError
from ..inference.request import InferenceRequest, InferInput, RequestedOutput
from ..inference.response import InferenceResponse
from ..memory.arena import Block
from ..worker.protocol import Kind

if TYPE_CHECKING:  # pragma: no cover
    from ..memory.pool import TensorPool
    from ..worker.process import WorkerProcess
    from .servable import Servable


class BlsServer(Protocol):
    """The calls a :class:`BlsRouter` makes on its :class:`~tritium.core.server.InferenceServer`.

    Declared here, below the server, so that this module does not import the
    server (which creates the router).
    """

    pool: TensorPool

    def model(self, name: str, version: str = "") -> Servable: ...

    def model_ready(self, name: str, version: str = "") -> bool: ...

    def infer_stream(self, request: InferenceRequest) -> AsyncGenerator[InferenceResponse, None]: ...

    async def load_model(self, name: str, config: str | None = None, files: dict[str, bytes] | None = None) -> None: ...

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None: ...


log = logging.getLogger("tritium.bls")

__all__ = ["BlsRouter"]

_START, _END = 1, 2  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_START / _END


def _files(value: Any) -> dict[str, bytes] | None:
    """The ``files`` of a load from model code: ``{"file:<path>": bytes}`` -> ``{path: bytes}``.

    :raises TritonError: INVALID_ARG for a key without ``file:`` or contents that are not bytes.
    """
    if not value:
        return None
    if not isinstance(value, dict):
        raise TritonError(Code.INVALID_ARG, "load_model(): 'files' must be a dict of 'file:<path>' -> bytes")
    files: dict[str, bytes] = {}
    for key, content in value.items():
        if not isinstance(key, str) or not key.startswith("file:"):
            raise TritonError(Code.INVALID_ARG, f"load_model(): files key {key!r} must be 'file:<path>'")
        if not isinstance(content, (bytes, bytearray)):
            raise TritonError(Code.INVALID_ARG, f"load_model(): the contents of '{key}' must be bytes")
        files[key[len("file:") :]] = bytes(content)
    return files


class BlsRouter:
    """Runs BLS requests for every worker of a server (implements :class:`~.worker.process.BlsHandler`)."""

    def __init__(self, server: BlsServer) -> None:
        self.server = server
        self._tasks: dict[tuple[int, int], asyncio.Task[None]] = {}
        self._held: dict[tuple[int, int, int], tuple[InferenceResponse, list[Block]]] = {}

    def start(self, worker: WorkerProcess, call_id: int, request: dict[str, Any]) -> None:
        """An INFER frame arrived from ``worker`` (an inference, or a model-control request)."""
        key = (worker.id, call_id)
        if "control" in request:
            task = asyncio.ensure_future(self._control(worker, call_id, request))
        else:
            task = asyncio.ensure_future(self._run(worker, call_id, request))
        self._tasks[key] = task
        task.add_done_callback(lambda _t: self._tasks.pop(key, None))

    def release(self, worker: WorkerProcess, call_id: int, index: int) -> None:
        """The caller has copied the outputs of response ``index``: free them."""
        held = self._held.pop((worker.id, call_id, index), None)
        if held is not None:
            self._free(held)

    def forget(self, worker: WorkerProcess) -> None:
        """``worker`` exited: cancel its requests and free what its responses held."""
        for (wid, _call_id), task in list(self._tasks.items()):
            if wid == worker.id:
                task.cancel()
        for key in [k for k in self._held if k[0] == worker.id]:
            self._free(self._held.pop(key))

    def _free(self, held: tuple[InferenceResponse, list[Block]]) -> None:
        response, blocks = held
        response.release()
        for block in blocks:
            self.server.pool.free(block)

    def _request(self, worker: WorkerProcess, wire: dict[str, Any]) -> InferenceRequest:
        segments = self.server.pool.segments
        inputs = []
        for name, datatype, shape, seg_id, offset, nbytes in wire["inputs"]:
            if seg_id >> 24 not in (0, worker.id):
                raise TritonError(Code.INVALID_ARG, f"BLS input '{name}' names shared memory of another process")
            inputs.append(InferInput(name, datatype, list(shape), segments.resolve(seg_id, offset, nbytes)))
        parameters = dict(wire.get("params") or {})
        corr, flags = wire.get("corr") or 0, int(wire.get("flags") or 0)
        if corr:
            parameters.setdefault("sequence_id", corr)
        if flags & _START:
            parameters.setdefault("sequence_start", True)
        if flags & _END:
            parameters.setdefault("sequence_end", True)
        return InferenceRequest(
            str(wire["model"]),
            str(wire.get("version") or ""),
            str(wire.get("id") or ""),
            inputs,
            [RequestedOutput(str(n)) for n in wire.get("outputs") or []],
            parameters,
        )

    async def _run(self, worker: WorkerProcess, call_id: int, wire: dict[str, Any]) -> None:
        index = 0
        try:
            request = self._request(worker, wire)
            if wire.get("decoupled") is False:  # the caller takes one response (pb_utils exec())
                target = self.server.model(request.model_name, request.model_version)
                if target.decoupled:  # refused before validation, as Triton's python backend does
                    raise TritonError(
                        Code.INTERNAL,
                        f"Model {request.model_name} is using the decoupled. The current BLS request call doesn't "
                        "support models using the decoupled transaction policy. Please use 'decoupled=True' "
                        "argument to the 'exec' or 'async_exec' calls for decoupled models.'",
                    )
            timeout_s = int(wire.get("timeout_us") or 0) / 1e6 or None
            async with asyncio.timeout(timeout_s):
                async for response in self.server.infer_stream(request):
                    self._send(worker, call_id, index, response)
                    index += 1
                    if response.final:
                        return
            raise TritonError(Code.INTERNAL, f"BLS request to '{request.model_name}' ended without a final response")
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            error = TritonError(Code.UNAVAILABLE, "BLS request timed out")  # Triton words it the same way
        except TritonError as exc:
            error = exc
        except Exception as exc:  # a core bug must not leave the caller waiting
            log.exception("BLS request failed")
            error = TritonError(Code.INTERNAL, f"BLS request failed: {type(exc).__name__}: {exc}")
        worker.send_infer_response([Kind.INFER_RESPONSE, call_id, index, True, [], error.to_wire(), None])

    async def _control(self, worker: WorkerProcess, call_id: int, wire: dict[str, Any]) -> None:
        """Load, unload or ask readiness for model code (Triton's ``pb_utils.load_model``,
        ``unload_model``, ``is_model_ready``), with the model repository extension's rules:
        explicit model control mode only, files only with ``--model-load-allow-file-override``.
        One final INFER_RESPONSE answers: the error, or ``{"ready": bool}`` as parameters."""
        result: dict[str, Any] | None = None
        error: TritonError | None = None
        try:
            action, name = wire.get("control"), str(wire.get("model") or "")
            if action == "ready":
                result = {"ready": self.server.model_ready(name, str(wire.get("version") or ""))}
            elif action == "load":
                files = _files(wire.get("files"))
                config = wire.get("config")
                await self.server.load_model(name, str(config) if config else None, files)
            elif action == "unload":
                await self.server.unload_model(name, bool(wire.get("unload_dependents")))
            else:
                raise TritonError(Code.INVALID_ARG, f"unknown model control request '{action}'")
        except asyncio.CancelledError:
            raise
        except TritonError as exc:
            error = exc
        except Exception as exc:  # a core bug must not leave the caller waiting
            log.exception("model control request from a model failed")
            error = TritonError(Code.INTERNAL, f"model control request failed: {type(exc).__name__}: {exc}")
        wire_error = error.to_wire() if error is not None else None
        worker.send_infer_response([Kind.INFER_RESPONSE, call_id, 0, True, [], wire_error, result])

    def _send(self, worker: WorkerProcess, call_id: int, index: int, response: InferenceResponse) -> None:
        pool = self.server.pool
        outputs: list[list[Any]] = []
        blocks: list[Block] = []
        for tensor in response.outputs:
            if tensor.location is not None:
                seg_id, offset, nbytes = tensor.location
            else:  # built in the core (e.g. classification): place it in the core's arena
                block = pool.allocate(len(tensor.data))
                blocks.append(block)
                if len(tensor.data):
                    block.view[:] = tensor.data
                seg_id, offset, nbytes = block.descriptor
            if nbytes and seg_id >> 24 != worker.id:  # the caller has its own segments already
                pool.ensure_sent(seg_id, worker)
            outputs.append([tensor.name, tensor.datatype, list(tensor.shape), seg_id, offset, nbytes])
        error = response.error.to_wire() if response.error is not None else None
        self._held[(worker.id, call_id, index)] = (response, blocks)
        worker.send_infer_response(
            [Kind.INFER_RESPONSE, call_id, index, bool(response.final), outputs, error, response.parameters or None]
        )
