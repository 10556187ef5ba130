"""An ensemble model version: a model whose "backend" is the core running its steps.

``EnsembleModel`` is a :class:`~tritium.core.model.servable.Servable` (name,
version, config, readiness, statistics, ``submit`` / ``infer`` /
``infer_stream``) without any worker of its own. Each request is checked against the ensemble's config, then run by
an :class:`~.executor.EnsembleRun` whose steps call the composing models'
own request paths in-process (the route the BLS router takes too), so each
composing model counts its requests in its own statistics.

Statistics of the ensemble itself: one success (or failure, reason
``OTHER`` as in Triton) per request, ``inference_count`` by batch size,
``execution_count`` one per request, and the request's wall time as its
``compute_infer`` (Triton sums the composing models' compute times; here
the wall time of the graph, which includes queueing in the steps).

Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

from ..errors import Code, TritonError
from ..inference.request import InferenceRequest
from ..inference.response import InferenceResponse
from ..memory.staging import deliver_output, stage_input
from ..model.classification import classify_output
from ..model.servable import (
    Cancellable,
    Done,
    Servable,
    is_decoupled,
    model_label,
    platform_of,
    refuse_decoupled,
    submit_as_task,
)
from ..model.validation import ModelSignature, check_bytes_elements, check_input_bytes, validate_request
from ..observability.stats import ModelStats
from .executor import EnsembleRun
from .validation import step_version, steps_of

__all__ = ["EnsembleModel"]


class EnsembleModel:
    """One loaded version of an ensemble.

    :param name: the ensemble's name.
    :param version: its version number.
    :param path: its folder.
    :param config: its normalized config (JSON form; ``model_transaction_policy.decoupled``
        already set when a composing model is decoupled).
    :param lookup: ``(name, version) -> model``: the repository's lookup of ready models.
    :param labels: class labels per output name (``label_filename``), for the classification extension.
    """

    def __init__(
        self,
        name: str,
        version: int,
        path: str,
        config: dict[str, Any],
        lookup: Callable[[str, str], Servable],
        labels: dict[str, list[str]] | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.path = path
        self.config = config
        #: ``'name' version N`` for messages; what model metadata reports as ``platform`` (``ensemble``)
        self.label = model_label(name, version)
        self.platform = platform_of(config)
        self.lookup = lookup
        self.signature = ModelSignature(name, config)
        self.steps = steps_of(config)
        self.outputs = [str(o["name"]) for o in config.get("output", [])]
        self.decoupled = is_decoupled(config)
        self.stats = ModelStats(name, version)
        self.instances: list[Any] = []  # no instance of its own
        self.labels: dict[str, list[str]] = labels or {}
        self._stopping = False
        self._inflight = 0  # requests running through the steps

    def pending_count(self) -> int:
        """Triton's pending-request gauge of an ensemble: its requests running through the steps."""
        return self._inflight

    @property
    def ready(self) -> bool:
        """True while every composing model is loaded and ready (as Triton's ensemble readiness)."""
        if self._stopping:
            return False
        for step in self.steps:
            try:
                if not self.lookup(step.model_name, step_version(step)).ready:
                    return False
            except TritonError:
                return False
        return True

    async def unload(self) -> None:
        """Stop taking requests (the composing models are unloaded on their own)."""
        self._stopping = True

    @property
    def active(self) -> int:
        """Requests accepted and not yet answered."""
        return self._inflight

    async def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until no request is in flight; return whether it happened.

        Called by the repository once this version gets no new requests (live reload, unload).
        """
        deadline = time.monotonic() + timeout
        while self._inflight:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    # -- requests -------------------------------------------------------------------------------
    def _check(self, request: InferenceRequest) -> int:
        sig = self.signature
        batch_size = validate_request(sig, request)
        for inp in request.inputs:
            stage_input(inp)  # an input in a client's region: read once, then passed between steps
            if inp.data is None:
                raise TritonError(Code.INVALID_ARG, f"input '{inp.name}' has no data")
            view = memoryview(inp.data).cast("B")
            if sig.inputs[inp.name].datatype.is_bytes:
                check_bytes_elements(sig, request, inp, view)
            else:
                check_input_bytes(sig, request, inp, len(view))
        return batch_size

    def _deliver(self, tensor: Any, wanted: dict[str, int], regions: dict[str, Any]) -> Any:
        """An ensemble output as the client asked for it: classified, or written into its region."""
        if tensor.name in wanted:
            return classify_output(
                tensor, wanted[tensor.name], self.signature.max_batch_size > 0, self.labels.get(tensor.name, ())
            )
        if tensor.name in regions:
            return deliver_output(regions[tensor.name], tensor)
        return tensor

    def submit(self, request: InferenceRequest, done: Done) -> Cancellable:
        """Start one request (:meth:`infer` as a task); ``done(response, None)`` or ``done(None, error)``
        is called once, on the event loop."""
        return submit_as_task(self.infer, request, done)

    async def infer(self, request: InferenceRequest) -> InferenceResponse:
        """Run one request through the steps and return the ensemble's single response.

        :raises TritonError: UNSUPPORTED for a decoupled ensemble (Triton's
            message), INVALID_ARG for a request that does not fit the
            ensemble's config, or the first step's error (step named).
        """
        refuse_decoupled(self)
        final: InferenceResponse | None = None
        async for response in self.infer_stream(request):
            if response.error is not None:
                raise response.error
            if response.outputs:
                if final is not None:
                    final.release()
                final = response
            else:
                response.release()
        if final is None:
            raise TritonError(Code.INTERNAL, f"in ensemble '{self.name}', no response was produced")
        return final

    async def infer_stream(self, request: InferenceRequest) -> AsyncGenerator[InferenceResponse, None]:
        """Run one request; yield each ensemble response, then a final one.

        A decoupled ensemble yields a response per completed set of outputs
        and ends with a flags-only final response; otherwise its one
        response is final. Errors come as a final response with ``error`` set.
        """
        start = time.perf_counter_ns()
        if self._stopping:
            raise TritonError(Code.UNAVAILABLE, f"model {self.label} is unloading")
        batch_size = self._check(request)
        run = EnsembleRun(self.name, self.steps, self.outputs, self.lookup, request)
        wanted = {o.name: o.classification for o in request.outputs if o.classification > 0}
        regions = {o.name: o.shared_memory for o in request.outputs if o.shared_memory is not None}
        for ref in regions.values():
            ref.region.acquire()  # it stays open until the response is written, even if unregistered
        self._inflight += 1
        pending: InferenceResponse | None = None
        ok = False
        responses = run.responses()
        try:
            try:
                async for response in responses:
                    response.model_version = str(self.version)
                    if wanted or regions:
                        try:
                            response.outputs = [self._deliver(t, wanted, regions) for t in response.outputs]
                        except TritonError:
                            response.release()
                            raise
                    if not self.decoupled:
                        if pending is not None:  # a graph that answered twice: keep the last
                            pending.release()
                        pending = response
                        continue
                    response.final = False
                    yield response
            except TritonError as exc:
                self.stats.record_failure(time.perf_counter_ns() - start, "OTHER")
                yield InferenceResponse(self.name, str(self.version), request.id, error=exc, final=True)
                return
            ok = True
        finally:
            self._inflight -= 1
            for ref in regions.values():
                ref.region.release()
            await responses.aclose()  # cancels the steps still running when the caller went away
            if not ok and pending is not None:
                pending.release()
        elapsed = time.perf_counter_ns() - start
        if pending is None and not self.decoupled:
            self.stats.record_failure(elapsed, "OTHER")
            error = TritonError(Code.INTERNAL, f"in ensemble '{self.name}', no response was produced")
            yield InferenceResponse(self.name, str(self.version), request.id, error=error, final=True)
            return
        self.stats.record_execution(batch_size, 0, elapsed, 0)
        self.stats.record_success(batch_size, elapsed, 0, 0, elapsed, 0)
        if pending is not None:
            pending.final = True
            yield pending
        else:  # a decoupled ensemble ends with the final flag alone
            yield InferenceResponse(self.name, str(self.version), request.id, final=True)
