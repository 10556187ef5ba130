"""System shared memory, client side: tritonclient HTTP and gRPC (sync and aio) with inputs and
outputs in registered regions, regions in use while they are unregistered, regions the client
deletes or truncates, and a short soak that checks nothing grows.

Black-box: one tritium-server subprocess for the module; regions are made with
``tritonclient.utils.shared_memory`` exactly as a Triton user makes them. The server process
never imports tritonclient (see tests/support/server.py).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http as httpclient
import tritonclient.http.aio as httpaio
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from tests.support.clients import module_server
from tests.support.procs import shm_entries, worker_pids
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

PY_IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 2)]))
        return out
"""
# a backend that answers which file the memory of its input is mapped from (/proc/self/maps)
WHERE_BACKEND = """
import numpy as np


def TRITONBACKEND_ModelInstanceExecute(instance, requests):
    for request in requests:
        address = request.inputs["INPUT0"].__array_interface__["data"][0]
        where = "?"
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                start, end = (int(x, 16) for x in fields[0].split("-"))
                if start <= address < end:
                    where = fields[5] if len(fields) > 5 else "anonymous"
        request.respond({"OUTPUT0": np.array([where.encode()], dtype=np.object_)})
"""
WHERE_CONFIG = """
backend: "where"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1, 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]
"""
ENSEMBLE_DOUBLE = """
platform: "ensemble"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
ensemble_scheduling { step [ {
  model_name: "py_double" model_version: -1
  input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "OUTPUT0" }
} ] }
"""
SLOW = 'parameters { key: "execute_delay_ms" value { string_value: "1500" } }'


def _build(repo: Path) -> None:
    add_model(repo, "identity_fp32", identity_config())
    add_model(repo, "identity_bytes", identity_config("TYPE_STRING", "[ -1 ]", max_batch_size=0))
    add_model(repo, "slow_fp32", identity_config(extra=SLOW))
    add_model(
        repo,
        "py_double",
        identity_config().replace('backend: "identity"', 'backend: "python"'),
        files={"1/model.py": PY_IDENTITY},
    )
    add_model(repo, "where", WHERE_CONFIG, files={"libtriton_where.py": WHERE_BACKEND})
    add_model(repo, "batched_fp32", identity_config(extra="dynamic_batching { max_queue_delay_microseconds: 300000 }"))
    add_model(repo, "ensemble_double", ENSEMBLE_DOUBLE)
    add_model(repo, "cached_fp32", identity_config(extra="response_cache { enable: true }"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from module_server(tmp_path_factory.mktemp("shm"), _build, ["--cache-config=local,size=1048576"])


class Regions:
    """Client-side regions of one test (unique keys), destroyed and unregistered afterwards."""

    def __init__(self, server: ServerProcess) -> None:
        self.prefix = f"tritium_test_{uuid.uuid4().hex[:8]}"
        self.handles: dict[str, Any] = {}
        self.http = httpclient.InferenceServerClient(server.http_url)

    def key(self, name: str) -> str:
        return f"/{self.prefix}_{name}"

    def create(self, name: str, size: int, register: bool = True) -> Any:
        handle = shm.create_shared_memory_region(name, self.key(name), size)
        self.handles[name] = handle
        if register:
            self.http.register_system_shared_memory(name, self.key(name), size)
        return handle

    def close(self) -> None:
        self.http.unregister_system_shared_memory()
        for handle in self.handles.values():
            try:
                shm.destroy_shared_memory_region(handle)
            except Exception:  # already destroyed by the test
                pass
        self.http.close()


@pytest.fixture
def regions(server: ServerProcess) -> Iterator[Regions]:
    r = Regions(server)
    yield r
    r.close()


DATA = np.arange(16, dtype=np.float32).reshape(1, 16) * 1.5


def _inputs(module: Any, name: str = "in", nbytes: int = 64) -> tuple[list[Any], list[Any]]:
    inp = module.InferInput("INPUT0", [1, 16], "FP32")
    inp.set_shared_memory(name, nbytes)
    out = module.InferRequestedOutput("OUTPUT0")
    out.set_shared_memory("out", 64)
    return [inp], [out]


def _fill(regions: Regions) -> tuple[Any, Any]:
    ins = regions.create("in", 64)
    outs = regions.create("out", 64)
    shm.set_shared_memory_region(ins, [DATA])
    return ins, outs


# -- tritonclient, both transports, sync and aio ---------------------------------------------------
@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_sync_inputs_and_outputs_in_system_shared_memory(server: ServerProcess, regions: Regions, module: Any) -> None:
    _ins, outs = _fill(regions)
    client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
    inputs, outputs = _inputs(module)
    result = client.infer("identity_fp32", inputs, outputs=outputs)
    output = result.get_output("OUTPUT0")
    if module is httpclient:
        assert output == {"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 16]}
    else:
        assert (output.name, output.datatype, list(output.shape)) == ("OUTPUT0", "FP32", [1, 16])
    # the bytes are in the region, not in the response (Triton sends none either)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(outs, np.float32, [1, 16]), DATA)
    client.close()


def test_grpc_stream_with_system_shared_memory(server: ServerProcess, regions: Regions) -> None:
    import queue

    _ins, outs = _fill(regions)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        inputs, outputs = _inputs(grpcclient)
        client.async_stream_infer("identity_fp32", inputs, outputs=outputs, request_id="s1")
        bad, _ = _inputs(grpcclient, "nope")
        client.async_stream_infer("identity_fp32", bad, outputs=outputs, request_id="s2")
        (first, error1), (second, error2) = results.get(timeout=30), results.get(timeout=30)
    finally:
        client.stop_stream()
    assert error1 is None and first.get_response().id == "s1"
    assert second is None and error2.message() == "Unable to find shared memory region: 'nope'"
    np.testing.assert_array_equal(shm.get_contents_as_numpy(outs, np.float32, [1, 16]), DATA)
    client.close()


def test_a_restarted_worker_maps_the_region_again(server: ServerProcess, regions: Regions) -> None:
    import signal
    import time

    _ins, outs = _fill(regions)
    client = httpclient.InferenceServerClient(server.http_url)
    inputs, outputs = _inputs(httpclient)
    client.infer("identity_fp32", inputs, outputs=outputs)  # this worker has the region now
    assert server.proc is not None
    before = set(worker_pids(server.proc.pid))
    victim = _worker_of(server, "identity_fp32")
    os.kill(victim, signal.SIGKILL)
    for _ in range(600):
        if victim not in worker_pids(server.proc.pid) and client.is_model_ready("identity_fp32"):
            break
        time.sleep(0.05)
    assert set(worker_pids(server.proc.pid)) != before
    shm.set_shared_memory_region(outs, [np.zeros((1, 16), np.float32)])
    client.infer("identity_fp32", inputs, outputs=outputs)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(outs, np.float32, [1, 16]), DATA)
    client.close()


def test_dynamic_batch_mixing_region_and_body_inputs(server: ServerProcess, regions: Regions) -> None:
    """Requests batched together, some with the input in a region and some in the body, each get their own answer."""
    _ins, outs = _fill(regions)
    results: dict[int, Any] = {}

    def send(i: int) -> None:
        client = httpclient.InferenceServerClient(server.http_url)
        if i % 2 == 0:
            inputs, _outputs = _inputs(httpclient)  # input from the region, output in the body
            results[i] = client.infer("batched_fp32", inputs).as_numpy("OUTPUT0")
        else:
            inp = httpclient.InferInput("INPUT0", [1, 16], "FP32")
            inp.set_data_from_numpy(DATA + i)
            results[i] = client.infer("batched_fp32", [inp]).as_numpy("OUTPUT0")
        client.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == [0, 1, 2, 3]
    for i, value in results.items():
        np.testing.assert_array_equal(value, DATA if i % 2 == 0 else DATA + i)
    stats = httpclient.InferenceServerClient(server.http_url).get_inference_statistics("batched_fp32")
    executions = stats["model_stats"][0]["execution_count"]
    assert executions < 4  # some of the 4 requests shared a batch


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_ensemble_reads_and_writes_regions(server: ServerProcess, regions: Regions, module: Any) -> None:
    """An ensemble's input read from a region and its output written into one, as for any model."""
    _ins, outs = _fill(regions)
    client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
    inputs, outputs = _inputs(module)
    result = client.infer("ensemble_double", inputs, outputs=outputs)
    if module is httpclient:  # no bytes in the response: they are in the region
        assert result.get_output("OUTPUT0") == {"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 16]}
    np.testing.assert_array_equal(shm.get_contents_as_numpy(outs, np.float32, [1, 16]), DATA * 2)
    small, _ = _inputs(module)
    tiny = module.InferRequestedOutput("OUTPUT0")
    tiny.set_shared_memory("out", 32)
    with pytest.raises(InferenceServerException) as info:
        client.infer("ensemble_double", small, outputs=[tiny])
    assert info.value.message() == (
        "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) "
        "should be at least 64 bytes to hold the results"
    )
    body_out = client.infer("ensemble_double", inputs)  # the server keeps serving; output in the body
    np.testing.assert_array_equal(body_out.as_numpy("OUTPUT0"), DATA * 2)
    client.close()


def test_response_cache_never_answers_for_a_region(server: ServerProcess, regions: Regions) -> None:
    """A request whose output goes into a region bypasses the response cache (its response has no bytes)."""
    _ins, outs = _fill(regions)
    client = httpclient.InferenceServerClient(server.http_url)
    inp = httpclient.InferInput("INPUT0", [1, 16], "FP32")
    inp.set_data_from_numpy(DATA)
    _, outputs = _inputs(httpclient)
    client.infer("cached_fp32", [inp], outputs=outputs)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(outs, np.float32, [1, 16]), DATA)
    # the same request with the output in the body: a miss (nothing was stored), then real bytes
    np.testing.assert_array_equal(client.infer("cached_fp32", [inp]).as_numpy("OUTPUT0"), DATA)
    np.testing.assert_array_equal(client.infer("cached_fp32", [inp]).as_numpy("OUTPUT0"), DATA)
    stats = client.get_inference_statistics("cached_fp32")["model_stats"][0]["inference_stats"]
    assert (stats["cache_hit"]["count"], stats["cache_miss"]["count"]) == (1, 1)
    client.close()


def _worker_of(server: ServerProcess, model: str) -> int:
    """The PID of the worker process that serves ``model``'s (one) instance."""
    [pid] = server.instance_pids(model).values()
    return pid


def test_python_model_reads_and_writes_regions(server: ServerProcess, regions: Regions) -> None:
    _ins, outs = _fill(regions)
    client = httpclient.InferenceServerClient(server.http_url)
    inputs, outputs = _inputs(httpclient)
    client.infer("py_double", inputs, outputs=outputs)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(outs, np.float32, [1, 16]), DATA * 2)
    # an input in shared memory, the output in the response
    plain = client.infer("py_double", inputs).as_numpy("OUTPUT0")
    np.testing.assert_array_equal(plain, DATA * 2)
    client.close()


def test_aio_clients(server: ServerProcess, regions: Regions) -> None:
    _ins, outs = _fill(regions)

    async def run() -> list[np.ndarray]:
        got = []
        for module, url in ((httpaio, server.http_url), (grpcaio, server.grpc_url)):
            client = module.InferenceServerClient(url)
            try:
                status = await client.get_system_shared_memory_status()
                names = [r["name"] for r in status] if module is httpaio else sorted(status.regions)
                assert names == ["in", "out"]
                inputs, outputs = _inputs(httpclient if module is httpaio else grpcclient)
                shm.set_shared_memory_region(outs, [np.zeros((1, 16), np.float32)])
                await client.infer("identity_fp32", inputs, outputs=outputs)
                got.append(shm.get_contents_as_numpy(outs, np.float32, [1, 16]).copy())
            finally:
                await client.close()
        return got

    for array in asyncio.run(run()):
        np.testing.assert_array_equal(array, DATA)


def test_worker_reads_the_input_in_place_from_the_clients_region(server: ServerProcess, regions: Regions) -> None:
    """Zero copy: the model's input array is the worker's own mapping of the client's object."""
    _fill(regions)
    client = httpclient.InferenceServerClient(server.http_url)
    inp = httpclient.InferInput("INPUT0", [1, 16], "FP32")
    inp.set_shared_memory("in", 64)
    where = client.infer("where", [inp]).as_numpy("OUTPUT0")[0]
    assert where == f"/dev/shm/{regions.key('in')[1:]}".encode()
    # the same input sent in the request body lies in the core's arena (a memfd segment) instead
    inp = httpclient.InferInput("INPUT0", [1, 16], "FP32")
    inp.set_data_from_numpy(DATA)
    assert client.infer("where", [inp]).as_numpy("OUTPUT0")[0].startswith(b"/memfd:tritium-arena")
    client.close()


def test_bytes_tensors_in_shared_memory(server: ServerProcess, regions: Regions) -> None:
    values = np.array([b"abc", b"", "w\u00f6rld".encode()], dtype=np.object_)
    serialized = serialize_byte_tensor(values)
    size = len(serialized.item())
    ins = regions.create("in", size)
    outs = regions.create("out", 64)
    shm.set_shared_memory_region(ins, [serialized])
    client = grpcclient.InferenceServerClient(server.grpc_url)
    inp = grpcclient.InferInput("INPUT0", [3], "BYTES")
    inp.set_shared_memory("in", size)
    out = grpcclient.InferRequestedOutput("OUTPUT0")
    out.set_shared_memory("out", 64)
    client.infer("identity_bytes", [inp], outputs=[out])
    got = shm.get_contents_as_numpy(outs, np.object_, [3])
    assert got.tolist() == values.tolist()
    client.close()


def test_status_register_unregister(server: ServerProcess, regions: Regions) -> None:
    regions.create("a", 64)
    regions.create("b", 128, register=False)
    client = httpclient.InferenceServerClient(server.http_url)
    client.register_system_shared_memory("b", regions.key("b"), 96, offset=32)
    assert client.get_system_shared_memory_status() == [
        {"name": "a", "key": regions.key("a"), "offset": 0, "byte_size": 64},
        {"name": "b", "key": regions.key("b"), "offset": 32, "byte_size": 96},
    ]
    g = grpcclient.InferenceServerClient(server.grpc_url)
    status = g.get_system_shared_memory_status("b", as_json=True)
    assert status == {"regions": {"b": {"name": "b", "key": regions.key("b"), "offset": "32", "byte_size": "96"}}}
    g.unregister_system_shared_memory("a")
    assert [r["name"] for r in client.get_system_shared_memory_status()] == ["b"]
    g.unregister_system_shared_memory()
    assert client.get_system_shared_memory_status() == []
    # a registered offset shifts the tensor: region "b" starts 32 bytes into the object
    shm.set_shared_memory_region(regions.handles["b"], [DATA], offset=32)
    client.register_system_shared_memory("b", regions.key("b"), 96, offset=32)
    inp = httpclient.InferInput("INPUT0", [1, 16], "FP32")
    inp.set_shared_memory("b", 64)
    np.testing.assert_array_equal(client.infer("identity_fp32", [inp]).as_numpy("OUTPUT0"), DATA)
    client.close()
    g.close()


# -- the region's owner changes it meanwhile ----------------------------------------------------------
def test_region_deleted_by_the_client_stays_valid_until_unregistered(server: ServerProcess, regions: Regions) -> None:
    ins, outs = _fill(regions)
    shm.destroy_shared_memory_region(ins)  # shm_unlink: the server still holds it
    client = httpclient.InferenceServerClient(server.http_url)
    inputs, outputs = _inputs(httpclient)
    client.infer("identity_fp32", inputs, outputs=outputs)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(outs, np.float32, [1, 16]), DATA)
    client.unregister_system_shared_memory("in")
    with pytest.raises(InferenceServerException) as info:
        client.register_system_shared_memory("in", regions.key("in"), 64)
    assert info.value.message() == f"Unable to open shared memory region: '{regions.key('in')}'"
    client.close()


@pytest.mark.parametrize("where", ["input", "output"])
def test_region_truncated_by_the_client_is_a_clean_error(server: ServerProcess, regions: Regions, where: str) -> None:
    _fill(regions)
    victim = "in" if where == "input" else "out"
    fd = os.open(f"/dev/shm/{regions.key(victim)[1:]}", os.O_RDWR)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        os.ftruncate(fd, 0)
        inputs, outputs = _inputs(grpcclient)
        with pytest.raises(InferenceServerException) as info:
            client.infer("identity_fp32", inputs, outputs=outputs)
        assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert info.value.message() == (
            f"shared memory region '{victim}' (key '{regions.key(victim)}') was truncated to 0 bytes "
            "after it was registered with offset 0 and byte size 64"
        )
        os.ftruncate(fd, 64)  # the owner puts it back: it works again, and nothing crashed meanwhile
        shm.set_shared_memory_region(regions.handles["in"], [DATA])
        client.infer("identity_fp32", inputs, outputs=outputs)
        np.testing.assert_array_equal(shm.get_contents_as_numpy(regions.handles["out"], np.float32, [1, 16]), DATA)
        assert client.is_model_ready("identity_fp32")
    finally:
        os.close(fd)
        client.close()


def test_unregister_while_in_use_lets_in_flight_requests_finish(server: ServerProcess, regions: Regions) -> None:
    _ins, outs = _fill(regions)
    client = httpclient.InferenceServerClient(server.http_url)
    inputs, outputs = _inputs(httpclient)
    results: list[Any] = []

    def run() -> None:
        c = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
        try:
            results.append(c.infer("slow_fp32", inputs, outputs=outputs))
        except Exception as exc:  # reported by the assertion below
            results.append(exc)
        c.close()

    thread = threading.Thread(target=run)
    thread.start()
    _wait_pending(server, "slow_fp32")
    client.unregister_system_shared_memory()  # both regions, while the request executes
    assert client.get_system_shared_memory_status() == []
    client.register_system_shared_memory("in", regions.key("out"), 64)  # the name is free at once
    thread.join(60)
    assert not isinstance(results[0], Exception), results[0]
    np.testing.assert_array_equal(shm.get_contents_as_numpy(outs, np.float32, [1, 16]), DATA)
    client.close()


def _wait_pending(server: ServerProcess, model: str) -> None:
    """Wait until the metrics show a request of ``model`` pending (it reached the server)."""
    import time
    import urllib.request

    line = f'nv_inference_pending_request_count{{model="{model}",version="1"}} 1'
    for _ in range(600):
        with urllib.request.urlopen(server.metrics_url, timeout=10) as resp:
            if line in resp.read().decode():
                return
        time.sleep(0.05)
    raise AssertionError("the request never reached the server")


# -- memory accounting ----------------------------------------------------------------------------------
def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_soak_leaves_memory_and_descriptors_flat(server: ServerProcess, regions: Regions) -> None:
    """A few thousand shared-memory requests (the 100k form: benchmarks/shared_memory.py --soak)."""
    assert server.proc is not None
    core = server.proc.pid
    _ins, outs = _fill(regions)
    client = httpclient.InferenceServerClient(server.http_url)
    inputs, outputs = _inputs(httpclient)

    def burst(n: int) -> None:
        for i in range(n):
            client.infer("identity_fp32" if i % 2 else "py_double", inputs, outputs=outputs)
            if i % 250 == 249:  # regions come and go as well
                client.unregister_system_shared_memory("out")
                client.register_system_shared_memory("out", regions.key("out"), 64)

    def settled() -> tuple[int, list[int]]:
        # an unregistered region's DROP frame reaches the workers a moment after the HTTP answer:
        # read the descriptor counts once they stop changing (bounded)
        last = (_fds(core), [_fds(w) for w in workers])
        for _ in range(20):
            time.sleep(0.05)
            now = (_fds(core), [_fds(w) for w in workers])
            if now == last:
                return now
            last = now
        return last

    burst(500)  # warm-up: arenas, caches, the allocator
    workers = worker_pids(core)
    before = (_rss_kib(core), *settled(), shm_entries())
    burst(3000)
    after = (_rss_kib(core), *settled(), shm_entries())
    assert after[0] <= before[0] * 1.05, f"core RSS grew from {before[0]} KiB to {after[0]} KiB"
    assert after[1:3] == before[1:3]  # no descriptor of a region or segment leaks, in the core or a worker
    mine = {e for e in before[3] | after[3] if e.startswith(regions.prefix)}
    assert {e for e in after[3] if e in mine} == {e for e in before[3] if e in mine}
    # nothing of the server's appears (client regions of other test runs on this machine aside)
    appeared = [e for e in after[3] - before[3] if e.startswith("tritium") and not e.startswith("tritium_test_")]
    assert not appeared, appeared
    client.close()


# -- perf_analyzer --------------------------------------------------------------------------------------
def _perf_analyzer() -> tuple[list[str], dict[str, str]] | None:
    """perf_analyzer and the environment it runs in (tritium-perf's), or None when it cannot run here."""
    from tritium.perf import PerfAnalyzerError, perf_analyzer_command

    try:
        return perf_analyzer_command()
    except PerfAnalyzerError:
        return None


@pytest.mark.skipif(
    _perf_analyzer() is None, reason="perf_analyzer needs libb64-0d (apt) and nvidia-cuda-runtime-cu12 (pip)"
)
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_analyzer_with_system_shared_memory(server: ServerProcess, protocol: str) -> None:
    import subprocess

    found = _perf_analyzer()
    assert found is not None
    cmd, env = found
    url = server.http_url if protocol == "http" else server.grpc_url
    run = subprocess.run(
        [
            *cmd,
            "-m",
            "identity_fp32",
            "-u",
            url,
            "-i",
            protocol,
            "--shared-memory",
            "system",
            "--output-shared-memory-size",
            "64",
            "--measurement-interval",
            "1000",
            "--stability-percentage",
            "10000",
            "--max-trials",
            "3",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Throughput:" in run.stdout
    client = httpclient.InferenceServerClient(server.http_url)
    assert client.get_system_shared_memory_status() == []  # it unregistered what it registered
    client.close()


def test_metrics_and_log_account_registered_regions(server: ServerProcess, regions: Regions) -> None:
    import urllib.request

    regions.create("m1", 64)
    regions.create("m2", 4096)
    with urllib.request.urlopen(server.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    assert 'tritium_shared_memory_region_bytes{kind="system"} 4160' in text
    assert 'tritium_shared_memory_region_count{kind="system"} 2' in text
    assert 'tritium_shared_memory_region_bytes{kind="cuda"} 0' in text
    assert "tritium_arena_reserved_bytes" in text
    assert (
        f"registered system shared memory region 'm2' (key '{regions.key('m2')}', offset 0, 4096 bytes); "
        "2 system shared memory regions of 4160 bytes registered, arena "
    ) in server.log()
