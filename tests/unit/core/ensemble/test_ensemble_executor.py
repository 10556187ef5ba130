"""Unit tests of the ensemble step graph with in-process fake models (no workers)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from tritium.core.ensemble.executor import EnsembleRun
from tritium.core.ensemble.validation import steps_of
from tritium.core.errors import Code, TritonError
from tritium.core.inference.request import InferenceRequest, InferInput
from tritium.core.inference.response import InferenceResponse, OutputTensor


class FakeModel:
    """OUTPUT0 = f(INPUT0[, INPUT1]); decoupled models send ``repeat`` responses (k+1) * f(x)."""

    def __init__(self, fn: Any, decoupled: bool = False, repeat: int = 3, delay: float = 0.0) -> None:
        self.fn, self.decoupled, self.repeat, self.delay = fn, decoupled, repeat, delay
        self.calls = 0
        self.released = 0
        self.active = 0
        self.max_active = 0  # most calls in progress at once

    def _response(self, request: InferenceRequest, scale: float = 1.0) -> InferenceResponse:
        arrays = [np.frombuffer(bytes(i.data), np.float32) for i in sorted(request.inputs, key=lambda i: i.name)]
        out = (self.fn(*arrays) * scale).astype(np.float32)
        response = InferenceResponse(
            "fake", "1", request.id, [OutputTensor("OUTPUT0", "FP32", [out.size], out.tobytes())]
        )
        response._release = self._count_release
        return response

    def _count_release(self) -> None:
        self.released += 1

    async def infer(self, request: InferenceRequest) -> InferenceResponse:
        self.calls += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.active -= 1
        return self._response(request)

    async def infer_stream(self, request: InferenceRequest) -> AsyncIterator[InferenceResponse]:
        self.calls += 1
        for k in range(self.repeat):
            await asyncio.sleep(self.delay)
            yield self._response(request, k + 1)
        yield InferenceResponse("fake", "1", request.id, final=True)


def _config(steps: list[tuple[str, dict[str, str], dict[str, str]]]) -> dict[str, Any]:
    return {
        "ensemble_scheduling": {
            "step": [{"model_name": m, "model_version": -1, "input_map": i, "output_map": o} for m, i, o in steps]
        }
    }


def _ensemble_config(steps: list[tuple[str, dict[str, str], dict[str, str]]]) -> dict[str, Any]:
    """A whole ensemble config (IN FP32 [2] -> OUT FP32 [2], no batching) over ``steps``."""
    return {
        "name": "ens",
        "platform": "ensemble",
        "max_batch_size": 0,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [2]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]}],
        **_config(steps),
    }


def _run(models: dict[str, FakeModel], steps, x: np.ndarray) -> list[list[float]]:
    async def go() -> list[list[float]]:
        request = InferenceRequest("ens", inputs=[InferInput.from_numpy("IN", x)])
        run = EnsembleRun("ens", steps_of(_config(steps)), ["OUT"], lambda name, version: models[name], request)
        out = []
        async for response in run.responses():
            out.append(np.frombuffer(bytes(response.outputs[0].data), np.float32).tolist())
            response.release()
        return out

    return asyncio.run(go())


X = np.array([1.0, 2.0], np.float32)


def test_diamond_runs_each_step_once():
    models = {"inc": FakeModel(lambda a: a + 1), "add": FakeModel(lambda a, b: a + b)}
    steps = [
        ("inc", {"INPUT0": "IN"}, {"OUTPUT0": "l"}),
        ("inc", {"INPUT0": "IN"}, {"OUTPUT0": "r"}),
        ("add", {"INPUT0": "l", "INPUT1": "r"}, {"OUTPUT0": "OUT"}),
    ]
    assert _run(models, steps, X) == [[4.0, 6.0]]
    assert (models["inc"].calls, models["add"].calls) == (2, 1)
    assert models["inc"].released == 2 and models["add"].released == 1  # every step response freed


def test_independent_steps_run_concurrently():
    slow = FakeModel(lambda a: a, delay=0.3)
    models = {"slow": slow, "add": FakeModel(lambda a, b: a + b)}
    steps = [
        ("slow", {"INPUT0": "IN"}, {"OUTPUT0": "l"}),
        ("slow", {"INPUT0": "IN"}, {"OUTPUT0": "r"}),
        ("add", {"INPUT0": "l", "INPUT1": "r"}, {"OUTPUT0": "OUT"}),
    ]
    assert _run(models, steps, X) == [[2.0, 4.0]]
    assert slow.max_active == 2  # both slow steps were in progress at once


def test_each_response_of_a_decoupled_step_flows_down_the_graph():
    models = {"rep": FakeModel(lambda a: a, decoupled=True), "inc": FakeModel(lambda a: a + 1)}
    steps = [("rep", {"INPUT0": "IN"}, {"OUTPUT0": "mid"}), ("inc", {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})]
    assert _run(models, steps, X) == [[2.0, 3.0], [3.0, 5.0], [4.0, 7.0]]
    assert models["inc"].calls == 3


def test_decoupled_branch_joins_a_plain_branch_per_response():
    models = {
        "rep": FakeModel(lambda a: a, decoupled=True, repeat=2),
        "inc": FakeModel(lambda a: a + 1),
        "add": FakeModel(lambda a, b: a + b),
    }
    steps = [
        ("rep", {"INPUT0": "IN"}, {"OUTPUT0": "many"}),
        ("inc", {"INPUT0": "IN"}, {"OUTPUT0": "one"}),
        ("add", {"INPUT0": "many", "INPUT1": "one"}, {"OUTPUT0": "OUT"}),
    ]
    assert sorted(_run(models, steps, X)) == [[3.0, 5.0], [4.0, 7.0]]  # x + (x+1), 2x + (x+1)


def test_a_failing_step_names_itself_and_cancels_the_rest():
    class Failing(FakeModel):
        async def infer(self, request: InferenceRequest) -> InferenceResponse:
            raise TritonError(Code.INVALID_ARG, "bad things")

    slow = FakeModel(lambda a: a, delay=5)
    models = {"fail": Failing(lambda a: a), "slow": slow, "add": FakeModel(lambda a, b: a + b)}
    steps = [
        ("slow", {"INPUT0": "IN"}, {"OUTPUT0": "l"}),
        ("fail", {"INPUT0": "IN"}, {"OUTPUT0": "r"}),
        ("add", {"INPUT0": "l", "INPUT1": "r"}, {"OUTPUT0": "OUT"}),
    ]
    with pytest.raises(TritonError) as err:
        _run(models, steps, X)
    assert err.value.code == Code.INVALID_ARG
    assert err.value.message == "in ensemble 'ens', step 1 (model 'fail'): bad things"


def test_ensemble_ready_only_while_every_composing_model_is():
    from tritium.core.ensemble import EnsembleModel

    class Ready:
        ready = True

    models: dict[str, Any] = {"a": Ready(), "b": Ready()}

    def lookup(name: str, version: str) -> Any:
        if name not in models:
            raise TritonError(Code.NOT_FOUND, f"Request for unknown model: '{name}' is not found")
        return models[name]

    config = _ensemble_config(
        [("a", {"INPUT0": "IN"}, {"OUTPUT0": "mid"}), ("b", {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})]
    )
    ensemble = EnsembleModel("ens", 1, "/nowhere", config, lookup)
    assert ensemble.ready
    models["b"] = type("Down", (), {"ready": False})()
    assert not ensemble.ready
    del models["b"]
    assert not ensemble.ready
    models["b"] = Ready()
    assert ensemble.ready
    asyncio.run(ensemble.unload())
    assert not ensemble.ready


def test_a_cancelled_ensemble_request_cancels_its_steps():
    from tritium.core.ensemble import EnsembleModel

    slow = FakeModel(lambda a: a, delay=30)
    config = _ensemble_config([("slow", {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})])
    ensemble = EnsembleModel("ens", 1, "/nowhere", config, lambda name, version: slow)

    async def go() -> None:
        task = asyncio.ensure_future(ensemble.infer(InferenceRequest("ens", inputs=[InferInput.from_numpy("IN", X)])))
        while slow.active == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)  # let the step's cancellation run
        assert slow.active == 0 and ensemble.pending_count() == 0

    asyncio.run(go())
