"""NativeBackend in-process: a C test backend's edge cases against a recording response sink."""

from __future__ import annotations

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
