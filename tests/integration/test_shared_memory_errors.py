"""Shared-memory extensions, every bad call: HTTP status and body, gRPC status and message.

Expected answers are Triton 2.51's, recorded by running the real server (/work/ref) with the same
calls, except where a comment names a deliberate difference. Black-box: one server subprocess.
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tests.support.clients import http_call, module_server
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

P = f"/tritium_test_err_{uuid.uuid4().hex[:8]}"
GOOD_BYTES = struct.pack("<I", 3) + b"abc" + struct.pack("<I", 2) + b"de"
BAD_BYTES = struct.pack("<I", 3) + b"abc" + struct.pack("<I", 50) + b"de"


def _build(repo: Path) -> None:
    add_model(repo, "identity_fp32", identity_config())
    add_model(repo, "identity_bytes", identity_config("TYPE_STRING", "[ -1 ]", max_batch_size=0))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    handles = {
        "in": shm.create_shared_memory_region("in", f"{P}_in", 64),
        "out": shm.create_shared_memory_region("out", f"{P}_out", 64),
        "small": shm.create_shared_memory_region("small", f"{P}_small", 32),
        "bs": shm.create_shared_memory_region("bs", f"{P}_bs", 64),
    }
    shm.set_shared_memory_region(handles["in"], [np.arange(16, dtype=np.float32)])
    shm.set_shared_memory_region(handles["bs"], [np.frombuffer(GOOD_BYTES + BAD_BYTES, dtype=np.uint8)])
    try:
        for proc in module_server(tmp_path_factory.mktemp("shm_errors"), _build, []):
            for name, size in (("in", 64), ("out", 64), ("small", 32), ("bs", 64)):
                status, _, body = _post(
                    proc,
                    f"/v2/systemsharedmemory/region/{name}/register",
                    {"key": f"{P}_{name}", "offset": 0, "byte_size": size},
                )
                assert status == 200, body
            yield proc
    finally:
        for handle in handles.values():
            shm.destroy_shared_memory_region(handle)


def _post(server: ServerProcess, path: str, body: Any) -> tuple[int, dict[str, str], bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http_call(server, "POST", path, data)


def _error(status: int, message: str) -> tuple[int, dict[str, str]]:
    return status, {"error": message}


# -- registration ------------------------------------------------------------------------------------
REGISTER_CASES = [
    (
        "in",
        {"key": f"{P}_in", "offset": 0, "byte_size": 64},
        _error(400, "shared memory region 'in' already in manager"),
    ),
    (
        "nk",
        {"key": f"{P}_nokey", "offset": 0, "byte_size": 64},
        _error(400, f"Unable to open shared memory region: '{P}_nokey'"),
    ),
    ("sl", {"key": "/a/b", "offset": 0, "byte_size": 8}, _error(400, "Unable to open shared memory region: '/a/b'")),
    (
        "big",
        {"key": f"{P}_small", "offset": 0, "byte_size": 64},
        _error(400, "failed to register shared memory region 'big': invalid args"),
    ),
    (
        "bo",
        {"key": f"{P}_small", "offset": 40, "byte_size": 8},
        _error(400, "failed to register shared memory region 'bo': invalid args"),
    ),
    ("mk", {"offset": 0, "byte_size": 8}, _error(400, "Shared memory register request has no 'key' field")),
    ("ms", {"key": f"{P}_small", "offset": 0}, _error(400, "Shared memory register request has no 'byte_size' field")),
    (
        "ss",
        {"key": f"{P}_small", "offset": 0, "byte_size": "8"},
        _error(400, "attempt to access JSON non-unsigned-integer as unsigned-integer"),
    ),
    ("ki", {"key": 5, "offset": 0, "byte_size": 8}, _error(400, "attempt to access JSON non-string as string")),
    ("bj", b"{", _error(400, "failed to parse the request JSON buffer: Missing a name for object member. at 1")),
    ("eb", b"", _error(400, "failed to parse the request JSON buffer: The document is empty. at 0")),
]


@pytest.mark.parametrize(("name", "body", "expected"), REGISTER_CASES, ids=[c[0] for c in REGISTER_CASES])
def test_http_register_errors(
    server: ServerProcess, name: str, body: Any, expected: tuple[int, dict[str, str]]
) -> None:
    status, _, data = _post(server, f"/v2/systemsharedmemory/region/{name}/register", body)
    assert (status, json.loads(data)) == expected


def test_http_status_and_unregister(server: ServerProcess) -> None:
    status, _, body = http_call(server, "GET", "/v2/systemsharedmemory/region/in/status")
    assert (status, json.loads(body)) == (200, [{"name": "in", "key": f"{P}_in", "offset": 0, "byte_size": 64}])
    status, _, body = http_call(server, "GET", "/v2/systemsharedmemory/region/zz/status")
    assert (status, json.loads(body)) == _error(404, "Unable to find system shared memory region: 'zz'")
    assert http_call(server, "POST", "/v2/systemsharedmemory/status")[0] == 405
    assert http_call(server, "GET", "/v2/systemsharedmemory/region/x/register")[0] == 405
    assert http_call(server, "GET", "/v2/systemsharedmemory/unregister")[0] == 405
    assert http_call(server, "POST", "/v2/systemsharedmemory/region/zz/unregister")[0] == 200  # unknown: fine


# -- requests naming regions -------------------------------------------------------------------------
def _infer(
    server: ServerProcess,
    inp: dict[str, Any],
    out: dict[str, Any] | None = None,
    shape: list[int] | None = None,
    model: str = "identity_fp32",
    datatype: str = "FP32",
) -> tuple[int, Any]:
    body: dict[str, Any] = {
        "inputs": [{"name": "INPUT0", "datatype": datatype, "shape": shape or [1, 16], "parameters": inp}]
    }
    if out is not None:
        body["outputs"] = [{"name": "OUTPUT0", "parameters": out}]
    status, _, data = _post(server, f"/v2/models/{model}/infer", body)
    return status, json.loads(data)


def _r(region: str, size: int | None = None, offset: int | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"shared_memory_region": region}
    if size is not None:
        params["shared_memory_byte_size"] = size
    if offset is not None:
        params["shared_memory_offset"] = offset
    return params


OK_IN = _r("in", 64)
INFER_CASES = [
    ("unknown region", _r("zz", 64), None, _error(404, "Unable to find shared memory region: 'zz'")),
    ("no byte size", _r("in"), None, _error(400, "Invalid offset + byte size for shared memory region: 'in'")),
    (
        "offset+size beyond",
        _r("in", 64, 8),
        None,
        _error(400, "Invalid offset + byte size for shared memory region: 'in'"),
    ),
    ("offset beyond", _r("in", 4, 80), None, _error(400, "Invalid offset for shared memory region: 'in'")),
    ("offset at end", _r("in", 0, 64), None, _error(400, "Invalid offset for shared memory region: 'in'")),
    (
        "size mismatch",
        _r("in", 60),
        None,
        _error(
            400,
            "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'identity_fp32'. "
            "Expected 64, got 60",
        ),
    ),
    (
        "offset not uint",
        {**OK_IN, "shared_memory_offset": "0"},
        None,
        _error(
            400,
            "Unable to parse 'shared_memory_offset': attempt to access JSON non-unsigned-integer as unsigned-integer",
        ),
    ),
    (
        "region not string",
        {"shared_memory_region": 3, "shared_memory_byte_size": 64},
        None,
        _error(400, "Unable to parse 'shared_memory_region': attempt to access JSON non-string as string"),
    ),
    ("output region unknown", OK_IN, _r("zz", 64), _error(404, "Unable to find shared memory region: 'zz'")),
    (
        "output beyond",
        OK_IN,
        _r("out", 64, 8),
        _error(400, "Invalid offset + byte size for shared memory region: 'out'"),
    ),
    ("output no size", OK_IN, _r("out"), _error(400, "Invalid offset + byte size for shared memory region: 'out'")),
    (
        "output too small",
        OK_IN,
        _r("out", 32, 32),
        _error(
            400,
            "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 "
            "bytes to hold the results",
        ),
    ),
    (
        "output and classification",
        OK_IN,
        {**_r("out", 64), "classification": 2},
        _error(400, "Output can't set both 'shared_memory_region' and 'classification'"),
    ),
]


@pytest.mark.parametrize(("case", "inp", "out", "expected"), INFER_CASES, ids=[c[0] for c in INFER_CASES])
def test_http_infer_errors(server: ServerProcess, case: str, inp: Any, out: Any, expected: Any) -> None:
    assert _infer(server, inp, out) == expected


def test_http_bytes_errors(server: ServerProcess) -> None:
    bad = _r("bs", len(BAD_BYTES), len(GOOD_BYTES))
    assert _infer(server, bad, shape=[2], model="identity_bytes", datatype="BYTES") == _error(
        400,
        "incomplete string data for inference input 'INPUT0', expecting string of length 50 but only 2 bytes available",
    )
    assert _infer(server, _r("bs", len(GOOD_BYTES)), shape=[3], model="identity_bytes", datatype="BYTES") == _error(
        400,
        "[request id: <id_unknown>] expected 3 string elements for inference input 'INPUT0' for model "
        "'identity_bytes', got 2",
    )
    assert _infer(
        server, _r("bs", len(GOOD_BYTES)), _r("small", 4), shape=[2], model="identity_bytes", datatype="BYTES"
    ) == _error(
        400,
        "shared memory size specified with the request for output 'OUTPUT0' (4 bytes) should be at least 13 "
        "bytes to hold the results",
    )
    status, body = _infer(server, _r("bs", len(GOOD_BYTES)), shape=[2], model="identity_bytes", datatype="BYTES")
    assert (status, body["outputs"][0]["data"]) == (200, ["abc", "de"])  # and the server still serves


def test_http_response_of_outputs_in_shared_memory(server: ServerProcess) -> None:
    assert _infer(server, OK_IN, _r("out", 64)) == (
        200,
        {
            "model_name": "identity_fp32",
            "model_version": "1",
            "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 16]}],
        },
    )


# -- gRPC ------------------------------------------------------------------------------------------------
def _grpc_error(call: Any) -> tuple[str, str]:
    with pytest.raises(InferenceServerException) as info:
        call()
    return info.value.status(), info.value.message()


def _ginfer(
    client: Any,
    region: str,
    size: int,
    offset: int = 0,
    out: tuple[str, int, int] | None = None,
    shape: tuple[int, ...] = (1, 16),
    model: str = "identity_fp32",
    datatype: str = "FP32",
) -> Any:
    inp = grpcclient.InferInput("INPUT0", list(shape), datatype)
    inp.set_shared_memory(region, size, offset)
    outputs = None
    if out is not None:
        requested = grpcclient.InferRequestedOutput("OUTPUT0")
        requested.set_shared_memory(*out)
        outputs = [requested]
    return client.infer(model, [inp], outputs=outputs)


def test_grpc_errors(server: ServerProcess) -> None:
    c = grpcclient.InferenceServerClient(server.grpc_url)
    assert _grpc_error(lambda: c.get_system_shared_memory_status("zz")) == (
        "StatusCode.NOT_FOUND",
        "Unable to find system shared memory region: 'zz'",
    )
    assert _grpc_error(lambda: c.register_system_shared_memory("in", f"{P}_in", 64)) == (
        "StatusCode.ALREADY_EXISTS",
        "shared memory region 'in' already in manager",
    )
    assert _grpc_error(lambda: c.register_system_shared_memory("nk", f"{P}_nokey", 64)) == (
        "StatusCode.INVALID_ARGUMENT",
        f"Unable to open shared memory region: '{P}_nokey'",
    )  # Triton: INTERNAL
    # Triton 2.51 answers INTERNAL "Invalid shared memory region" here because its key is already
    # registered under another name (it refuses a second region on one key); tritium allows that
    assert _grpc_error(lambda: c.register_system_shared_memory("big", f"{P}_small", 64)) == (
        "StatusCode.INVALID_ARGUMENT",
        "failed to register shared memory region 'big': invalid args",
    )
    assert _grpc_error(lambda: _ginfer(c, "zz", 64)) == (
        "StatusCode.NOT_FOUND",
        "Unable to find shared memory region: 'zz'",
    )
    assert _grpc_error(lambda: _ginfer(c, "in", 64, 8)) == (
        "StatusCode.INVALID_ARGUMENT",
        "Invalid offset + byte size for shared memory region: 'in'",
    )
    assert _grpc_error(lambda: _ginfer(c, "in", 4, 80)) == (
        "StatusCode.INVALID_ARGUMENT",
        "Invalid offset for shared memory region: 'in'",
    )
    assert _grpc_error(lambda: _ginfer(c, "in", 60)) == (
        "StatusCode.INVALID_ARGUMENT",
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'identity_fp32'. "
        "Expected 64, got 60",
    )
    assert _grpc_error(lambda: _ginfer(c, "in", 64, out=("out", 32, 32))) == (
        "StatusCode.INVALID_ARGUMENT",
        "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) "
        "should be at least 64 bytes to hold the results",
    )
    assert _grpc_error(lambda: _ginfer(c, "in", 64, out=("out", 64, 8))) == (
        "StatusCode.INVALID_ARGUMENT",
        "Invalid offset + byte size for shared memory region: 'out'",
    )
    assert _grpc_error(
        lambda: _ginfer(c, "bs", len(BAD_BYTES), len(GOOD_BYTES), shape=(2,), model="identity_bytes", datatype="BYTES")
    ) == (
        "StatusCode.INVALID_ARGUMENT",
        "incomplete string data for inference input 'INPUT0', expecting string of length 50 but only 2 bytes available",
    )
    c.unregister_system_shared_memory("zz")  # unknown: fine
    response = _ginfer(c, "in", 64, out=("out", 64, 0)).get_response(as_json=True)
    assert response["raw_output_contents"] == [""]  # as Triton: an empty entry for an output in a region
    c.close()


# -- CUDA shared memory on a machine without a GPU -------------------------------------------------------
def _has_gpu() -> bool:
    return Path("/proc/driver/nvidia/gpus").is_dir() and any(Path("/proc/driver/nvidia/gpus").iterdir())


@pytest.mark.skipif(_has_gpu(), reason="checks the answers of a machine without a GPU")
def test_cuda_shared_memory_without_a_gpu(server: ServerProcess) -> None:
    status, _, body = http_call(server, "GET", "/v2/cudasharedmemory/status")
    assert (status, json.loads(body)) == (200, [])
    status, _, body = http_call(server, "GET", "/v2/cudasharedmemory/region/zz/status")
    assert (status, json.loads(body)) == _error(404, "Unable to find cuda shared memory region: 'zz'")
    handle = {"raw_handle": {"b64": base64.b64encode(b"\0" * 64).decode()}, "device_id": 0, "byte_size": 64}
    status, _, body = _post(server, "/v2/cudasharedmemory/region/c/register", handle)
    # Triton's text here is "failed to register shared memory region: invalid args"; tritium says why
    message = "failed to register CUDA shared memory region 'c': CUDA is unavailable: no GPU is visible to the server"
    assert (status, json.loads(body)) == _error(400, message)
    # the region did not register, so a request naming it finds no region (the CUDA data path needs a GPU)
    assert _infer(server, _r("c", 64)) == _error(404, "Unable to find shared memory region: 'c'")
    assert _infer(server, OK_IN, _r("c", 64)) == _error(404, "Unable to find shared memory region: 'c'")
    assert _post(server, "/v2/cudasharedmemory/unregister", b"")[0] == 200  # perf_analyzer calls it
    assert _post(server, "/v2/cudasharedmemory/region/zz/unregister", b"")[0] == 200
    c = grpcclient.InferenceServerClient(server.grpc_url)
    assert c.get_cuda_shared_memory_status(as_json=True) == {}
    assert _grpc_error(lambda: c.register_cuda_shared_memory("c", b"\0" * 64, 0, 64)) == (
        "StatusCode.INVALID_ARGUMENT",
        message,
    )
    assert _grpc_error(lambda: _ginfer(c, "c", 64)) == (
        "StatusCode.NOT_FOUND",
        "Unable to find shared memory region: 'c'",
    )
    c.unregister_cuda_shared_memory()
    c.close()


@pytest.mark.skipif(not _has_gpu(), reason="CUDA is unavailable: no GPU is visible on this machine")
def test_cuda_shared_memory_on_a_gpu(server: ServerProcess) -> None:  # pragma: no cover - GPU only
    from tritium.core.memory.cuda import cuda_unavailable_reason

    reason = cuda_unavailable_reason()  # the server runs with this interpreter
    if reason is not None:
        pytest.skip(f"CUDA is unavailable: {reason}")
    try:
        import tritonclient.utils.cuda_shared_memory as cudashm
    except (ImportError, RuntimeError) as exc:  # tritonclient 2.51 needs cuda-python<13 (cuda.cudart)
        pytest.skip(f"tritonclient.utils.cuda_shared_memory is unusable here: {exc}")
    data = np.arange(16, dtype=np.float32).reshape(1, 16)
    handle = cudashm.create_shared_memory_region("c", 64, 0)
    out_handle = cudashm.create_shared_memory_region("cout", 64, 0)
    c = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        c.register_cuda_shared_memory("c", cudashm.get_raw_handle(handle), 0, 64)
        assert c.get_cuda_shared_memory_status(as_json=True) == {
            "regions": {"c": {"name": "c", "byte_size": "64"}}  # proto3 JSON leaves out device_id 0
        }
        c.register_cuda_shared_memory("cout", cudashm.get_raw_handle(out_handle), 0, 64)
        cudashm.set_shared_memory_region(handle, [data])
        _ginfer(c, "c", 64, out=("cout", 64, 0))
        np.testing.assert_array_equal(cudashm.get_contents_as_numpy(out_handle, np.float32, [1, 16]), data)
        c.unregister_cuda_shared_memory()
    finally:
        c.close()
        cudashm.destroy_shared_memory_region(handle)
        cudashm.destroy_shared_memory_region(out_handle)
