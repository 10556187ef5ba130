"""Tensors in CUDA shared-memory regions, end to end over HTTP and gRPC, with a fake CUDA runtime.

No GPU is needed: the server runs in this process (its event loop in a
thread) with :class:`tests.support.fake_cuda.FakeCudaRuntime` injected, so
"device memory" is memory of this process and the tritonclient calls
(``register_cuda_shared_memory`` with a raw handle, inputs and outputs with
``set_shared_memory``) go through the real frontends, codecs and the core's
request path. What it cannot check (a real ``cudaIpcOpenMemHandle`` and
``cudaMemcpy`` on a device) is what ``scripts/gpu_check.py`` checks on a GPU
machine.
"""

from __future__ import annotations

import base64
import ctypes
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from tests.support.fake_cuda import FakeCudaError, FakeCudaRuntime, fake_cudashm_module
from tests.support.inprocess import InProcessServer
from tests.support.repo import add_model, identity_config

SHAPE = [1, 16]
NBYTES = 64


@pytest.fixture(scope="module")
def fake() -> FakeCudaRuntime:
    return FakeCudaRuntime()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, fake: FakeCudaRuntime) -> Iterator[InProcessServer]:
    repo = tmp_path_factory.mktemp("cuda_repo")
    add_model(repo, "identity_fp32", identity_config())
    add_model(repo, "identity_bytes", identity_config("TYPE_STRING", "[ -1 ]", max_batch_size=0))
    add_model(repo, "batched_fp32", identity_config(extra="dynamic_batching { max_queue_delay_microseconds: 300000 }"))
    s = InProcessServer(repo, fake)
    s.start()
    yield s
    s.stop()


def _clients(server: InProcessServer) -> list[tuple[Any, Any]]:
    return [
        (httpclient, httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")),
        (grpcclient, grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")),
    ]


def _arena_drains(server: InProcessServer, timeout: float = 10.0) -> bool:
    """True once the core's arena holds no block (responses are released just after they are sent)."""
    import time

    deadline = time.monotonic() + timeout
    while server.server.pool.used_bytes and time.monotonic() < deadline:
        time.sleep(0.05)
    return server.server.pool.used_bytes == 0


def _register(client: Any, fake: FakeCudaRuntime, name: str, nbytes: int) -> Any:
    handle, buffer = fake.allocate(nbytes)
    # tritonclient.utils.cuda_shared_memory.get_raw_handle gives the handle base64-encoded
    client.register_cuda_shared_memory(name, base64.b64encode(handle), 0, nbytes)
    return buffer


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_input_and_output_in_cuda_regions(server: InProcessServer, fake: FakeCudaRuntime, protocol: str) -> None:
    module, client = _clients(server)[0 if protocol == "http" else 1]
    data = np.arange(16, dtype=np.float32).reshape(SHAPE) * (2 if protocol == "grpc" else 1)
    device_in = _register(client, fake, "in", NBYTES + 16)
    device_out = _register(client, fake, "out", NBYTES + 8)
    try:
        ctypes.memmove(ctypes.addressof(device_in) + 16, data.tobytes(), NBYTES)
        inp = module.InferInput("INPUT0", SHAPE, "FP32")
        inp.set_shared_memory("in", NBYTES, offset=16)
        out = module.InferRequestedOutput("OUTPUT0")
        out.set_shared_memory("out", NBYTES, offset=8)
        before = len(fake.copies)
        result = client.infer("identity_fp32", [inp], outputs=[out])
        output = result.get_output("OUTPUT0")  # written into the region: no bytes in the response
        if protocol == "http":
            assert output == {"name": "OUTPUT0", "datatype": "FP32", "shape": SHAPE}
        else:
            assert (output.name, list(output.shape)) == ("OUTPUT0", SHAPE)
            assert result.get_response().raw_output_contents == [b""]
        got = np.frombuffer(bytes(device_out)[8 : 8 + NBYTES], np.float32).reshape(SHAPE)
        np.testing.assert_array_equal(got, data)
        d2h, h2d = fake.copies[before:]  # one copy each way
        assert (d2h.src, d2h.count, d2h.kind) == (ctypes.addressof(device_in) + 16, NBYTES, 2)
        assert (h2d.dst, h2d.count, h2d.kind) == (ctypes.addressof(device_out) + 8, NBYTES, 1)
        status = client.get_cuda_shared_memory_status()
        assert status is not None
    finally:
        client.unregister_cuda_shared_memory()
        client.close()


def test_mixed_with_system_and_body_tensors_and_bytes(server: InProcessServer, fake: FakeCudaRuntime) -> None:
    client = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")
    words = np.array([b"alpha", b"", b"gamma delta"], dtype=np.object_)
    serialized = serialize_byte_tensor(words).item()
    device_in = _register(client, fake, "bin", len(serialized))
    device_out = _register(client, fake, "bout", 64)
    try:
        ctypes.memmove(ctypes.addressof(device_in), serialized, len(serialized))
        inp = httpclient.InferInput("INPUT0", [3], "BYTES")
        inp.set_shared_memory("bin", len(serialized))
        out = httpclient.InferRequestedOutput("OUTPUT0")
        out.set_shared_memory("bout", 64)
        client.infer("identity_bytes", [inp], outputs=[out])
        assert bytes(device_out)[: len(serialized)] == serialized
        # the output to the body, the input from the CUDA region
        result = client.infer("identity_bytes", [inp], outputs=[httpclient.InferRequestedOutput("OUTPUT0")])
        assert result.as_numpy("OUTPUT0").tolist() == words.tolist()
    finally:
        client.unregister_cuda_shared_memory()
        client.close()


def test_errors_and_the_server_keeps_serving(server: InProcessServer, fake: FakeCudaRuntime) -> None:
    http = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")
    grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    _register(http, fake, "small", 32)
    _register(http, fake, "in", NBYTES)

    def error(
        client: Any, module: Any, inp_region: tuple[str, int, int] | None, out_region: tuple[str, int, int] | None
    ) -> str:
        inp = module.InferInput("INPUT0", SHAPE, "FP32")
        if inp_region:
            inp.set_shared_memory(inp_region[0], inp_region[1], offset=inp_region[2])
        else:
            inp.set_data_from_numpy(np.zeros(SHAPE, np.float32))
        out = module.InferRequestedOutput("OUTPUT0")
        if out_region:
            out.set_shared_memory(out_region[0], out_region[1], offset=out_region[2])
        with pytest.raises(InferenceServerException) as info:
            client.infer("identity_fp32", [inp], outputs=[out])
        return f"{info.value.status()} {info.value.message()}"

    try:
        for client, module, bad, internal in (
            (http, httpclient, "400", "500"),
            (grpc, grpcclient, "StatusCode.INVALID_ARGUMENT", "StatusCode.INTERNAL"),
        ):
            assert error(client, module, ("in", NBYTES, 16), None) == (
                f"{bad} Invalid offset + byte size for shared memory region: 'in'"
            )
            assert error(client, module, ("in", 4, NBYTES), None) == (
                f"{bad} Invalid offset for shared memory region: 'in'"
            )
            assert error(client, module, ("in", 60, 0), None).endswith(
                "input byte size mismatch for input 'INPUT0' for model 'identity_fp32'. Expected 64, got 60"
            )
            assert error(client, module, None, ("small", 32, 0)) == (  # Triton: INTERNAL (500)
                f"{bad} shared memory size specified with the request for output 'OUTPUT0' (32 bytes) "
                "should be at least 64 bytes to hold the results"
            )
            fake.fail["cudaMemcpy"] = FakeCudaError.cudaErrorIllegalAddress
            try:
                assert error(client, module, ("in", NBYTES, 0), None) == (
                    f"{internal} failed to copy input 'INPUT0' from CUDA shared memory region 'in': "
                    "an illegal memory access was encountered"
                )
                assert error(client, module, None, ("in", NBYTES, 0)) == (
                    f"{internal} failed to copy output 'OUTPUT0' to CUDA shared memory region 'in': "
                    "an illegal memory access was encountered"
                )
            finally:
                del fake.fail["cudaMemcpy"]
        # still serving, the regions still usable
        inp = httpclient.InferInput("INPUT0", SHAPE, "FP32")
        inp.set_shared_memory("in", NBYTES)
        result = http.infer("identity_fp32", [inp])
        assert result.as_numpy("OUTPUT0").shape == tuple(SHAPE)
    finally:
        http.unregister_cuda_shared_memory()
        http.close()
        grpc.close()
    assert _arena_drains(server)  # every staging block went back to the arena


def test_status_and_unregister(server: InProcessServer, fake: FakeCudaRuntime) -> None:
    http = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")
    grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    device = _register(http, fake, "c", 64)
    try:
        assert http.get_cuda_shared_memory_status() == [{"name": "c", "device_id": 0, "byte_size": 64}]
        assert grpc.get_cuda_shared_memory_status(as_json=True) == {  # proto3 JSON leaves out device_id 0
            "regions": {"c": {"name": "c", "byte_size": "64"}}
        }
        grpc.unregister_cuda_shared_memory("c")
        assert fake.closed[-1] == ctypes.addressof(device)
        assert http.get_cuda_shared_memory_status() == []
    finally:
        http.close()
        grpc.close()


def test_dynamic_batch_with_cuda_region_and_body_inputs(server: InProcessServer, fake: FakeCudaRuntime) -> None:
    """Requests batched together, inputs from CUDA regions and from the body, outputs to regions and the body."""
    import threading

    http = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")
    device_in = _register(http, fake, "bin", 4 * NBYTES)
    device_out = _register(http, fake, "bout", 4 * NBYTES)
    data = [np.full(SHAPE, i + 1, np.float32) for i in range(4)]
    for i in range(4):
        ctypes.memmove(ctypes.addressof(device_in) + i * NBYTES, data[i].tobytes(), NBYTES)
    results: dict[int, Any] = {}

    def send(i: int) -> None:
        client = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")
        inp = httpclient.InferInput("INPUT0", SHAPE, "FP32")
        if i % 2 == 0:
            inp.set_shared_memory("bin", NBYTES, offset=i * NBYTES)
        else:
            inp.set_data_from_numpy(data[i])
        out = httpclient.InferRequestedOutput("OUTPUT0")
        if i < 2:
            out.set_shared_memory("bout", NBYTES, offset=i * NBYTES)
            client.infer("batched_fp32", [inp], outputs=[out])
            results[i] = np.frombuffer(bytes(device_out)[i * NBYTES : (i + 1) * NBYTES], np.float32).reshape(SHAPE)
        else:
            results[i] = client.infer("batched_fp32", [inp], outputs=[out]).as_numpy("OUTPUT0")
        client.close()

    try:
        threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(results) == [0, 1, 2, 3]
        for i, value in results.items():
            np.testing.assert_array_equal(value, data[i])
        stats = http.get_inference_statistics("batched_fp32")
        assert stats["model_stats"][0]["execution_count"] < 4  # some of the 4 requests shared a batch
    finally:
        http.unregister_cuda_shared_memory()
        http.close()
    assert _arena_drains(server)


def test_the_gpu_check_script_against_a_fake_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/gpu_check.py's client side, run against a server with a fake CUDA runtime.

    Its tritonclient calls (regions, registration, status shapes, error
    texts) are the ones it makes on a GPU; only ``cuda_shared_memory`` is
    replaced, by a stand-in over the same fake "device memory".
    """
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("gpu_check", Path(__file__).parents[2] / "scripts" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    runtime = FakeCudaRuntime()
    monkeypatch.setitem(sys.modules, "tritonclient.utils.cuda_shared_memory", fake_cudashm_module(runtime))
    gpu_check.build_repository(tmp_path / "models", "KIND_CPU", 0)
    s = InProcessServer(tmp_path / "models", runtime)
    s.start()
    try:
        for protocol in ("http", "grpc"):
            gpu_check.run_protocol(protocol, s, 0)
    finally:
        s.stop()
    failed = [(name, detail) for name, ok, detail in gpu_check.RESULTS if not ok]
    assert not failed and len(gpu_check.RESULTS) == 12
