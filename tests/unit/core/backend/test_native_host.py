"""NativeBackend in-process: C test backends against a recording response sink.

The host's edge cases (oddities.c), and one backend hosting many models and instances of one
library, executing on several threads at once (multi.c), as the worker runs them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.native import TEST_BACKENDS, build_backend, compiler
from tritium.core.backend.api import Backend, Model, ModelInstance, Request
from tritium.core.errors import Code, TritonError

CONFIG = {
    "name": "odd",
    "input": [{"name": "INPUT", "data_type": "TYPE_BF16", "dims": [-1]}],
    "output": [{"name": "OUT", "data_type": "TYPE_INT32", "dims": [2]}],
}


class Sink:
    """Records responses; output buffers are plain numpy arrays."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict[str, np.ndarray] | None, TritonError | None, Any, bool]] = []

    def output_buffer(self, request: Request, datatype: str, shape: Sequence[int]) -> np.ndarray:
        dtype = {"INT32": np.int32, "INT64": np.int64, "BF16": np.uint16}[datatype]
        return np.zeros(shape, dtype)

    def send_response(
        self,
        request: Request,
        outputs: Mapping[str, np.ndarray] | None,
        error: TritonError | None,
        parameters: Any,
        final: bool,
    ) -> None:
        self.sent.append((dict(outputs) if outputs else None, error, parameters, final))


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Any:
    compiler()
    from tritium.core.backend.native.host import NativeBackend

    library = build_backend(TEST_BACKENDS / "oddities.c", tmp_path_factory.mktemp("odd") / "libtriton_odd.so")
    native = NativeBackend(library, "odd")
    backend = Backend("odd", str(library.parent), {})
    native.TRITONBACKEND_Initialize(backend)
    model = Model("odd", 1, CONFIG, "/models/odd", backend, False)
    native.TRITONBACKEND_ModelInitialize(model)
    instance = ModelInstance("odd_0", "KIND_CPU", 0, model)
    native.TRITONBACKEND_ModelInstanceInitialize(instance)
    return native, instance


def execute(host: Any, request_id: str, inputs: dict[str, np.ndarray] | None = None) -> list[Any]:
    native, instance = host
    sink = Sink()
    request = Request(request_id, 0, 0, {}, inputs or {}, [], sink)
    native.TRITONBACKEND_ModelInstanceExecute(instance, [request])
    return sink.sent


def test_bytes_outputs_are_parsed_from_the_serialized_form(host: Any) -> None:
    [(outputs, error, _, final)] = execute(host, "bytes")
    assert error is None and final
    assert outputs is not None and outputs["OUT"].tolist() == [b"ab", b""]


def test_bf16_goes_through_as_raw_bits(host: Any) -> None:
    bits = np.array([0x3F80, 0xC000, 0x0000], np.uint16)  # 1.0, -2.0, 0.0
    [(outputs, error, _, _)] = execute(host, "bf16", {"INPUT": bits})
    assert error is None and outputs is not None
    assert outputs["OUT"].dtype == np.uint16 and outputs["OUT"].tolist() == [0x3F80, 0xC000, 0]


def test_buffers_are_the_workers_own_memory_no_copy(host: Any) -> None:
    data = np.array([1, 2, 3], np.uint16)
    [(outputs, error, _, _)] = execute(host, "addr", {"INPUT": data})
    assert error is None and outputs is not None
    input_address, output_address = outputs["OUT"].tolist()
    assert input_address == data.ctypes.data  # the input array itself (in the worker: a view of shared memory)
    assert output_address == outputs["OUT"].ctypes.data  # the array the sink handed out is what is sent


def test_a_wrong_output_buffer_size_is_an_invalid_argument(host: Any) -> None:
    [(outputs, error, _, final)] = execute(host, "size")
    assert outputs is None and final
    assert error is not None and error.code == Code.INVALID_ARG
    assert error.message == "output 'OUT': buffer of 4 bytes requested, but INT32 shape [2] needs 8"


def test_an_output_without_a_buffer_fails_the_send(host: Any) -> None:
    with pytest.raises(TritonError) as info:
        execute(host, "nobuffer")
    assert (info.value.code, info.value.message) == (
        Code.INVALID_ARG,
        "output 'OUT' has no buffer (TRITONBACKEND_OutputBuffer)",
    )


def test_a_second_final_response_is_refused(host: Any) -> None:
    with pytest.raises(TritonError) as info:
        execute(host, "twice")
    assert (info.value.code, info.value.message) == (
        Code.INVALID_ARG,
        "request 'twice' already received its final response",
    )


def test_a_second_release_is_refused(host: Any) -> None:
    with pytest.raises(TritonError) as info:
        execute(host, "release2")
    assert info.value.code == Code.INVALID_ARG
    assert info.value.message == "the request was released or does not belong to this execution"


def test_a_deleted_response_leaves_no_trace(host: Any) -> None:
    from tritium.core.backend.native.callbacks import _registry

    [(outputs, error, parameters, final)] = execute(host, "delete")
    assert error is None and final and outputs is not None and parameters is None
    assert outputs["OUT"].tolist() == [0, 0]
    assert (_registry.buffers, _registry.parameters, _registry.requests) == ({}, {}, {})


def test_a_missing_execute_entry_point_is_tritons_not_found(tmp_path: Path) -> None:
    compiler()
    from tritium.core.backend.native.host import NativeBackend

    library = build_backend(TEST_BACKENDS / "noexec.c", tmp_path / "libtriton_noexec.so")
    with pytest.raises(TritonError) as info:
        NativeBackend(library, "noexec")
    assert info.value.code == Code.NOT_FOUND
    assert info.value.message.startswith(
        "unable to find required entrypoint 'TRITONBACKEND_ModelInstanceExecute' in shared library: "
    )


# -- one backend, many models and instances, executing on several threads ---------------------------------------
def multi_config(name: str, offset: int, input_type: str = "TYPE_INT64", output: bool = True) -> dict[str, Any]:
    """A config of the ``multi`` test backend: OUT_<name> = IN + offset (no output: auto-complete adds it)."""
    config: dict[str, Any] = {
        "name": name,
        "backend": "multi",
        "input": [{"name": "IN", "data_type": input_type, "dims": [-1]}],
        "parameters": {"offset": {"string_value": str(offset)}},
    }
    if output:
        config["output"] = [{"name": f"OUT_{name}", "data_type": "TYPE_INT64", "dims": [-1]}]
    return config


class Multi:
    """One initialized NativeBackend of a test library (``libtriton_<name>.so``), as a worker holds it."""

    def __init__(self, library: Path) -> None:
        from tritium.core.backend.native.host import NativeBackend

        name = library.stem.removeprefix("libtriton_")
        self.native = NativeBackend(library, name)
        self.backend = Backend(name, str(library.parent), {})
        self.native.TRITONBACKEND_Initialize(self.backend)

    def model(self, config: dict[str, Any], auto_complete: bool = False) -> Model:
        model = Model(config["name"], 1, config, f"/models/{config['name']}", self.backend, auto_complete)
        self.native.TRITONBACKEND_ModelInitialize(model)
        return model

    def instance(self, model: Model, index: int) -> ModelInstance:
        instance = ModelInstance(f"{model.name}_{index}", "KIND_CPU", 0, model)
        self.native.TRITONBACKEND_ModelInstanceInitialize(instance)
        return instance

    def unload(self, model: Model, *instances: ModelInstance) -> None:
        for instance in instances:
            self.native.TRITONBACKEND_ModelInstanceFinalize(instance)
        self.native.TRITONBACKEND_ModelFinalize(model)

    def execute(self, instance: ModelInstance, request_id: str, values: np.ndarray, sink: Sink | None = None) -> Any:
        """Run one request; its one response as (outputs, parameters)."""
        sink = sink or Sink()
        request = Request(request_id, 0, 0, {}, {"IN": values}, [], sink)
        self.native.TRITONBACKEND_ModelInstanceExecute(instance, [request])
        [(outputs, error, parameters, final)] = sink.sent
        assert error is None, error
        assert final and outputs is not None
        return {name: array.tolist() for name, array in outputs.items()}, parameters


class SignallingSink(Sink):
    """A Sink that tells when the backend asked for an output buffer (it is inside execute)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = threading.Event()

    def output_buffer(self, request: Request, datatype: str, shape: Sequence[int]) -> np.ndarray:
        self.asked.set()
        return super().output_buffer(request, datatype, shape)


def answer(model: str, instance: str, datatype: str, served: int, instances: int) -> dict[str, Any]:
    """The response parameters the ``multi`` backend sends."""
    return {"model": model, "instance": instance, "datatype": datatype, "served": served, "instances": instances}


@pytest.fixture(scope="module")
def multi_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler()
    return build_backend(TEST_BACKENDS / "multi.c", tmp_path_factory.mktemp("multi") / "libtriton_multi.so")


def test_two_models_of_one_library_keep_their_own_config_and_state(multi_library: Path) -> None:
    host = Multi(multi_library)
    a = host.model(multi_config("a", 10))
    b = host.model(multi_config("b", 100, "TYPE_BF16"))  # initialized after a: a's instance must still be a's
    a0 = host.instance(a, 0)
    b0 = host.instance(b, 0)
    assert host.execute(a0, "r", np.array([1, 2, 3], np.int64)) == (
        {"OUT_a": [11, 12, 13]},
        answer("a", "a_0", "INT64", 1, 1),
    )
    bits = np.array([0x3F80, 2], np.uint16)  # BF16 by b's config (as uint16 bits)
    assert host.execute(b0, "r", bits) == ({"OUT_b": [0x3F80 + 100, 102]}, answer("b", "b_0", "BF16", 1, 1))
    assert host.execute(a0, "r", np.array([-10], np.int64)) == ({"OUT_a": [0]}, answer("a", "a_0", "INT64", 2, 1))
    host.unload(a, a0)
    host.unload(b, b0)


def test_two_instances_of_one_model_keep_their_own_state(multi_library: Path) -> None:
    host = Multi(multi_library)
    a = host.model(multi_config("a", 5, "TYPE_INT32"))
    a0, a1 = host.instance(a, 0), host.instance(a, 1)
    assert host.execute(a0, "r", np.array([1], np.int32)) == ({"OUT_a": [6]}, answer("a", "a_0", "INT32", 1, 2))
    assert host.execute(a0, "r", np.array([2], np.int32)) == ({"OUT_a": [7]}, answer("a", "a_0", "INT32", 2, 2))
    assert host.execute(a1, "r", np.array([3], np.int32)) == ({"OUT_a": [8]}, answer("a", "a_1", "INT32", 1, 2))
    host.unload(a, a0, a1)
    with pytest.raises(TritonError) as info:
        host.execute(a1, "r", np.array([3], np.int32))
    assert (info.value.code, info.value.message) == (
        Code.INTERNAL,
        "model instance 'a_1' is not initialized in native backend 'multi' (TRITONBACKEND_ModelInstanceInitialize)",
    )


def test_instances_execute_at_the_same_time_each_with_its_own_outputs(multi_library: Path) -> None:
    host = Multi(multi_library)
    a = host.model(multi_config("a", 10))
    b = host.model(multi_config("b", 1000))
    instances = [host.instance(a, 0), host.instance(a, 1), host.instance(b, 0)]
    rounds = 50
    results: dict[str, list[Any]] = {}

    def run(instance: ModelInstance, base: int) -> None:
        # "meet3": each first execute waits in C until all three are in C at once (10 s, then an error)
        ids = ["meet3"] + ["r"] * (rounds - 1)
        results[instance.name] = [
            host.execute(instance, request_id, np.array([base + k, -k], np.int64)) for k, request_id in enumerate(ids)
        ]

    threads = [threading.Thread(target=run, args=(inst, 100 * i)) for i, inst in enumerate(instances)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    expected = {
        "a_0": [({"OUT_a": [k + 10, 10 - k]}, answer("a", "a_0", "INT64", k + 1, 2)) for k in range(rounds)],
        "a_1": [({"OUT_a": [100 + k + 10, 10 - k]}, answer("a", "a_1", "INT64", k + 1, 2)) for k in range(rounds)],
        "b_0": [({"OUT_b": [200 + k + 1000, 1000 - k]}, answer("b", "b_0", "INT64", k + 1, 1)) for k in range(rounds)],
    }
    assert results == expected
    host.unload(a, *instances[:2])
    host.unload(b, instances[2])


def test_auto_complete_reaches_the_model_that_asked(multi_library: Path) -> None:
    from tritium.core.backend.native.callbacks import _registry

    host = Multi(multi_library)
    fixed = host.model(multi_config("fixed", 1, output=False), auto_complete=False)
    a = host.model(multi_config("a", 2, output=False), auto_complete=True)
    b = host.model(multi_config("b", 3, output=False), auto_complete=True)
    completed = [{"name": "OUT_a", "data_type": "TYPE_INT64", "dims": [-1]}]
    assert a.config == {**multi_config("a", 2, output=False), "output": completed}
    assert b.config == {**multi_config("b", 3, output=False), "output": [{**completed[0], "name": "OUT_b"}]}
    assert fixed.config == multi_config("fixed", 1, output=False)
    b0 = host.instance(b, 0)
    assert host.execute(b0, "r", np.array([4], np.int64)) == ({"OUT_b": [7]}, answer("b", "b_0", "INT64", 1, 1))
    assert {_registry.models[m.state.handle].model for m in (fixed, a, b)} == {fixed, a, b}
    handles = [m.state.handle for m in (fixed, a, b)]
    host.unload(fixed)
    host.unload(a)
    host.unload(b, b0)
    assert [h in _registry.models for h in handles] == [False, False, False]


def test_models_load_and_unload_while_another_model_executes(multi_library: Path) -> None:
    host = Multi(multi_library)
    a = host.model(multi_config("a", 10))
    a0 = host.instance(a, 0)
    held = SignallingSink()
    result: list[Any] = []
    # "hold": a's execute waits in C, its output buffer already handed out, until a model is finalized
    thread = threading.Thread(target=lambda: result.append(host.execute(a0, "hold", np.array([1, 2], np.int64), held)))
    thread.start()
    assert held.asked.wait(10)
    b = host.model(multi_config("b", 100, output=False), auto_complete=True)  # while a executes
    b0 = host.instance(b, 0)
    assert b.config["output"] == [{"name": "OUT_b", "data_type": "TYPE_INT64", "dims": [-1]}]
    assert "output" in a.config and a.config["output"][0]["name"] == "OUT_a"
    assert host.execute(b0, "r", np.array([5], np.int64)) == ({"OUT_b": [105]}, answer("b", "b_0", "INT64", 1, 1))
    assert thread.is_alive()  # a is still executing
    host.unload(b, b0)  # releases a's held execute
    thread.join(10)
    assert result == [({"OUT_a": [11, 12]}, answer("a", "a_0", "INT64", 1, 1))]
    assert (b.state, b0.state) == (None, None)
    assert host.execute(a0, "r", np.array([3], np.int64)) == ({"OUT_a": [13]}, answer("a", "a_0", "INT64", 2, 1))
    host.unload(a, a0)


def test_a_failed_model_initialize_leaves_no_model_handle(tmp_path: Path) -> None:
    from tritium.core.backend.native.callbacks import _registry

    host = Multi(build_backend(TEST_BACKENDS / "initfail.c", tmp_path / "libtriton_initfail.so"))
    before = set(_registry.models)
    model = Model("bad", 1, {"name": "bad"}, "/models/bad", host.backend, False)
    with pytest.raises(TritonError) as info:
        host.native.TRITONBACKEND_ModelInitialize(model)
    assert (info.value.code, info.value.message) == (Code.INVALID_ARG, "model initialize refused")
    assert set(_registry.models) == before
    host.native.TRITONBACKEND_ModelFinalize(model)  # as Triton, which finalizes it all the same
    assert model.state is None
