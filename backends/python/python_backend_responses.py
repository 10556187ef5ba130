"""Responses of the ``pb_utils`` API (part of ``c_python_backend_utils``).

What a model sends: :class:`InferenceResponse` and the
:class:`InferenceResponseSender` of an incoming request (with the state it
shares with that request); and what a BLS call receives: the core's BLS
responses as ``InferenceResponse`` objects, Triton's error wording, and the
:class:`ResponseIterator` of a decoupled BLS call. Runs only inside a tritium
worker hosting a ``python`` model.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from python_backend_errors import TritonError, TritonModelException
from python_backend_tensors import Tensor

if TYPE_CHECKING:  # pragma: no cover
    from python_backend_context import InstanceContext

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1


class InferenceResponse:
    """``InferenceResponse(output_tensors=[...], error=None)``: the response to one request."""

    __slots__ = ("_error", "_outputs", "_parameters")

    def __init__(
        self,
        output_tensors: Sequence[Tensor] | None = None,
        error: TritonError | None = None,
        parameters: dict[str, Any] | str | None = None,
    ) -> None:
        outputs = list(output_tensors) if output_tensors is not None else []
        for tensor in outputs:
            if not isinstance(tensor, Tensor):
                raise TypeError(
                    "InferenceResponse(output_tensors, error): output_tensors must be a list of "
                    f"pb_utils.Tensor, found {type(tensor).__name__}"
                )
        if error is not None and not isinstance(error, TritonError):
            raise TypeError(
                f"InferenceResponse(output_tensors, error): error must be a pb_utils.TritonError, "
                f"found {type(error).__name__}"
            )
        self._outputs = outputs
        self._error = error
        self._parameters = _parameters_dict(parameters, "InferenceResponse")

    def output_tensors(self) -> list[Tensor]:
        """The output tensors."""
        return list(self._outputs)

    def has_error(self) -> bool:
        """True when the response carries an error."""
        return self._error is not None

    def error(self) -> TritonError | None:
        """The error, or None."""
        return self._error

    def parameters(self) -> str:
        """The response parameters, as a JSON string."""
        return json.dumps(self._parameters, separators=(",", ":"))

    def __repr__(self) -> str:
        return f"InferenceResponse(outputs={[t.name() for t in self._outputs]}, error={self._error!r})"


def _parameters_dict(parameters: Any, what: str) -> dict[str, Any]:
    if parameters is None or parameters == "":
        return {}
    if isinstance(parameters, str):
        try:
            parameters = json.loads(parameters)
        except ValueError as exc:
            raise TritonModelException(f"{what}: parameters is not valid JSON: {exc}") from None
    if not isinstance(parameters, dict):
        raise TypeError(f"{what}: parameters must be a dict or a JSON string, got {type(parameters).__name__}")
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(f"{what}: parameter keys must be strings, found {type(key).__name__}")
        if not isinstance(value, (bool, int, float, str)):
            raise TritonModelException(
                f"{what}: expect parameters values to have type bool/int/float/str, found type "
                f"{type(value).__name__} for key '{key}'"
            )
    return dict(parameters)


class _RequestState:
    """What one incoming request shares between its InferenceRequest and its response sender."""

    __slots__ = ("__weakref__", "closed", "context", "lock", "pending", "request")

    def __init__(self, request: Any, context: InstanceContext) -> None:
        self.request = request  # tritium.core.backend.api.Request
        self.context = context
        self.lock = threading.RLock()
        self.closed = False
        self.pending: InferenceResponse | None = None  # not decoupled: a response sent without the final flag

    def reschedule(self) -> None:
        """Release the request for another run (no final response) unless it is complete."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.pending = None
            self.request.reschedule()

    def finish_with_error(self, message: str) -> None:
        """Send a final error response unless the request is already complete."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.pending = None
            self.context.send_error(self.request, message)

    def __del__(self) -> None:
        # Nothing can answer the request any more (its InferenceRequest and sender are gone):
        # end it rather than leave the client waiting forever.
        try:
            if not self.closed and self.context is not None:
                self.closed = True
                self.context.abandoned(self.request)
        except Exception:  # interpreter shutdown, closed channel
            pass


class InferenceResponseSender:
    """Sends the responses of one request: ``send(response=None, flags=0)``, from any thread."""

    __slots__ = ("_state",)

    def __init__(self, state: _RequestState) -> None:
        self._state = state

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        """Send ``response``; ``flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL`` ends the request.

        :raises TritonModelException: when the sender was closed by a final
            response, or for a response without the final flag in a model
            that is not decoupled and already sent one.
        """
        state = self._state
        if response is not None and not isinstance(response, InferenceResponse):
            raise TypeError(f"send(): response must be a pb_utils.InferenceResponse, got {type(response).__name__}")
        final = bool(int(flags) & TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        if response is None and not final:
            raise TritonModelException(
                "Inference Response object must be provided when the response flags is set to zero."
            )
        with state.lock:
            if state.closed:
                raise TritonModelException("Unable to send response. Response sender has been closed.")
            if not state.context.decoupled:
                # a model that is not decoupled sends exactly one response, and the final flag
                if response is not None and state.pending is not None:
                    raise TritonModelException(
                        "Unable to send response. A model that is not decoupled sends exactly one response per request."
                    )
                if not final:
                    state.pending = response
                    return
                response = response if response is not None else state.pending
                state.pending = None
                if response is None:
                    state.closed = True
                    state.context.send_error(
                        state.request,
                        f"model '{state.context.model_name}' is not decoupled, but its response sender sent "
                        "the final flag without any response",
                    )
                    return
            if final:
                state.closed = True
            state.context.send(state.request, response, final)

    def is_cancelled(self) -> bool:
        """True once the client cancelled the request of this sender (see
        ``InferenceRequest.is_cancelled``); any thread."""
        return bool(self._state.request.is_cancelled())


# -- BLS responses ----------------------------------------------------------------------------
# messages of the core that only a request refused before any model ran can carry
_REQUEST_ERROR_PREFIXES = (
    "[request id: ",
    "unexpected inference input '",
    "unexpected inference output '",
)


def _bls_error_message(model_name: str, message: str) -> str:
    """Triton's python backend words BLS requests the server refused as it does (the model's own
    error responses pass through unchanged)."""
    if message.startswith("Request for unknown model: "):
        return (
            f"Model {model_name} - Error when running inference: Failed for execute the inference request. "
            f"Model '{model_name}' is not ready."
        )
    if message.startswith(_REQUEST_ERROR_PREFIXES) or message.startswith(f"Model {model_name} is using the decoupled"):
        return f"Model {model_name} - Error when running inference: {message}"
    return message


def _convert(response: Any, model_name: str) -> InferenceResponse:
    """A BLS response of the core (``tritium.core.worker.bls.BlsResponse``) as a pb_utils one.

    As in Triton, every BLS error has the code INTERNAL.
    """
    error = None
    if response.error is not None:
        error = TritonError(_bls_error_message(model_name, response.error.message), TritonError.INTERNAL)
    outputs = [Tensor._wrap(name, array, datatype) for name, (datatype, array) in response.outputs.items()]
    result = InferenceResponse(outputs, error)
    if response.parameters:
        result._parameters = dict(response.parameters)
    return result


def _single_response(model_name: str, response: Any) -> InferenceResponse:
    if not response.final:  # a decoupled model answered: Triton refuses exec() for those
        return InferenceResponse(
            error=TritonError(
                f"Model {model_name} - Error when running inference: Model {model_name} is using the decoupled. "
                "The current BLS request call doesn't support models using the decoupled transaction policy. "
                "Please use 'decoupled=True' argument to the 'exec' or 'async_exec' calls for decoupled models.'"
            )
        )
    return _convert(response, model_name)


class ResponseIterator:
    """The responses of a BLS request made with ``decoupled=True``, in order.

    As in Triton, when the callee ends with a final flag that carries no
    response, a last empty :class:`InferenceResponse` is yielded.
    """

    def __init__(self, call: Any, error: InferenceResponse | None = None, model_name: str = "") -> None:
        self._model_name = model_name
        self._responses = call.responses() if call is not None else iter(())
        self._pending_error = error
        self._done = False
        self._final_seen = False

    def __iter__(self) -> ResponseIterator:
        return self

    def __next__(self) -> InferenceResponse:
        if self._pending_error is not None:
            error, self._pending_error = self._pending_error, None
            self._done = True
            return error
        if self._done:
            raise StopIteration
        try:
            response = next(self._responses)
        except StopIteration:
            self._done = True
            if not self._final_seen:
                self._final_seen = True
                return InferenceResponse([])
            raise
        if response.final:
            self._final_seen = True
            self._done = True
        return _convert(response, self._model_name)

    def cancel(self) -> None:
        """Accepted for compatibility: tritium does not cancel BLS requests yet."""
