"""The async servicers: ``inference.GRPCInferenceService`` and ``grpc.health.v1.Health``.

Thin: each RPC translates its message with :mod:`.codec`, calls the
core's in-process API (:class:`~tritium.core.api.ServerAPI`) and
answers; a :class:`~tritium.core.errors.TritonError` becomes the gRPC status
Triton answers it with (:func:`tritium.frontends.base.grpc_status_of`) and its
message the status details. Every method runs in the core process, on the
event loop, one coroutine per call, whichever transport carries it (the
native one or grpc.aio, see :mod:`.transport`); the ``context`` is grpc.aio's
``ServicerContext`` or :class:`.native_transport.NativeContext`, of which
the servicers use ``set_code``, ``set_details`` and (streams) ``write``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
from google.protobuf import json_format

from ...core.api import Code, InferenceRequest, InferenceResponse, Servable, TritonError, clip, refuse_decoupled
from ...proto import grpc_service_pb2 as pb
from ...proto import grpc_service_pb2_grpc as pb_grpc
from ...proto import health_pb2, health_pb2_grpc
from ..base import DETAILS_CHARS, ClusterView, LocalView, grpc_status_of
from .codec import (
    infer_response_parts,
    model_metadata_to_proto,
    parse_infer_request,
    parse_version,
    stream_error,
    stream_skips,
    to_infer_request,
    to_stream_response,
)
from .repository import RepositoryServicerMixin
from .shared_memory import SharedMemoryRpcs
from .trace_logging import TraceLoggingRpcs

if TYPE_CHECKING:  # pragma: no cover
    from ...core.api import Cancellable, ServerAPI

log = logging.getLogger("tritium.grpc")

__all__ = ["InferenceServicer", "HealthServicer"]

M = TypeVar("M")

_EMPTY_INFER = pb.ModelInferResponse()
_END = object()


def _fail(context: grpc.aio.ServicerContext, exc: TritonError, empty: M) -> M:
    """Answer the call with ``exc``'s status and message (the message body is not sent)."""
    context.set_code(grpc_status_of(exc))
    context.set_details(clip(exc.message, DETAILS_CHARS))
    return empty


#: how :meth:`InferenceServicer.model_infer_submit` answers: ``(response parts, None)`` or ``(None, error)``
InferReply = Callable[[list[bytes | memoryview] | None, TritonError | None], None]


def _answer_infer(reply: InferReply, response: InferenceResponse | None, error: BaseException | None) -> None:
    """Hand a ModelInfer's response (serialized, as parts) or its error to ``reply``; release the response."""
    if response is None:
        if not isinstance(error, TritonError):
            log.error("ModelInfer failed: %r", error)
            error = TritonError(Code.INTERNAL, f"{type(error).__name__}: {error}")
        reply(None, error)
        return
    try:
        try:
            parts = infer_response_parts(response)
        except Exception as exc:
            log.error("ModelInfer failed: %s", exc, exc_info=exc)
            reply(None, TritonError(Code.INTERNAL, f"{type(exc).__name__}: {exc}"))
            return
        reply(parts, None)
    finally:
        response.release()


def _pass_turn(previous: asyncio.Future[None], mine: asyncio.Future[None]) -> None:
    """Complete ``mine`` once ``previous`` is complete."""
    if mine.done():
        return
    if previous.done():
        mine.set_result(None)
    else:

        def finish(_: asyncio.Future[None]) -> None:
            if not mine.done():
                mine.set_result(None)

        previous.add_done_callback(finish)


class InferenceServicer(
    RepositoryServicerMixin, SharedMemoryRpcs, TraceLoggingRpcs, pb_grpc.GRPCInferenceServiceServicer
):
    """``inference.GRPCInferenceService`` over one :class:`ServerAPI`.

    :param server: the server whose API the RPCs call.
    :param cluster: where server and model readiness and statistics come from (None: the
        server's own; Ray Serve: every replica's).
    """

    def __init__(self, server: ServerAPI, cluster: ClusterView | None = None) -> None:
        self.server = server
        self.cluster: ClusterView = cluster if cluster is not None else LocalView(server)
        #: the server's budget for bytes of requests held (``--max-inflight-request-bytes``, shared with HTTP)
        self.budget = server.body_budget

    # -- health ------------------------------------------------------------------------
    async def ServerLive(self, request: pb.ServerLiveRequest, context: Any) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=self.server.live)

    async def ServerReady(self, request: pb.ServerReadyRequest, context: Any) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=await self.cluster.ready())

    async def ModelReady(self, request: pb.ModelReadyRequest, context: Any) -> pb.ModelReadyResponse:
        try:
            version = parse_version(request.version)
        except TritonError as exc:
            return _fail(context, exc, pb.ModelReadyResponse())
        return pb.ModelReadyResponse(ready=await self.cluster.model_ready(request.name, version))

    # -- metadata, configuration, statistics --------------------------------------------------
    async def ServerMetadata(self, request: pb.ServerMetadataRequest, context: Any) -> pb.ServerMetadataResponse:
        meta = self.server.metadata()
        return pb.ServerMetadataResponse(
            name=meta["name"], version=meta["version"], extensions=meta.get("extensions", [])
        )

    async def ModelMetadata(self, request: pb.ModelMetadataRequest, context: Any) -> pb.ModelMetadataResponse:
        try:
            meta = self.server.model_metadata(request.name, parse_version(request.version))
        except TritonError as exc:
            return _fail(context, exc, pb.ModelMetadataResponse())
        return model_metadata_to_proto(meta)

    async def ModelConfig(self, request: pb.ModelConfigRequest, context: Any) -> pb.ModelConfigResponse:
        try:
            config = self.server.model_config(request.name, parse_version(request.version))
        except TritonError as exc:
            return _fail(context, exc, pb.ModelConfigResponse())
        response = pb.ModelConfigResponse()
        # Triton converts the config's JSON form the same way and ignores what does not fit.
        json_format.ParseDict(config, response.config, ignore_unknown_fields=True)
        return response

    async def ModelStatistics(self, request: pb.ModelStatisticsRequest, context: Any) -> pb.ModelStatisticsResponse:
        try:
            stats = await self.cluster.statistics(request.name, parse_version(request.version))
        except TritonError as exc:
            return _fail(context, exc, pb.ModelStatisticsResponse())
        return json_format.ParseDict(stats, pb.ModelStatisticsResponse(), ignore_unknown_fields=True)

    # -- inference ------------------------------------------------------------------------------
    async def ModelInfer(self, request: pb.ModelInferRequest, context: Any) -> pb.ModelInferResponse:
        """Unused: :meth:`model_infer_submit` serves ModelInfer (on grpc.aio through :meth:`model_infer_bytes`)."""
        raise NotImplementedError

    async def model_infer_bytes(self, data: bytes | memoryview, context: Any) -> bytes:
        """ModelInfer on serialized messages, so that large tensors skip protobuf's copies (grpc.aio)."""
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        def reply(parts: list[bytes | memoryview] | None, error: TritonError | None) -> None:
            if future.done():  # the call was cancelled
                return
            if error is not None:
                future.set_result(_fail(context, error, _EMPTY_INFER).SerializeToString())
            else:
                future.set_result(b"".join(parts or ()))

        job = self.model_infer_submit(data, reply)
        try:
            return await future
        except asyncio.CancelledError:  # the client cancelled, went away or passed its deadline
            if job is not None:
                job.cancel()
            raise

    def model_infer_submit(self, data: bytes | memoryview, reply: InferReply) -> Cancellable | None:
        """ModelInfer on serialized messages, answered from the model's completion (no task per call).

        ``reply(parts, None)`` gets the serialized response as parts to join
        (they may be views of the response's shared memory, valid only while
        ``reply`` runs: a transport copies them once, straight to where they
        go); ``reply(None, error)`` gets the error the call fails with. Called
        once, now (an error found before the model runs) or later.

        The message's bytes count against the server's budget
        (:attr:`budget`, ``--max-inflight-request-bytes``) from now until the
        reply is given, whether the call succeeds, fails or was cancelled
        meanwhile (the model still holds the request's tensors until it is
        done); a message that does not fit fails UNAVAILABLE before it is parsed.

        Returns what cancels the request when the call is cancelled (None: already answered).
        """
        server, budget, size = self.server, self.budget, len(data)
        if not budget.reserve(size):
            log.info("gRPC: a ModelInfer was refused: %d bytes of requests are in flight already", budget.held)
            reply(None, budget.refusal())
            return None
        held = [size]  # given back once, by the first reply

        def release_then(parts: list[bytes | memoryview] | None, error: TritonError | None) -> None:
            try:
                reply(parts, error)
            finally:
                if held:
                    budget.release(held.pop())

        recv_ns = time.perf_counter_ns() if server.tracing else 0
        try:
            request, raws = parse_infer_request(data, server.options.network.max_json_request_bytes)
            core_request = to_infer_request(request, server.model, raws, server.resolve_shared_memory)
            model = server.model(core_request.model_name, core_request.model_version)
            refuse_decoupled(model, "ModelInfer RPC")
            answer: Any = lambda response, error: _answer_infer(release_then, response, error)  # noqa: E731
            if recv_ns:  # the trace extension is on: sample this request
                trace = server.begin_trace(core_request, "GRPC", recv_ns)
                if trace is not None:
                    answer = server.traced(trace, answer)
            return server.submit(core_request, answer, model)
        except TritonError as exc:
            release_then(None, exc)
            return None
        except Exception as exc:  # a bug, not a bad request: INTERNAL, logged, and the server goes on
            log.error("ModelInfer failed: %s", exc, exc_info=exc)
            release_then(None, TritonError(Code.INTERNAL, f"{type(exc).__name__}: {exc}"))
        return None

    async def ModelStreamInfer(self, request_iterator: AsyncIterator[pb.ModelInferRequest], context: Any) -> None:
        """Run every request of the stream as it arrives; write each response as it is ready.

        Responses of a model that is not decoupled go out in request order
        (as Triton writes them); a decoupled model's responses go out as
        they come. A request that fails gets an ``error_message`` and the
        stream stays open; so does one that does not fit the server's budget
        (:attr:`budget`: each request's size counts until its responses are done).
        """
        out: asyncio.Queue[Any] = asyncio.Queue()
        reader = asyncio.ensure_future(self._read_stream(request_iterator, out))
        try:
            while True:
                item = await out.get()
                if item is _END:
                    break
                await context.write(item)
            await reader
        finally:
            if not reader.done():
                reader.cancel()

    async def _read_stream(
        self, request_iterator: AsyncIterator[pb.ModelInferRequest], out: asyncio.Queue[Any]
    ) -> None:
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()
        turn: asyncio.Future[None] = loop.create_future()
        turn.set_result(None)
        try:
            async for request in request_iterator:
                mine: asyncio.Future[None] = loop.create_future()
                task = asyncio.ensure_future(self._stream_one(request, out, turn, mine))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                turn = mine
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            out.put_nowait(_END)

    async def _stream_one(
        self,
        request: pb.ModelInferRequest,
        out: asyncio.Queue[Any],
        previous: asyncio.Future[None],
        mine: asyncio.Future[None],
    ) -> None:
        """Run one request of a stream; ``previous``/``mine`` pass the turn to write in request order."""
        server, budget, size, request_id = self.server, self.budget, request.ByteSize(), request.id
        if not budget.reserve(size):
            log.info("gRPC: a stream request was refused: %d bytes of requests are in flight already", budget.held)
            del request  # not held while it waits for its turn: the budget did not count it
            try:
                await previous
                out.put_nowait(stream_error(budget.refusal().message, request_id))
            finally:
                _pass_turn(previous, mine)
            return
        try:
            try:
                core_request = to_infer_request(request, server.model, None, server.resolve_shared_memory)
                model = server.model(core_request.model_name, core_request.model_version)
            except TritonError as exc:
                messages = [stream_error(exc.message, request_id)]
            else:
                if model.decoupled:
                    _pass_turn(previous, mine)  # responses go out as they come
                    async for message in self._stream_responses(core_request, model):
                        out.put_nowait(message)
                    return
                messages = [m async for m in self._stream_responses(core_request, model)]
            await previous
            for message in messages:
                out.put_nowait(message)
        except Exception as exc:  # a broken response must not end the stream
            log.error("ModelStreamInfer request failed: %s", exc, exc_info=exc)
            out.put_nowait(stream_error(f"{type(exc).__name__}: {exc}", request_id))
        finally:
            budget.release(size)
            _pass_turn(previous, mine)

    async def _stream_responses(self, request: InferenceRequest, model: Servable) -> AsyncGenerator[Any, None]:
        """The stream messages of one request to ``model`` (its errors included)."""
        decoupled = model.decoupled
        try:
            async for response in self.server.infer_stream(request, model):
                try:
                    if stream_skips(response, request, decoupled):
                        continue
                    yield to_stream_response(response, request)
                finally:
                    response.release()
        except TritonError as exc:
            yield stream_error(exc.message, request.id)


class HealthServicer(health_pb2_grpc.HealthServicer):
    """``grpc.health.v1.Health/Check``: SERVING while the server is ready, as Triton answers it.

    :param cluster: as :class:`InferenceServicer`'s.
    """

    def __init__(self, server: ServerAPI, cluster: ClusterView | None = None) -> None:
        self.server = server
        self.cluster: ClusterView = cluster if cluster is not None else LocalView(server)

    async def Check(self, request: health_pb2.HealthCheckRequest, context: Any) -> health_pb2.HealthCheckResponse:
        serving = await self.cluster.ready()
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        return health_pb2.HealthCheckResponse(status=status)


def infer_handler(servicer: InferenceServicer) -> grpc.GenericRpcHandler:
    """A handler for ModelInfer that passes serialized messages through (registered before the others)."""
    method = grpc.unary_unary_rpc_method_handler(
        servicer.model_infer_bytes, request_deserializer=None, response_serializer=None
    )
    return grpc.method_handlers_generic_handler("inference.GRPCInferenceService", {"ModelInfer": method})
