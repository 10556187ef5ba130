"""Requests of the ``pb_utils`` API (part of ``c_python_backend_utils``).

:class:`InferenceRequest`: the requests a model receives in ``execute`` (read
in place from the core's request, with their release flags) and the BLS
requests it builds and runs with ``exec``/``async_exec`` through the worker's
BLS client; :class:`PreferredMemory` and :class:`InferenceTrace`, accepted for
compatibility. Runs only inside a tritium worker hosting a ``python`` model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from python_backend_errors import TritonError, TritonModelException
from python_backend_responses import (
    InferenceResponse,
    InferenceResponseSender,
    ResponseIterator,
    _parameters_dict,
    _RequestState,
    _single_response,
)
from python_backend_tensors import Tensor, _datatype_of

if TYPE_CHECKING:  # pragma: no cover
    from python_backend_context import InstanceContext

TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
TRITONSERVER_MEMORY_GPU = 0
TRITONSERVER_MEMORY_CPU = 1


class InferenceTrace:
    """Accepted for compatibility; tritium does not trace BLS requests."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs


class PreferredMemory:
    """Accepted for compatibility: tritium returns BLS outputs in host memory."""

    def __init__(self, preferred_memory_type: int = TRITONSERVER_MEMORY_CPU, preferred_device_id: int = 0) -> None:
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


class InferenceRequest:
    """A request: one the model receives in ``execute``, or a BLS request it builds.

    BLS: ``InferenceRequest(model_name=..., inputs=[...], requested_output_names=[...],
    request_id="", correlation_id=0, model_version=-1, flags=0, timeout=0,
    parameters=None).exec()`` (or ``exec(decoupled=True)``, ``async_exec()``).
    """

    __slots__ = (
        "_correlation_id",
        "_flags",
        "_inputs",
        "_model_name",
        "_model_version",
        "_parameters",
        "_release_flags",
        "_request_id",
        "_requested",
        "_sender",
        "_state",
        "_timeout",
    )

    def __init__(
        self,
        request_id: str = "",
        correlation_id: int | str = 0,
        inputs: Sequence[Tensor] | None = None,
        requested_output_names: Sequence[str] | None = None,
        model_name: str | None = None,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: PreferredMemory | None = None,
        trace: InferenceTrace | None = None,
        parameters: dict[str, Any] | str | None = None,
    ) -> None:
        del preferred_memory, trace
        if not isinstance(model_name, str) or not model_name:
            raise TypeError("InferenceRequest(): model_name (the model to call) is required")
        tensors = list(inputs or [])
        for tensor in tensors:
            if not isinstance(tensor, Tensor):
                raise TypeError(
                    f"InferenceRequest(): inputs must be pb_utils.Tensor objects, found {type(tensor).__name__}"
                )
        names = (
            [requested_output_names] if isinstance(requested_output_names, str) else list(requested_output_names or [])
        )
        self._model_name = model_name
        self._model_version = int(model_version)
        self._request_id = str(request_id)
        self._correlation_id = correlation_id
        self._flags = int(flags)
        self._timeout = int(timeout)
        self._parameters = _parameters_dict(parameters, "InferenceRequest")
        self._inputs: list[Tensor] | None = tensors
        self._requested: list[str] = [str(n) for n in names]
        self._state: _RequestState | None = None
        self._sender: InferenceResponseSender | None = None
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL

    @classmethod
    def _incoming(cls, request: Any, context: InstanceContext) -> InferenceRequest:
        """Wrap a request the core gave the backend (``tritium.core.backend.api.Request``)."""
        self = cls.__new__(cls)
        params = request.parameters or {}  # the core keeps its own (sequence_id, timeout, ...) out
        flags = int(request.flags or 0)
        correlation = request.correlation_id or 0
        timeout = int(request.timeout_us or 0)
        self._model_name = context.model_name
        self._model_version = context.model_version
        self._request_id = request.id
        self._correlation_id = correlation
        self._flags = flags
        self._timeout = timeout
        self._parameters = params
        self._inputs = None
        self._requested = list(request.requested_output_names) or context.output_names
        self._state = _RequestState(request, context)
        self._sender = None
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        return self

    # -- what models read ------------------------------------------------------------------
    def request_id(self) -> str:
        """The request id ("" when none)."""
        return self._request_id

    def correlation_id(self) -> int | str:
        """The sequence correlation id (0 when none)."""
        return self._correlation_id

    def flags(self) -> int:
        """Sequence flags (``TRITONSERVER_REQUEST_FLAG_SEQUENCE_START`` = 1, ``..._END`` = 2)."""
        return self._flags

    def set_flags(self, flags: int) -> None:
        """Set the flags (for BLS requests)."""
        self._flags = int(flags)

    def timeout(self) -> int:
        """The request timeout in microseconds (0: none)."""
        return self._timeout

    def parameters(self) -> str:
        """The request parameters as a JSON string (``'{"key":"value"}'``), as in Triton."""
        return json.dumps(self._parameters, separators=(",", ":"))

    def inputs(self) -> list[Tensor]:
        """The input tensors, in the order the client sent them."""
        return list(self._tensors())

    def _tensors(self) -> list[Tensor]:
        """The input tensors (this request's own list: not to be changed), wrapped on first use."""
        if self._inputs is None:
            assert self._state is not None
            types = self._state.context.input_types
            self._inputs = [
                Tensor._wrap(name, array, types.get(name) or _datatype_of(array.dtype))
                for name, array in self._state.request.inputs.items()
            ]
        return self._inputs

    def requested_output_names(self) -> set[str]:
        """The outputs the client asked for (all outputs of the model when it named none), as a set."""
        return set(self._requested)

    def get_response_sender(self) -> InferenceResponseSender:
        """The response sender of this request (decoupled models; any thread)."""
        if self._state is None:
            raise TritonModelException("get_response_sender() is only available on requests given to execute()")
        if self._sender is None:
            self._sender = InferenceResponseSender(self._state)
        return self._sender

    def is_cancelled(self) -> bool:
        """True once the client cancelled this request (a gRPC call cancelled or past its deadline,
        a gRPC stream cancelled, an HTTP client gone): the model may stop and answer early.
        Reads shared memory, no call to the core: cheap to poll. False for a BLS request."""
        state = self._state
        return state is not None and state.request.is_cancelled()

    def set_release_flags(self, flags: int) -> None:
        """How the request is released when execute returns: ``TRITONSERVER_REQUEST_RELEASE_ALL``
        (the default) or ``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE``: run it again (a model with
        ``sequence_batching { iterative_sequence: true }``; any other model's request fails). A
        model that is not decoupled returns None for a request it reschedules; a decoupled one
        sends no final response in that run."""
        self._release_flags = int(flags)

    def _rescheduled(self) -> bool:
        return bool(self._release_flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)

    def trace(self) -> InferenceTrace:
        """A placeholder trace (tritium does not trace BLS requests)."""
        return InferenceTrace()

    # -- BLS ---------------------------------------------------------------------------------
    def exec(self, decoupled: bool = False) -> Any:
        """Run this request on ``model_name`` and wait: an :class:`InferenceResponse`, or with
        ``decoupled=True`` a :class:`ResponseIterator` over every response."""
        call, error = self._send(decoupled)
        if error is not None:
            return ResponseIterator(None, error) if decoupled else error
        if decoupled:
            return ResponseIterator(call, model_name=self._model_name)
        return _single_response(self._model_name, call.result())

    def async_exec(self, decoupled: bool = False) -> asyncio.Future[Any]:
        """:meth:`exec` for ``async def execute``: an awaitable of the response (or iterator)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise TritonModelException("async_exec() must be called from a coroutine (async def execute)") from None
        future: asyncio.Future[Any] = loop.create_future()
        call, error = self._send(decoupled)
        if error is not None:
            future.set_result(ResponseIterator(None, error) if decoupled else error)
            return future
        if decoupled:
            future.set_result(ResponseIterator(call, model_name=self._model_name))
            return future
        model_name = self._model_name

        def settle(result: Any) -> None:
            if not future.done():
                future.set_result(result)

        def done(cf: Any) -> None:
            try:
                result = _single_response(model_name, cf.result())
            except BaseException as exc:  # the BLS client failed: still answer the awaiting model
                result = InferenceResponse(error=TritonError(f"BLS request failed: {exc}"))
            loop.call_soon_threadsafe(settle, result)

        call.future().add_done_callback(done)
        return future

    def _send(self, decoupled: bool) -> tuple[Any, InferenceResponse | None]:
        from tritium.core.errors import TritonError as CoreError
        from tritium.core.worker import bls

        try:
            client = bls.client()
        except CoreError as exc:
            raise TritonModelException(str(exc)) from None
        inputs = self._inputs if self._inputs is not None else self.inputs()
        try:
            call = client.infer(
                self._model_name,
                [(t._name, t._datatype, t._array) for t in inputs],
                list(self._requested),
                model_version="" if self._model_version < 0 else str(self._model_version),
                request_id=self._request_id,
                correlation_id=self._correlation_id,
                flags=self._flags,
                parameters=self._parameters,
                timeout_us=max(0, self._timeout),
                decoupled=decoupled,
            )
        except CoreError as exc:
            return None, InferenceResponse(
                error=TritonError(f"Model {self._model_name} - Error when running inference: {exc}")
            )
        return call, None

    def __repr__(self) -> str:
        return f"InferenceRequest(model_name={self._model_name!r}, request_id={self._request_id!r})"
