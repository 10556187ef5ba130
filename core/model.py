"""A loaded model version: its config, instances, scheduler, statistics and the request path.

``Model.infer`` is the core's request path for one model version:

1. check the request against the config (:mod:`.validation`);
2. write every input's bytes once into the core's arena (an input in a
   client's registered system shared-memory region is not copied: its
   descriptor goes to the worker, which maps the region itself; an input in
   a CUDA region is copied device→host once, into the arena);
3. hand the payload to the scheduler, which sends it to a free instance;
4. turn the worker's RESPONSE frame into an :class:`InferenceResponse`
   whose outputs are views of shared memory (classification applied here;
   an output asked into a CUDA region is copied host→device once, here);
5. account statistics when the execution's timings arrive.

Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence


from .classification import classify
from .errors import Code, TritonError
from .memory.arena import EMPTY_SEGMENT, Block
from .memory.cuda import CudaRef
from .memory.pool import SharedBlock, TensorPool
from .memory.shm_region import RegisteredRegion, ShmRef, output_region_too_small
from .model_batching import BatcherServices
from .model_instance import ModelInstance
from .request import InferenceRequest, InferInput
from .reshape import reshapes
from .response import InferenceResponse, OutputTensor
from .scheduler.base import Payload, QueueFull, Rejected
from .scheduler.default import DefaultScheduler
from .scheduler.dynamic_batcher import DynamicBatcher
from .scheduler.sequence_batcher import SequenceBatcher
from .stats import ModelStats
from .tensor import tensor_from_buffer
from .types import by_config_name, by_name, element_count
from .validation import ModelSignature, check_bytes_elements, check_input_bytes, validate_request

log = logging.getLogger("tritium.model")

__all__ = ["Model", "ModelState", "Done"]

#: receives a request's final response, or the error it failed with: ``done(response, None)`` /
#: ``done(None, error)``
Done = Callable[["InferenceResponse | None", "BaseException | None"], None]


class ModelState:
    """Triton's model version states, as the repository index names them."""

    READY = "READY"
    UNAVAILABLE = "UNAVAILABLE"
    LOADING = "LOADING"
    UNLOADING = "UNLOADING"


@dataclass(slots=True)
class _Pending:
    """Per-request state of a payload (what :class:`Payload.context` holds)."""

    request: InferenceRequest
    blocks: list[Block | SharedBlock]
    #: gets the final response (or the error) of a request that is not streamed, once
    done: "Done | None"
    queue: asyncio.Queue[InferenceResponse] | None
    classification: dict[str, int] = field(default_factory=dict)
    open_responses: int = 0
    done_ns: int = 0
    error: TritonError | None = None
    recorded: bool = False
    regions: list[RegisteredRegion] = field(default_factory=list)  # registered regions in use
    #: called with each implicit-state output ``(name, datatype, shape, bytes)`` (sequence batcher)
    on_state: Any = None
    #: a null request of the sequence batcher (fills an idle slot; its response is dropped, not counted)
    null: bool = False
    #: the request stops counting as active (:meth:`Model.drain`) when its response is released
    leave_on_release: bool = False


class Model(BatcherServices):
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
        self.signature = ModelSignature(name, config)
        #: the config's ``reshape`` of inputs (dims -> reshape) and outputs (back); None: none
        self._input_reshape = reshapes(config, "input")
        self._output_reshape = reshapes(config, "output")
        self.labels = labels
        self.pool = pool
        self.stats = ModelStats(name, version)
        self.instances: list[ModelInstance] = []
        self.decoupled = bool((config.get("model_transaction_policy") or {}).get("decoupled", False))
        seq = config.get("sequence_batching")
        states = (seq or {}).get("state", [])
        #: implicit-state outputs, and those of them the client cannot see (not in the config's outputs)
        self.state_outputs = {str(st["output_name"]) for st in states}
        self._hidden_outputs = self.state_outputs - {str(o["name"]) for o in config.get("output", [])}
        self.scheduler = self._make_scheduler(config)
        self._stopping = False
        self._active = 0  # requests between infer() and their final response
        self._idle: asyncio.Event | None = None

    def _make_scheduler(self, config: dict[str, Any]) -> Any:
        """The scheduler the config asks for: sequence batcher, dynamic batcher or the default."""
        label = f"'{self.name}' version {self.version}"

        def executed(size: int, t: Sequence[int]) -> None:
            self.stats.record_execution(size, t[0], t[1], t[2])

        def available(inst: Any) -> bool:
            return bool(inst.available)

        if config.get("sequence_batching") is not None:
            return SequenceBatcher(self.name, label, config, executed, available, self)
        if config.get("dynamic_batching") is not None and int(config.get("max_batch_size", 0)) > 0:
            return DynamicBatcher(label, config, executed, available, self.gather)
        return DefaultScheduler(label, executed, available)

    # -- description -------------------------------------------------------------
    @property
    def label(self) -> str:
        """``'name' version N`` for messages."""
        return f"'{self.name}' version {self.version}"

    @property
    def platform(self) -> str:
        """What model metadata reports as ``platform`` (the backend when no platform is set)."""
        return str(self.config.get("platform") or self.config.get("backend") or "")

    @property
    def ready(self) -> bool:
        """True while every instance can take requests."""
        return not self._stopping and bool(self.instances) and all(i.available for i in self.instances)

    def tensor_metadata(self, which: str) -> list[dict[str, Any]]:
        """Inputs or outputs (``which`` = ``"input"``/``"output"``) as model metadata lists them."""
        batch = [-1] if self.signature.max_batch_size > 0 else []
        out = []
        for item in self.config.get(which, []):
            dt = by_name_config(item["data_type"])
            out.append({"name": item["name"], "datatype": dt, "shape": batch + [int(d) for d in item.get("dims", [])]})
        return out

    # -- instances -----------------------------------------------------------------
    def instance_ready(self, instance: ModelInstance) -> None:
        """Callback: ``instance`` can take batches."""
        if not self._stopping:
            self.scheduler.add_executor(instance)  # type: ignore[arg-type]

    def instance_lost(self, instance: ModelInstance, how: str) -> None:
        """Callback: ``instance``'s worker is gone (``how``)."""
        del how
        self.scheduler.remove_executor(instance)  # type: ignore[arg-type]

    @property
    def active(self) -> int:
        """Requests accepted and not yet answered (a response counts until it is released)."""
        return self._active

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
        except asyncio.TimeoutError:
            return False
        return True

    async def unload(self) -> None:
        """Stop taking requests, fail queued ones, finalize and stop every instance."""
        self._stopping = True
        self.scheduler.stop(TritonError(Code.UNAVAILABLE, f"model {self.label} is unloading"))
        await asyncio.gather(*(inst.stop() for inst in self.instances), return_exceptions=True)

    # -- the request path --------------------------------------------------------------
    def _prepare(self, request: InferenceRequest, stream: bool, done: "Done | None" = None) -> Payload:
        sig = self.signature
        batch_size = validate_request(sig, request)
        blocks: list[Block | SharedBlock] = []
        regions: list[RegisteredRegion] = []
        wire_inputs = []
        shm_outputs: dict[str, list[int]] = {}
        itemsizes = sig.itemsizes
        shared = request.buffer
        try:
            for inp in request.inputs:
                if inp.shared_memory is not None:
                    wire_inputs.append(self._region_input(request, inp, blocks, regions))
                    continue
                data = inp.data
                if data is None:
                    raise TritonError(Code.INVALID_ARG, f"input '{inp.name}' has no data")
                view = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
                nbytes = len(view)
                itemsize = itemsizes[inp.name]
                if not itemsize:
                    check_bytes_elements(sig, request, inp, view)
                elif nbytes != element_count(inp.shape) * itemsize:
                    check_input_bytes(sig, request, inp, nbytes)  # raises Triton's message
                if shared is not None and inp.buffer_offset >= 0:  # already in the arena: no copy
                    shared.acquire()
                    blocks.append(shared)
                    block = shared.block
                    offset = block.offset + inp.buffer_offset
                else:
                    block = self.pool.allocate(nbytes)
                    blocks.append(block)
                    if nbytes:
                        block.view[:] = view
                    offset = block.offset
                seg_id = block.segment.id if block.segment is not None else EMPTY_SEGMENT
                wire_inputs.append([inp.name, inp.datatype, list(inp.shape), seg_id, offset, nbytes])
            outputs = request.outputs
            classification: dict[str, int] = {}
            for out in outputs:
                ref = out.shared_memory
                if ref is not None:  # a CUDA region's output comes through the arena (copied in on_response)
                    ref.region.acquire()
                    regions.append(ref.region)
                    if isinstance(ref, ShmRef):
                        shm_outputs[out.name] = list(ref.descriptor)
                if out.parameters and out.classification > 0:
                    classification[out.name] = out.classification
        except BaseException:
            self._free_blocks(blocks)
            for region in regions:
                region.release()
            raise
        if self._input_reshape is not None:  # the model sees the reshaped shapes
            for wire_input in wire_inputs:
                reshape = self._input_reshape.get(wire_input[0])
                if reshape is not None:
                    wire_input[2] = reshape.apply(wire_input[2])
        params = request.parameters
        if params:
            flags = (_SEQUENCE_START if params.get("sequence_start") else 0) | (
                _SEQUENCE_END if params.get("sequence_end") else 0
            )
            timeout, priority = params.get("timeout", 0), params.get("priority", 0)
            wire = {
                "id": request.id,
                "corr": params.get("sequence_id", 0),
                "flags": flags,
                "timeout": timeout if type(timeout) is int else 0,
                "priority": priority if type(priority) is int else 0,
                "inputs": wire_inputs,
                "outputs": [o.name for o in outputs],
                "params": _backend_parameters(params),
            }
        else:
            wire = {
                "id": request.id, "corr": 0, "flags": 0, "timeout": 0, "priority": 0,
                "inputs": wire_inputs, "outputs": [o.name for o in outputs], "params": {},
            }
        if shm_outputs:
            wire["shm_outputs"] = shm_outputs
        pending = _Pending(request, blocks, done, asyncio.Queue() if stream else None, classification, regions=regions)
        return Payload(wire, batch_size, self, pending)

    def _region_input(
        self,
        request: InferenceRequest,
        inp: InferInput,
        blocks: list[Block | SharedBlock],
        regions: list[RegisteredRegion],
    ) -> list[Any]:
        """The wire descriptor of an input in a registered region (system: read in place by the
        worker; CUDA: copied device→host once, into the arena)."""
        sig = self.signature
        ref = inp.shared_memory
        is_bytes = not sig.itemsizes[inp.name]
        if isinstance(ref, CudaRef):
            if not is_bytes:
                check_input_bytes(sig, request, inp, ref.byte_size)
            block = self.pool.allocate(ref.byte_size)
            blocks.append(block)
            ref.copy_to_host(inp.name, block.view)
            if is_bytes:
                check_bytes_elements(sig, request, inp, block.view)
            return [inp.name, inp.datatype, list(inp.shape), *block.descriptor]
        assert ref is not None
        if is_bytes:
            check_bytes_elements(sig, request, inp, ref.region.read(ref.offset, ref.byte_size))
        else:
            check_input_bytes(sig, request, inp, ref.byte_size)
        ref.region.acquire()
        regions.append(ref.region)
        return [inp.name, inp.datatype, list(inp.shape), *ref.descriptor]

    def submit(self, request: InferenceRequest, done: "Done") -> None:
        """Start one request; ``done(response, None)`` or ``done(None, error)`` is called once, later
        (or at once, for a request refused before it is queued), on the event loop.

        The response's outputs are views of shared memory, valid until
        ``response.release()``; the request counts as active (:meth:`drain`)
        until then.

        :raises TritonError: INVALID_ARG for a request that does not fit the
            config, UNSUPPORTED for a decoupled model (use :meth:`infer_stream`).
        """
        if self.decoupled:
            raise TritonError(
                Code.UNSUPPORTED,
                "ModelInfer RPC doesn't support models with decoupled transaction policy",
            )
        if request.trace is not None:  # the trace extension sampled it: its times are to come
            request.trace.expects_model = True
        self._enter()
        try:
            payload = self._prepare(request, stream=False, done=done)
        except BaseException:
            self._leave()
            raise
        payload.context.leave_on_release = True
        self.scheduler.enqueue(payload)

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

        self.submit(request, done)
        return await future

    async def infer_stream(self, request: InferenceRequest):  # type: ignore[no-untyped-def]
        """Run one request and yield each response as it comes (decoupled models: zero or more).

        A caller that stops early (closes the iterator, or is cancelled) leaves no response
        behind: those already queued and those still to come are released at once.
        """
        self._enter()
        pending: _Pending | None = None
        try:
            payload = self._prepare(request, stream=True)
            pending = payload.context
            self.scheduler.enqueue(payload)
            assert pending.queue is not None
            while True:
                response = await pending.queue.get()
                yield response
                if response.final:
                    return
        finally:
            if pending is not None and pending.queue is not None:
                queue, pending.queue = pending.queue, None  # later responses: released on arrival
                while not queue.empty():
                    queue.get_nowait().release()
            self._leave()

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
        pending: _Pending = payload.context
        request = pending.request
        releases: list[list[int]] = []
        tensors: list[OutputTensor] = []
        if error is None:
            try:
                shm_outputs = payload.wire.get("shm_outputs")
                resolve = self.pool.segments.resolve
                output_reshape = self._output_reshape
                for name, datatype, shape, seg_id, offset, nbytes, release in outputs:
                    if release >= 0:
                        releases.append([seg_id, release])
                    if output_reshape is not None and name in output_reshape:  # back to the config's dims
                        reshaped = output_reshape[name].apply(shape)
                        if element_count(reshaped) != element_count(shape):
                            raise TritonError(
                                Code.INTERNAL,
                                f"output '{name}' of model {self.label} has shape {list(shape)}, which does "
                                f"not fit its reshape to {reshaped}",
                            )
                        shape = reshaped
                    if shm_outputs and name in shm_outputs:  # written into the client's region
                        region_id, region_offset, byte_size = shm_outputs[name]
                        if seg_id != region_id or offset != region_offset or not 0 <= nbytes <= byte_size:
                            raise TritonError(Code.INTERNAL, f"malformed shared-memory output '{name}' from model {self.label}")
                        ref = next(o.shared_memory for o in request.outputs if o.name == name)
                        tensor = OutputTensor(name, datatype, list(shape), b"", {})
                        tensor.shared_memory_region = ref.region.name if ref is not None else ""
                        tensors.append(tensor)
                        continue
                    data = resolve(seg_id, offset, nbytes)
                    if pending.on_state is not None and name in self.state_outputs:
                        pending.on_state(name, datatype, list(shape), bytes(data))
                    if self._hidden_outputs and name in self._hidden_outputs:
                        continue
                    cuda_ref = self._cuda_output(request, name) if pending.regions else None
                    if cuda_ref is not None:  # asked into a CUDA region: one host→device copy
                        if nbytes > cuda_ref.byte_size:
                            raise output_region_too_small(name, cuda_ref.byte_size, nbytes)
                        cuda_ref.copy_from_host(name, data)
                        tensor = OutputTensor(name, datatype, list(shape), b"", {})
                        tensor.shared_memory_region = cuda_ref.region.name
                        tensors.append(tensor)
                        continue
                    tensors.append(OutputTensor(name, datatype, shape, data, {}, (seg_id, offset, nbytes)))
                if pending.classification:
                    tensors = [self._classify(t, pending.classification) for t in tensors]
            except TritonError as exc:
                error = exc
                tensors = []
            except (ValueError, TypeError) as exc:
                error = TritonError(Code.INTERNAL, f"malformed response from model {self.label}: {exc}")
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

    @staticmethod
    def _cuda_output(request: InferenceRequest, name: str) -> CudaRef | None:
        """The CUDA-region window output ``name`` was asked into, if any."""
        for out in request.outputs:
            if out.name == name:
                return out.shared_memory if isinstance(out.shared_memory, CudaRef) else None
        return None

    def on_executed(self, payload: Payload) -> None:
        """The execution of ``payload``'s batch returned: account it if its response came, or
        the run if the backend rescheduled it (Triton 2.51 counts every run of an iterative
        sequence's request as an inference)."""
        pending: _Pending = payload.context
        if payload.rescheduled:
            payload.rescheduled = False
            now = time.perf_counter_ns()
            self._record_success(payload, now - payload.arrival_ns)
            payload.arrival_ns = now  # queued anew for its next run, as Triton re-enqueues it
        elif payload.final and not pending.recorded:
            self._record(payload)

    def _record(self, payload: Payload) -> None:
        pending: _Pending = payload.context
        pending.recorded = True
        trace = pending.request.trace
        if trace is not None:  # the trace extension sampled it
            trace.model_times(self.version, payload.arrival_ns, payload.dispatch_ns, payload.timings, pending.done_ns)
        if pending.null or isinstance(pending.error, QueueFull):
            return  # a null request, or one refused before Triton would track it
        request_ns = pending.done_ns - payload.arrival_ns
        if pending.error is not None:
            self.stats.record_failure(request_ns, "REJECTED" if isinstance(pending.error, Rejected) else "BACKEND")
            return
        self._record_success(payload, request_ns)

    def _record_success(self, payload: Payload, request_ns: int) -> None:
        timings = payload.timings or (0, 0, 0)
        queue_ns = payload.dispatch_ns - payload.arrival_ns if payload.dispatch_ns else 0
        self.stats.record_success(payload.batch_size, request_ns, queue_ns, timings[0], timings[1], timings[2])

    def _release(self, payload: Payload, worker: Any, releases: list[list[int]]) -> None:
        pending: _Pending = payload.context
        if releases and worker is not None:
            worker.release(releases)
        pending.open_responses -= 1
        if payload.final and pending.open_responses == 0:
            blocks, pending.blocks = pending.blocks, []
            self._free_blocks(blocks)
            if pending.regions:
                regions, pending.regions = pending.regions, []
                for region in regions:
                    region.release()
            if pending.leave_on_release:
                pending.leave_on_release = False
                self._leave()

    def _free_blocks(self, blocks: list[Any]) -> None:
        for block in blocks:
            if isinstance(block, SharedBlock):
                block.release()
            else:
                self.pool.free(block)

    def _classify(self, tensor: OutputTensor, wanted: dict[str, int]) -> OutputTensor:
        k = wanted.get(tensor.name)
        if not k:
            return tensor
        dt = by_name(tensor.datatype)
        if dt is None or dt.is_bytes:
            raise TritonError(Code.INVALID_ARG, f"classification is not supported for output '{tensor.name}' of type BYTES")
        array = tensor_from_buffer(dt, tensor.shape, tensor.data)
        shape, data = classify(
            array, k, self.signature.max_batch_size > 0, self.labels.get(tensor.name, [])
        )
        return OutputTensor(tensor.name, "BYTES", shape, data, dict(tensor.parameters))


def by_name_config(config_name: str) -> str:
    """KServe datatype name of a model-config datatype name (``TYPE_FP32`` -> ``FP32``)."""
    dt = by_config_name(config_name)
    return dt.name if dt is not None else "INVALID"


_SEQUENCE_START, _SEQUENCE_END = 1, 2  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_START / _END
#: request parameters the server itself consumes (Triton keeps them from backends too)
RESERVED_PARAMETERS = frozenset(
    {"sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "binary_data_output", "headers"}
)


def _backend_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """The request parameters a backend sees: scalars, without the ones the server consumes."""
    return {
        k: v
        for k, v in parameters.items()
        if k not in RESERVED_PARAMETERS and not k.startswith("triton_") and isinstance(v, (bool, int, float, str))
    }
