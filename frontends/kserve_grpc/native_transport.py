"""The native transport of the gRPC endpoint: gRPC's C++ server feeding the one servicer on the event loop.

The extension module :mod:`._native` (``_native_*.cc``, built when the gRPC
C++ headers are present) runs a gRPC C++ server (the async API, one generic
service, one polling thread): every call reaches Python as its method name
and raw message bytes, and Python answers with raw bytes and a status.
gRPC's thread never takes the GIL; it queues events and wakes the event loop
through an eventfd, and :meth:`NativeTransport._on_events` takes them all in
one call. So the per-call work in Python is the servicer's own (parse, call
the core, serialize), with none of grpcio's Python machinery around it.

Each unary call runs as one task on the core's event loop; a client that
cancels, disconnects or passes its deadline cancels that task, as on
grpc.aio. ``ModelStreamInfer`` is read one message at a time (the next read
starts when the servicer takes a message) and written one message at a time,
with a bounded backlog kept in C++ (:meth:`NativeContext.write` waits while it
is full). Runs in the core process, on its event loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from ...core.api import Code, TritonError, clip
from ...proto import grpc_service_pb2 as pb
from ...proto import health_pb2
from ..base import DETAILS_CHARS, grpc_status_of
from . import _native  # ImportError when not built (see __init__)
from .restricted import STREAMING, refusal, rule_for
from .servicer import HealthServicer, InferenceServicer
from .transport import Transport

log = logging.getLogger("tritium.grpc")

__all__ = ["NativeTransport", "NativeContext"]

# what a call's events are (Server.drain gives (call, kind, payload))
MESSAGE, READS_DONE, CANCELLED, WRITABLE = _native.MESSAGE, _native.READS_DONE, _native.CANCELLED, _native.WRITABLE

_OK = grpc.StatusCode.OK
_UNKNOWN = grpc.StatusCode.UNKNOWN.value[0]
_INVALID = grpc.StatusCode.INVALID_ARGUMENT.value[0]
_UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED.value[0]
_UNAVAILABLE = grpc.StatusCode.UNAVAILABLE.value[0]
_INTERNAL = grpc.StatusCode.INTERNAL.value[0]


class _Abort(Exception):
    """Raised by :meth:`NativeContext.abort`: the call ends with this status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class NativeContext:
    """What the servicers use of grpc.aio's ``ServicerContext``, for one call of the native transport.

    ``set_code``/``set_details`` set the status the call ends with (its
    response message is sent only when the status is OK);
    ``invocation_metadata`` reads the client's metadata when asked (keys in
    lower case, ``-bin`` values as bytes); ``write`` sends one message of a
    stream, waiting while the stream's backlog is full.
    """

    __slots__ = ("_call", "code", "details", "_writable")

    def __init__(self, call: Any) -> None:
        self._call = call
        self.code: grpc.StatusCode = _OK
        self.details = ""
        self._writable: asyncio.Future[None] | None = None

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._call.metadata()

    def cancelled(self) -> bool:
        return bool(self._call.cancelled)

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        """End the call with ``code`` and ``details`` (raises, as grpc.aio's does)."""
        raise _Abort(code, details)

    async def write(self, message: Any) -> None:
        """Send one message of a stream (a protobuf message); waits while the backlog is full."""
        if self._call.write(message.SerializeToString()):
            self._writable = asyncio.get_running_loop().create_future()
            try:
                await self._writable
            finally:
                self._writable = None

    def _wake(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)


#: a call's handler once Python is done with it (None: a call not seen yet)
_DONE = object()


class _Waiting:
    """The handler of a ModelInfer call while its model runs.

    It is the only thing the model's completion holds, and it lets go of the
    call when the call is cancelled: the response, when it comes, is released
    without being sent, and the call is not kept alive meanwhile.
    """

    __slots__ = ("call", "job")

    def __init__(self, call: Any) -> None:
        self.call: Any = call
        self.job: Any = None  # cancels the request in the core (None: answered, or not started)

    def cancel(self) -> None:
        """The client cancelled, disconnected or ran past its deadline: so is the request."""
        self.call = None
        job, self.job = self.job, None
        if job is not None:
            job.cancel()

    def reply(self, parts: list[bytes | memoryview] | None, error: TritonError | None) -> None:
        """The answer (see :meth:`.servicer.InferenceServicer.model_infer_submit`)."""
        call, self.call = self.call, None
        self.job = None
        if call is None:
            return
        call.handler = _DONE
        if error is None:
            call.finish(parts, 0, "")  # the parts are copied into gRPC's buffer here, once
        else:
            call.finish(None, grpc_status_of(error).value[0], clip(error.message, DETAILS_CHARS))


def _finish(call: Any, body: bytes | list[bytes | memoryview] | None, context: NativeContext) -> None:
    """End ``call`` with the status set on ``context`` (and ``body`` as its message when OK)."""
    code = context.code
    call.finish(body if code is _OK else None, code.value[0], context.details)


@dataclass(slots=True, frozen=True)
class _Method:
    """One RPC: how to run it, and the restricted-protocol rule it falls under (or None)."""

    handler: Callable[..., Any]
    request: Any  # the request message class; None: ModelInfer (serialized bytes in, parts out)
    streaming: bool
    rule: tuple[str, str] | None


def method_table(
    servicer: InferenceServicer, health: HealthServicer, restrictions: dict[str, tuple[str, str]]
) -> dict[str, _Method]:
    """Every RPC the endpoint serves, by full method name (``/inference.GRPCInferenceService/ModelInfer``)."""
    table: dict[str, _Method] = {}
    service = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    for method in service.methods:
        path = f"/{service.full_name}/{method.name}"
        if method.name == "ModelInfer":  # serialized in and out, answered from a callback (no task)
            handler, request = servicer.model_infer_submit, None
        else:
            handler, request = getattr(servicer, method.name), getattr(pb, method.input_type.name)
        table[path] = _Method(handler, request, method.name in STREAMING, rule_for(path, restrictions))
    table["/grpc.health.v1.Health/Check"] = _Method(health.Check, health_pb2.HealthCheckRequest, False, None)
    return table


class _Stream:
    """One streaming call: the servicer's request iterator, fed by the call's events, and its task."""

    __slots__ = ("call", "context", "request", "task", "_messages", "_ended", "_waiter")

    def __init__(self, call: Any, method: _Method, loop: asyncio.AbstractEventLoop) -> None:
        self.call, self.request = call, method.request
        self.context = NativeContext(call)
        self._messages: collections.deque[bytes | memoryview] = collections.deque()
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        self.task: asyncio.Task[None] | None = loop.create_task(self._run(method.handler))

    def feed(self, kind: int, payload: bytes | memoryview | None) -> None:
        """An event of this call: a message, the client's half-close, or room in the write backlog."""
        if kind == MESSAGE:
            self._messages.append(payload)  # type: ignore[arg-type]
        elif kind == READS_DONE:
            self._ended = True
        else:
            self.context._wake()
            return
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def cancel(self) -> None:
        """Cancel the stream's task (the client cancelled or went away)."""
        task, self.task = self.task, None  # no cycle through the CancelledError's traceback
        if task is not None:
            task.cancel()

    async def _requests(self) -> AsyncGenerator[Any, None]:
        while True:
            if self._messages:
                payload = self._messages.popleft()
                self.call.read()  # one message waits here at most: the next read starts now
                try:
                    yield self.request.FromString(payload)
                except DecodeError as exc:
                    raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed {self.request.__name__}: {exc}") from exc
            elif self._ended:
                return
            else:
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
                self._waiter = None

    async def _run(self, handler: Callable[..., Any]) -> None:
        try:
            await handler(self._requests(), self.context)
            _finish(self.call, None, self.context)
        except _Abort as exc:
            self.call.finish(None, exc.code.value[0], exc.details)
        except Exception as exc:
            log.error("%s failed: %s", self.call.method, exc, exc_info=exc)
            self.call.finish(None, _UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}")
        finally:
            self.call.handler = _DONE
            self.task = None  # the task's exception must not keep this stream (and its call) alive


class NativeTransport(Transport):
    """Serve the servicers with gRPC's C++ server (:mod:`._native`; parameters: :class:`.transport.Transport`).

    ``grpc.max_receive_message_length`` among the options sets the largest
    request message; the other options go to gRPC as channel arguments.
    """

    name = f"native (gRPC C++ {_native.GRPC_VERSION})"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        options = dict(self.options)
        self.max_receive = int(options.pop("grpc.max_receive_message_length", -1))
        self.channel_args = list(options.items())
        self.methods = method_table(self.servicer, self.health, self.restrictions)
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self, address: str) -> None:
        """Bind ``address`` (``host:port``) and serve; runs on the core's event loop.

        :raises TritonError: UNAVAILABLE when the address cannot be bound;
            INVALID_ARG for a channel argument that is not an int or a str.
        """
        server = _native.Server()
        try:
            server.start(address, self.max_receive, self.channel_args)
        except OSError:
            raise TritonError(Code.UNAVAILABLE, f"Socket '{address}' already in use ") from None
        except TypeError as exc:  # a channel argument that is not an int or a str
            raise TritonError(Code.INVALID_ARG, f"[frontends.grpc] options: {exc}") from None
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(server.fileno(), self._on_events)
        self._server = server

    async def stop(self, grace: float) -> None:
        """Refuse new calls; let running ones finish for up to ``grace`` seconds, then cancel them.

        gRPC's shutdown blocks, so it runs in a thread while the loop goes on
        serving the calls in flight.
        """
        server, self._server = self._server, None
        if server is None or self._loop is None:
            return
        await self._loop.run_in_executor(None, server.shutdown, grace)
        self._dispatch(server.drain())  # the last cancellations
        self._loop.remove_reader(server.fileno())
        for _ in range(100):  # cancelled tasks let go of their calls within a few loop turns
            if not _native.live_calls():
                break
            await asyncio.sleep(0.01)
        else:
            log.warning("gRPC: %d calls not released at shutdown", _native.live_calls())

    # -- events ------------------------------------------------------------------------------
    def _on_events(self) -> None:
        if self._server is not None:
            self._dispatch(self._server.drain())

    def _dispatch(self, events: list[tuple[Any, int, bytes | memoryview | None]]) -> None:
        for call, kind, payload in events:
            try:
                self._event(call, kind, payload)
            except Exception as exc:  # a bug: this call fails, the others go on
                log.error("%s: %s", call.method, exc, exc_info=exc)
                call.finish(None, _INTERNAL, f"{type(exc).__name__}: {exc}")
                call.handler = _DONE

    def _event(self, call: Any, kind: int, payload: bytes | memoryview | None) -> None:
        handler = call.handler
        if handler is None:  # a new call: its first message, or the end of a stream without one
            if kind == CANCELLED:
                call.handler = _DONE  # over before it began
            else:
                self._begin(call, payload)
        elif handler is _DONE:
            return  # an event that crossed Python's finish
        elif kind == CANCELLED:  # the client cancelled, disconnected or ran past its deadline
            handler.cancel()
            call.handler = _DONE
        else:  # a stream's next message, its end, or room to write
            handler.feed(kind, payload)

    def _begin(self, call: Any, payload: bytes | memoryview | None) -> None:
        """A new call: refuse it, or start its task."""
        method = self.methods.get(call.method)
        if method is None:
            call.finish(None, _UNIMPLEMENTED, "Method not found!")
            call.handler = _DONE
            return
        if method.rule is not None:
            message = refusal(method.rule, call.metadata())
            if message is not None:
                call.finish(None, _UNAVAILABLE, message)
                call.handler = _DONE
                return
        assert self._loop is not None
        if method.streaming:
            stream = _Stream(call, method, self._loop)
            call.handler = stream
            if payload is not None:
                stream.feed(MESSAGE, payload)
            else:
                stream.feed(READS_DONE, None)
        elif payload is None:
            call.finish(None, _INVALID, "a unary call carried no request message")
            call.handler = _DONE
        elif method.request is None:  # ModelInfer: started now, answered from the model's completion
            waiting = _Waiting(call)
            call.handler = waiting
            job = method.handler(payload, waiting.reply)
            if waiting.call is not None:  # not answered at once
                waiting.job = job
        else:
            call.handler = self._loop.create_task(self._unary(call, method, payload))

    @staticmethod
    async def _unary(call: Any, method: _Method, payload: bytes | memoryview) -> None:
        context = NativeContext(call)
        try:
            try:
                request = method.request.FromString(payload)
            except DecodeError as exc:
                call.finish(None, _INVALID, f"malformed {method.request.__name__}: {exc}")
                return
            body = (await method.handler(request, context)).SerializeToString()
            _finish(call, body, context)
        except _Abort as exc:
            call.finish(None, exc.code.value[0], exc.details)
        except Exception as exc:
            log.error("%s failed: %s", call.method, exc, exc_info=exc)
            call.finish(None, _UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}")
        finally:
            call.handler = _DONE
