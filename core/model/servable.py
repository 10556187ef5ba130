"""What the server, the frontends and the ensemble steps use of a loaded model version: :class:`Servable`.

Three classes implement it: :class:`~.model.Model` (a version served by
worker processes), :class:`~.ensemble.model.EnsembleModel` (a graph of
other models, run by the core) and :class:`~.cache.CachedModel` (either of
those behind the response cache). The repository hands out Servables; its
callers never need to know which of the three they hold.

The module also holds what the three share: the ``Done`` callback type,
:func:`model_label`, :func:`platform_of`, :func:`is_decoupled`, :func:`refuse_decoupled`, and
:func:`submit_as_task` for a Servable whose request path is a coroutine.
Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import Code, TritonError
from ..scheduler.base import cancelled_error

if TYPE_CHECKING:  # pragma: no cover
    from ..inference.request import InferenceRequest
    from ..inference.response import InferenceResponse
    from ..observability.stats import ModelStats
    from .validation import ModelSignature

__all__ = [
    "Servable",
    "Done",
    "Cancellable",
    "model_label",
    "platform_of",
    "is_decoupled",
    "refuse_decoupled",
    "submit_as_task",
]

#: receives a request's final response, or the error it failed with: ``done(response, None)`` /
#: ``done(None, error)``
Done = Callable[["InferenceResponse | None", "BaseException | None"], None]


class Cancellable(Protocol):
    """What :meth:`Servable.submit` returns: ``cancel()`` when the request's client goes away
    (a gRPC call cancelled or past its deadline, an HTTP connection closed). A request still
    queued is dropped and answered CANCELLED; one executing is reported to its model
    (``is_cancelled()``). A no-op once the request is answered."""

    def cancel(self) -> Any: ...


class Servable(Protocol):
    """One loaded model version as its users see it (the repository's unit of serving).

    Identity and config: ``name``, ``version`` (int), ``config`` (the
    normalized config, JSON form), ``signature`` (its inputs and outputs
    prepared for request checks), ``decoupled`` (Triton's
    ``model_transaction_policy.decoupled``), ``label`` (``'m' version 1``, for
    messages) and ``platform`` (what model metadata reports). Accounting:
    ``stats`` (Triton's statistics extension), ``instances`` (the worker-backed
    instances, empty for an ensemble), ``active`` (requests accepted and not
    yet answered) and :meth:`pending_count` (Triton's pending-request gauge).
    """

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def config(self) -> dict[str, Any]: ...

    @property
    def signature(self) -> ModelSignature: ...

    @property
    def decoupled(self) -> bool: ...

    @property
    def stats(self) -> ModelStats: ...

    @property
    def instances(self) -> Sequence[Any]: ...

    @property
    def label(self) -> str: ...

    @property
    def platform(self) -> str: ...

    @property
    def ready(self) -> bool:
        """True while the version can take requests (every instance, or every composing model, is ready)."""
        ...

    @property
    def active(self) -> int:
        """Requests accepted and not yet answered."""
        ...

    def pending_count(self) -> int:
        """Requests waiting to execute (``nv_inference_pending_request_count``)."""
        ...

    def submit(self, request: InferenceRequest, done: Done) -> Cancellable:
        """Start one request; ``done`` is called once, later, on the event loop. The result
        cancels it (its client went away).

        :raises TritonError: for a request refused before it is queued.
        """
        ...

    async def infer(self, request: InferenceRequest) -> InferenceResponse:
        """Run one request and return its single response (released by the caller)."""
        ...

    def infer_stream(self, request: InferenceRequest) -> AsyncGenerator[InferenceResponse, None]:
        """Run one request and yield each response (decoupled models: zero or more, then a final one)."""
        ...

    async def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until no request is in flight; return whether it happened."""
        ...

    async def unload(self) -> None:
        """Stop taking requests and release what the version holds."""
        ...


def model_label(name: str, version: int) -> str:
    """``'name' version N``: how messages name a model version."""
    return f"'{name}' version {version}"


def platform_of(config: Mapping[str, Any]) -> str:
    """What model metadata reports as ``platform``: the config's platform, else its backend."""
    return str(config.get("platform") or config.get("backend") or "")


def is_decoupled(config: Mapping[str, Any]) -> bool:
    """Whether a config sets ``model_transaction_policy.decoupled`` (Triton's decoupled models)."""
    return bool((config.get("model_transaction_policy") or {}).get("decoupled", False))


#: in process, the call :func:`refuse_decoupled` names by default
SINGLE_RESPONSE_CALL = "infer (use infer_stream)"


def refuse_decoupled(model: Servable, call: str = SINGLE_RESPONSE_CALL) -> None:
    """Refuse a decoupled model for a call that answers a request with exactly one response.

    The message is Triton's, naming the call: ``HTTP end point`` (its HTTP endpoint's
    infer), ``ModelInfer RPC`` (its gRPC one); in process, :data:`SINGLE_RESPONSE_CALL`.

    :raises TritonError: UNSUPPORTED when ``model`` is decoupled.
    """
    if model.decoupled:
        raise TritonError(Code.UNSUPPORTED, f"{call} doesn't support models with decoupled transaction policy")


class _TaskJob:
    """The :class:`Cancellable` of :func:`submit_as_task`: cancels the task, for its client."""

    __slots__ = ("task", "by_client")

    def __init__(self, task: asyncio.Task[InferenceResponse]) -> None:
        self.task = task
        self.by_client = False

    def cancel(self) -> None:
        self.by_client = True
        self.task.cancel()


def submit_as_task(infer: Callable[[InferenceRequest], Any], request: InferenceRequest, done: Done) -> Cancellable:
    """:meth:`Servable.submit` for a Servable whose request path is the coroutine ``infer(request)``.

    The coroutine runs as a task; cancelling what is returned cancels it, and so the model
    requests it awaits. ``done`` gets its response or its error: CANCELLED ``Request was
    cancelled`` when its client cancelled it, UNAVAILABLE ``Server is stopping, request
    cancelled`` when the task is cancelled otherwise.
    """

    def settle(task: asyncio.Task[InferenceResponse]) -> None:
        if task.cancelled():
            done(None, cancelled_error() if job.by_client else TritonError(Code.UNAVAILABLE, _STOPPING))
        elif task.exception() is not None:
            done(None, task.exception())
        else:
            done(task.result(), None)

    job = _TaskJob(asyncio.get_running_loop().create_task(infer(request)))
    job.task.add_done_callback(settle)
    return job


_STOPPING = "Server is stopping, request cancelled"
