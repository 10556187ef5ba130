"""One ensemble request: its steps run as a data-flow graph.

Every step runs as soon as all of its input tensors exist. A tensor value
carries an *iteration*: the ensemble's inputs have iteration ``()``; the k-th
response of a decoupled step run at iteration ``i`` writes its outputs at
``i + (k,)``; a step that is not decoupled keeps its inputs' iteration. A
step fires once for every combination of input values whose iterations are
compatible (one a prefix of the other), when the last of them arrives, so a
decoupled step's responses flow down the graph one by one, and a graph
without decoupled models runs every step exactly once. The ensemble's own
response is produced whenever a compatible set of its outputs exists.

Tensors pass between steps as views of the shared memory the producing
step's response lies in (the worker's output arena); the next model's
request path copies them once into the core's arena for its worker. Step
responses are released when the ensemble request is finished and every
response built from them has been released.

The first failing step fails the whole request (its other steps are
cancelled) with ``in ensemble '<name>', step <i> (model '<m>'): <error>``.

Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import Code, TritonError
from ..inference.request import InferenceRequest, InferInput
from ..inference.response import InferenceResponse, OutputTensor
from .validation import Step, step_version

if TYPE_CHECKING:  # pragma: no cover
    from ..model.servable import Servable

__all__ = ["EnsembleRun", "Value"]

Iteration = tuple[int, ...]


@dataclass(slots=True)
class Value:
    """One value of an ensemble tensor."""

    iteration: Iteration
    datatype: str
    shape: list[int]
    data: Any
    #: ``(segment id, offset, nbytes)`` when the bytes lie in a shared-memory segment
    location: tuple[int, int, int] | None = None


def _compatible(a: Iteration, b: Iteration) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


class EnsembleRun:
    """The state of one ensemble request.

    :param name: the ensemble's name (for messages).
    :param steps: its steps.
    :param outputs: the ensemble outputs to return (ensemble tensor names).
    :param lookup: ``(model name, version) -> model`` (the repository's lookup).
    :param request: the ensemble request (inputs already validated).
    """

    def __init__(
        self,
        name: str,
        steps: list[Step],
        outputs: list[str],
        lookup: Callable[[str, str], Servable],
        request: InferenceRequest,
    ) -> None:
        self.name = name
        self.steps = steps
        self.outputs = outputs
        self.lookup = lookup
        self.request = request
        self.values: dict[str, list[Value]] = {}
        self.consumers: dict[str, list[Step]] = {}
        for step in steps:
            for tensor in set(step.input_map.values()):
                self.consumers.setdefault(tensor, []).append(step)
        self.queue: asyncio.Queue[InferenceResponse | TritonError | None] = asyncio.Queue()
        self.tasks: set[asyncio.Task[None]] = set()
        self.held: list[InferenceResponse] = []  # step responses whose memory the values point into
        self.open = 0  # ensemble responses handed out and not yet released
        self.finished = False
        self.error: TritonError | None = None

    # -- driving ---------------------------------------------------------------------------
    async def responses(self) -> AsyncGenerator[InferenceResponse, None]:
        """Run the graph; yield each ensemble response (raises the first step error)."""
        try:
            for inp in self.request.inputs:
                self._put(inp.name, Value((), inp.datatype, list(inp.shape), inp.data))
            self._check_idle()
            while True:
                item = await self.queue.get()
                if item is None:
                    return
                if isinstance(item, TritonError):
                    raise item
                yield item
        finally:
            for task in list(self.tasks):
                task.cancel()
            self.finished = True
            self._maybe_free()

    def _check_idle(self) -> None:
        if not self.tasks:
            self.queue.put_nowait(None)

    def _put(self, tensor: str, value: Value) -> None:
        """A new value of ``tensor``: fire every step (and the ensemble output) it completes."""
        self.values.setdefault(tensor, []).append(value)
        for step in self.consumers.get(tensor, []):
            for iteration, inputs in self._combinations(set(step.input_map.values()), tensor, value):
                task = asyncio.ensure_future(self._run_step(step, iteration, inputs))
                self.tasks.add(task)
                task.add_done_callback(self._step_done)
        if tensor in self.outputs:
            for _iteration, inputs in self._combinations(set(self.outputs), tensor, value):
                self._emit(inputs)

    def _combinations(self, names: set[str], new: str, value: Value) -> list[tuple[Iteration, dict[str, Value]]]:
        others = sorted(names - {new})
        pools = []
        for other in others:
            pool = [v for v in self.values.get(other, []) if _compatible(v.iteration, value.iteration)]
            if not pool:
                return []
            pools.append(pool)
        out = []
        for combo in itertools.product(*pools):
            chosen = [value, *combo]
            if all(_compatible(a.iteration, b.iteration) for a, b in itertools.combinations(chosen, 2)):
                iteration = max((v.iteration for v in chosen), key=len)
                out.append((iteration, {new: value, **dict(zip(others, combo))}))
        return out

    def _step_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and self.error is None:
            self.error = (
                exc
                if isinstance(exc, TritonError)
                else TritonError(Code.INTERNAL, f"in ensemble '{self.name}', {type(exc).__name__}: {exc}")
            )
            self.queue.put_nowait(self.error)
            for other in list(self.tasks):
                other.cancel()
            return
        if self.error is None:
            self._check_idle()

    # -- steps -----------------------------------------------------------------------------
    async def _run_step(self, step: Step, iteration: Iteration, inputs: Mapping[str, Value]) -> None:
        try:
            model = self.lookup(step.model_name, step_version(step))
            request = InferenceRequest(
                step.model_name,
                step_version(step),
                self.request.id,
                [
                    InferInput(model_input, inputs[tensor].datatype, inputs[tensor].shape, inputs[tensor].data)
                    for model_input, tensor in step.input_map.items()
                ],
                [],
                dict(self.request.parameters),
            )
            if getattr(model, "decoupled", False):
                k = 0
                async for response in model.infer_stream(request):
                    if response.error is not None:
                        response.release()
                        raise response.error
                    if response.outputs:
                        self._take(step, response, iteration + (k,))
                        k += 1
                    else:
                        response.release()
            else:
                self._take(step, await model.infer(request), iteration)
        except TritonError as exc:
            raise TritonError(exc.code, f"in ensemble '{self.name}', {step.label}: {exc.message}") from None

    def _take(self, step: Step, response: InferenceResponse, iteration: Iteration) -> None:
        if self.finished:
            response.release()
            return
        self.held.append(response)
        for out in response.outputs:
            tensor = step.output_map.get(out.name)
            if tensor is not None:
                self._put(tensor, Value(iteration, out.datatype, list(out.shape), out.data, out.location))

    # -- ensemble responses -------------------------------------------------------------------
    def _emit(self, values: Mapping[str, Value]) -> None:
        wanted = [o.name for o in self.request.outputs] or self.outputs
        tensors = [
            OutputTensor(n, values[n].datatype, list(values[n].shape), values[n].data, {}, values[n].location)
            for n in wanted
        ]
        response = InferenceResponse(self.name, "", self.request.id, tensors)
        self.open += 1
        response._release = self._released
        self.queue.put_nowait(response)

    def _released(self) -> None:
        self.open -= 1
        self._maybe_free()

    def _maybe_free(self) -> None:
        if self.finished and self.open == 0:
            held, self.held = self.held, []
            for response in held:
                response.release()
