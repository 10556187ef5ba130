"""A loaded model version: its config, instances, scheduler, statistics and the request path.

``Model.infer`` is the core's request path for one model version:

1. check the request against the config (:mod:`.validation`);
2. write every input's bytes once into the core's arena (an input in a
   client's registered system shared-memory region is not copied: its
   descriptor goes to the worker, which maps the region itself; an input in
   a CUDA region is copied device→host once, into the arena): steps 1-2 are
   :mod:`.input_staging`;
3. hand the payload to the scheduler, which sends it to a free instance;
4. turn the worker's RESPONSE frame into an :class:`InferenceResponse`
   whose outputs are views of shared memory (:mod:`.response_assembly`:
   classification applied there; an output asked into a CUDA region is
   copied host→device once, there), and deliver it;
5. account statistics when the execution's timings arrive.

:class:`Model` is one of the three :class:`~.servable.Servable` kinds.

Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from ..errors import Code, TritonError
from ..inference.request import InferenceRequest
from ..inference.response import InferenceResponse
from ..memory.pool import TensorPool
from ..observability.stats import ModelStats
from ..scheduler.base import Payload, QueueFull, Rejected
from ..scheduler.default import DefaultScheduler
from ..scheduler.dynamic_batcher import DynamicBatcher
from ..scheduler.sequence_batcher import SequenceBatcher
from .batching import BatcherServices
from .input_staging import InputStaging, PendingRequest, free_blocks
from .instance import ModelInstance
from .instance_groups import passive_instances
from .reshape import reshapes
from .response_assembly import ResponseAssembly
from .servable import Done, is_decoupled, model_label, platform_of, refuse_decoupled
from .validation import ModelSignature

log = logging.getLogger("tritium.model")

__all__ = ["Model", "Done", "CANCEL_RETRY_S", "CANCEL_RETRY_MAX_S"]

#: seconds before a cancelled request that no scheduler queue or worker holds is looked for again
CANCEL_RETRY_S = 0.005
#: ... doubling up to this
CANCEL_RETRY_MAX_S = 0.1


def failure_reason(error: BaseException | None, cancelled: bool) -> str | None:
    """The reason label a finished request is counted under as a failure (None: a success).

    Triton's reasons: ``REJECTED`` (refused by the scheduler: queue policy, timeout),
    ``CANCELED`` (an error with code CANCELLED, or ``cancelled``: the caller cancelled or
    went away before the final response, however the model ended it), ``BACKEND`` (any
    other error). Triton 2.51 counts a cancelled request the model ran to the end, and an
    error response of a python model, as successes (docs/compatibility.md).
    """
    if cancelled or (isinstance(error, TritonError) and error.code == Code.CANCELLED):
        return "CANCELED"
    if error is None:
        return None
    return "REJECTED" if isinstance(error, Rejected) else "BACKEND"


class Model:
    """One loaded version of a model.

    :param name: model name.
    :param version: version number.
    :param path: the model's folder.
    :param config: the normalized config (JSON form).
    :param pool: the core's tensor pool.
    :param labels: class labels per output name (from ``label_filename``).
    """

    def __init__(
        self,
        name: str,
        version: int,
        path: str,
        config: dict[str, Any],
        pool: TensorPool,
        labels: dict[str, list[str]],
    ) -> None:
        self.name = name
        self.version = version
        self.version_text = str(version)
        self.path = path
        self.config = config
        #: ``'name' version N`` for messages; what model metadata reports as ``platform``
        self.label = model_label(name, version)
        self.platform = platform_of(config)
        self.signature = ModelSignature(name, config)
        self.labels = labels
        self.pool = pool
        self.stats = ModelStats(name, version)
        self.instances: list[ModelInstance] = []
        #: instances of ``passive: true`` groups: initialized, never given requests (as Triton)
        self.passive = passive_instances(config)
        self.decoupled = is_decoupled(config)
        seq = config.get("sequence_batching")
        states = (seq or {}).get("state", [])
        #: implicit-state outputs (those the client cannot see, not in the config's outputs, are dropped)
        self.state_outputs = {str(st["output_name"]) for st in states}
        hidden_outputs = self.state_outputs - {str(o["name"]) for o in config.get("output", [])}
        #: steps 2 and 4 of the request path (the config's input / output ``reshape`` applied there)
        self._staging = InputStaging(self.signature, pool, reshapes(config, "input"), self)
        #: what its batcher asks of it: batch inputs gathered, control inputs and state, null requests
        self.batcher_services = BatcherServices(
            name, version, path, config, pool, self.signature, self.state_outputs, self._staging
        )
        self._assembly = ResponseAssembly(
            self.label,
            pool,
            reshapes(config, "output"),
            self.state_outputs,
            hidden_outputs,
            self.signature.max_batch_size > 0,
            labels,
        )
        self.scheduler = self._make_scheduler(config)
        self._stopping = False
        self._active = 0  # requests between infer() and their final response
        self._idle: asyncio.Event | None = None

    def _make_scheduler(self, config: dict[str, Any]) -> Any:
        """The scheduler the config asks for: sequence batcher, dynamic batcher or the default."""
        label = self.label

        def executed(size: int, t: Sequence[int]) -> None:
            self.stats.record_execution(size, t[0], t[1], t[2])

        def available(inst: Any) -> bool:
            return bool(inst.available)

        if config.get("sequence_batching") is not None:
            return SequenceBatcher(self.name, label, config, executed, available, self.batcher_services)
        if config.get("dynamic_batching") is not None:
            # with max_batch_size 0 the batcher applies its queue policies and priorities and sends
            # each request alone (its batch limit is 1), as Triton's dynamic batch scheduler does
            return DynamicBatcher(label, config, executed, available, self.batcher_services.gather)
        return DefaultScheduler(label, executed, available)

    # -- description -------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """True while every instance can take requests."""
        return not self._stopping and bool(self.instances) and all(i.available for i in self.instances)

    # -- instances -----------------------------------------------------------------
    def instance_ready(self, instance: ModelInstance) -> None:
        """Callback: ``instance`` can take batches (a passive one gets none)."""
        if not self._stopping and instance.name not in self.passive:
            self.scheduler.add_executor(instance)

    def instance_lost(self, instance: ModelInstance, how: str) -> None:
        """Callback: ``instance``'s worker is gone (``how``)."""
        del how
        self.scheduler.remove_executor(instance)

    @property
    def active(self) -> int:
        """Requests accepted and not yet answered (a response counts until it is released)."""
        return self._active

    def pending_count(self) -> int:
        """Requests in the scheduler's queues, not yet executing."""
        return int(self.scheduler.inflight_count())

    def _enter(self) -> None:
        self._active += 1
        if self._idle is not None:
            self._idle.clear()

    def _leave(self) -> None:
        self._active -= 1
        if not self._active and self._idle is not None:
            self._idle.set()

    async def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until no request is in flight; return whether it happened.

        Call once the model no longer receives new requests (the repository
        routes them elsewhere); used by live reload and unload.
        """
        if not self._active:
            return True
        if self._idle is None:
            self._idle = asyncio.Event()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def unload(self) -> None:
        """Stop taking requests, fail queued ones, finalize and stop every instance."""
        self._stopping = True
        self.scheduler.stop(TritonError(Code.UNAVAILABLE, f"model {self.label} is unloading"))
        await asyncio.gather(*(inst.stop() for inst in self.instances), return_exceptions=True)

    # -- the request path --------------------------------------------------------------
    def submit(self, request: InferenceRequest, done: Done) -> Payload:
        """Start one request; ``done(response, None)`` or ``done(None, error)`` is called once, later
        (or at once, for a request refused before it is queued), on the event loop.

        The response's outputs are views of shared memory, valid until
        ``response.release()``; the request counts as active (:meth:`drain`)
        until then. Returns the request's payload: its ``cancel()`` is for a
        client that went away (see :meth:`on_cancel`).

        :raises TritonError: INVALID_ARG for a request that does not fit the
            config, UNSUPPORTED for a decoupled model (use :meth:`infer_stream`).
        """
        refuse_decoupled(self)
        if request.trace is not None:  # the trace extension sampled it: its times are to come
            request.trace.expects_model = True
        self._enter()
        try:
            payload = self._staging.stage(request, False, done)
        except BaseException:
            self._leave()
            raise
        payload.context.leave_on_release = True
        self.scheduler.enqueue(payload)
        return payload

    async def infer(self, request: InferenceRequest) -> InferenceResponse:
        """Run one request and return its (single) response; raises on error (see :meth:`submit`).

        :raises TritonError: as :meth:`submit`, or the backend's error.
        """
        future: asyncio.Future[InferenceResponse] = asyncio.get_running_loop().create_future()

        def done(response: InferenceResponse | None, error: BaseException | None) -> None:
            if future.cancelled():  # the caller went away: nothing will release it
                if response is not None:
                    response.release()
            elif error is not None:
                future.set_exception(error)
            else:
                future.set_result(response)  # type: ignore[arg-type]

        payload = self.submit(request, done)
        try:
            return await future
        except asyncio.CancelledError:  # the caller went away: so did its client
            payload.cancel()
            raise

    async def infer_stream(self, request: InferenceRequest) -> AsyncGenerator[InferenceResponse, None]:
        """Run one request and yield each response as it comes (decoupled models: zero or more).

        A caller that stops early (closes the iterator, or is cancelled) leaves no response
        behind: those already queued and those still to come are released at once; the
        request is cancelled (:meth:`on_cancel`).
        """
        self._enter()
        pending: PendingRequest | None = None
        payload: Payload | None = None
        finished = False
        try:
            payload = self._staging.stage(request, True)
            pending = payload.context
            self.scheduler.enqueue(payload)
            assert pending.queue is not None
            while True:
                response = await pending.queue.get()
                finished = response.final
                yield response
                if finished:
                    return
        finally:
            if pending is not None and not finished:  # the caller stopped before the final response
                request.cancelled = True
            if pending is not None and pending.queue is not None:
                queue, pending.queue = pending.queue, None  # later responses: released on arrival
                while not queue.empty():
                    queue.get_nowait().release()
            if payload is not None and not payload.final:
                payload.cancel()
            self._leave()

    def on_cancel(self, payload: Payload) -> None:
        """The client of ``payload`` (not final yet) cancelled it, went away or passed its deadline.

        Still in the scheduler's queue: dropped there and answered CANCELLED without
        running (Triton 2.51 runs it, its ``is_cancelled()`` true). Executing: the model
        instance's worker is told, and the model sees it through ``is_cancelled()``;
        the request then ends as the model ends it. Held elsewhere (a later request of a
        sequence waiting for its slot in the sequence batcher, a batch waiting in the rate
        limiter): looked for again, every :data:`CANCEL_RETRY_S` doubling up to
        :data:`CANCEL_RETRY_MAX_S`, until it runs (then the model is told) or ends.
        """
        payload.context.request.cancelled = True  # counted CANCELED however it ends
        self._cancel(payload, CANCEL_RETRY_S)

    def _cancel(self, payload: Payload, retry_s: float) -> None:
        if payload.final:
            return
        cancel = getattr(self.scheduler, "cancel", None)  # the default scheduler's and the dynamic batcher's
        if cancel is not None and cancel(payload):
            return
        for instance in self.instances:
            if instance.cancel(payload):
                return
        if not self._stopping:
            asyncio.get_running_loop().call_later(retry_s, self._cancel, payload, min(retry_s * 2, CANCEL_RETRY_MAX_S))

    # -- responses from the scheduler (ResponseHandler) ------------------------------------
    def on_response(
        self,
        payload: Payload,
        outputs: list[list[Any]],
        error: TritonError | None,
        parameters: dict[str, Any] | None,
        final: bool,
        worker: Any,
    ) -> None:
        """Build and deliver one response for ``payload`` (see :class:`~.scheduler.base.ResponseHandler`)."""
        pending: PendingRequest = payload.context
        request = pending.request
        releases: list[list[int]] = []
        if error is None:
            try:
                tensors = self._assembly.tensors(payload, pending, outputs, releases)
            except TritonError as exc:
                error = exc
                tensors = []
        else:
            tensors = []
        if final:
            payload.final = True
            pending.done_ns = time.perf_counter_ns()
            pending.error = error
            if error is not None:
                self._record(payload)
            elif payload.timings is not None:
                self._record(payload)
        pending.open_responses += 1
        response = InferenceResponse(
            self.name,
            self.version_text,
            request.id,
            tensors,
            dict(parameters) if parameters else {},
            error,
            final,
        )
        response._release = lambda: self._release(payload, worker, releases)
        if pending.queue is not None:
            pending.queue.put_nowait(response)
        elif pending.done is not None and final:
            done, pending.done = pending.done, None
            try:
                if error is None:
                    done(response, None)
                else:
                    response.release()  # its input blocks and regions
                    done(None, error)
            except Exception:  # the caller's bug: it must not be taken for the worker's
                log.exception("delivering a response of model %s failed", self.label)
        else:
            response.release()

    def on_executed(self, payload: Payload) -> None:
        """The execution of ``payload``'s batch returned: account it if its response came, or
        the run if the backend rescheduled it (Triton 2.51 counts every run of an iterative
        sequence's request as an inference)."""
        pending: PendingRequest = payload.context
        if payload.rescheduled:
            payload.rescheduled = False
            now = time.perf_counter_ns()
            self._record_success(payload, now - payload.arrival_ns)
            payload.arrival_ns = now  # queued anew for its next run, as Triton re-enqueues it
        elif payload.final and not pending.recorded:
            self._record(payload)

    def _record(self, payload: Payload) -> None:
        pending: PendingRequest = payload.context
        pending.recorded = True
        trace = pending.request.trace
        if trace is not None:  # the trace extension sampled it
            trace.model_times(self.version, payload.arrival_ns, payload.dispatch_ns, payload.timings, pending.done_ns)
        if pending.null or isinstance(pending.error, QueueFull):
            return  # a null request, or one refused before Triton would track it
        request_ns = pending.done_ns - payload.arrival_ns
        reason = failure_reason(pending.error, pending.request.cancelled)
        if reason is not None:
            self.stats.record_failure(request_ns, reason)
            return
        self._record_success(payload, request_ns)

    def _record_success(self, payload: Payload, request_ns: int) -> None:
        timings = payload.timings or (0, 0, 0)
        queue_ns = payload.dispatch_ns - payload.arrival_ns if payload.dispatch_ns else 0
        self.stats.record_success(payload.batch_size, request_ns, queue_ns, timings[0], timings[1], timings[2])

    def _release(self, payload: Payload, worker: Any, releases: list[list[int]]) -> None:
        pending: PendingRequest = payload.context
        if releases and worker is not None:
            worker.release(releases)
        pending.open_responses -= 1
        if payload.final and pending.open_responses == 0:
            blocks, pending.blocks = pending.blocks, []
            free_blocks(self.pool, blocks)
            if pending.regions:
                regions, pending.regions = pending.regions, []
                for region in regions:
                    region.release()
            if pending.leave_on_release:
                pending.leave_on_release = False
                self._leave()
