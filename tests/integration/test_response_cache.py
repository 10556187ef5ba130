"""The response cache (L0_response_cache-style): ``--cache-config local,...`` and a real Redis.

Black-box over HTTP and gRPC. TRITON_STATS holds the statistics real Triton 2.51
(nvidia-pytriton 0.7.0, ``--cache-config=local,size=1048576``) reported for the same
four requests (HTTP, HTTP, gRPC, HTTP with a custom parameter) to the same models:
the first is a miss, the other three hit (custom parameters are not part of the key).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support.ensembles import ADD_ONE, REPEAT, add_ensemble, add_python, build_repo, step
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess, free_port

X = np.arange(4, dtype=np.float32).reshape(1, 4)
CACHE = "response_cache { enable: true }"

#: Triton 2.51's counts after the four requests of test_hits_and_misses_counted_as_triton
_AFTER_ONE_MISS_THREE_HITS = {
    "success": 4,
    "queue": 4,
    "cache_hit": 3,
    "cache_miss": 1,
    "compute_infer": 1,
    "inference_count": 1,
    "execution_count": 1,
}
TRITON_STATS = {"add_one_cached": _AFTER_ONE_MISS_THREE_HITS, "ens_cached": _AFTER_ONE_MISS_THREE_HITS}
TRITON_METRICS = [
    'nv_cache_num_hits_per_model{model="add_one_cached",version="1"} 3',
    'nv_cache_num_misses_per_model{model="add_one_cached",version="1"} 1',
    'nv_cache_num_hits_per_model{model="ens_cached",version="1"} 3',
    'nv_cache_num_misses_per_model{model="ens_cached",version="1"} 1',
]


def _repo(root: Path) -> Path:
    repo = build_repo(root)
    add_python(repo, "add_one_cached", ADD_ONE, CACHE)
    add_python(repo, "repeat_cached", REPEAT, "model_transaction_policy { decoupled: true }\n" + CACHE)
    add_ensemble(
        repo,
        "ens_cached",
        [step("add_one", {"INPUT0": "IN"}, {"OUTPUT0": "mid"}), step("add_one", {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})],
        CACHE,
    )
    add_model(repo, "id_bytes_cached", identity_config("TYPE_STRING", "[ -1 ]", extra=CACHE))
    return repo


def _wait_ready(proc: ServerProcess, models: list[str]) -> None:
    client = httpclient.InferenceServerClient(proc.http_url)
    deadline = time.monotonic() + 120
    while not all(client.is_model_ready(m) for m in models):
        assert time.monotonic() < deadline, proc.log()
        time.sleep(0.2)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("cache")
    repo = _repo(root / "models")
    proc = ServerProcess(
        [repo], ["--exit-on-error=false", "--cache-config=local,size=1048576"], log_path=root / "server.log"
    )
    proc.start()
    try:
        _wait_ready(proc, ["add_one_cached", "ens_cached", "id_bytes_cached"])
        yield proc
    finally:
        proc.stop()


def _stats(proc: ServerProcess, model: str) -> dict:
    return httpclient.InferenceServerClient(proc.http_url).get_inference_statistics(model)["model_stats"][0]


def _counts(stats: dict) -> dict:
    s = stats["inference_stats"]
    return {
        "success": s["success"]["count"],
        "queue": s["queue"]["count"],
        "cache_hit": s["cache_hit"]["count"],
        "cache_miss": s["cache_miss"]["count"],
        "compute_infer": s["compute_infer"]["count"],
        "inference_count": stats["inference_count"],
        "execution_count": stats["execution_count"],
    }


def _raw_http(proc: ServerProcess, model: str, name: str, x: np.ndarray) -> bytes:
    body = json.dumps(
        {"inputs": [{"name": name, "datatype": "FP32", "shape": list(x.shape), "data": x.reshape(-1).tolist()}]}
    )
    request = urllib.request.Request(f"http://{proc.http_url}/v2/models/{model}/infer", body.encode(), method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


def _grpc_raw(proc: ServerProcess, model: str, name: str, x: np.ndarray) -> bytes:
    inp = grpcclient.InferInput(name, list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    result = grpcclient.InferenceServerClient(proc.grpc_url).infer(model, [inp])
    return result.get_response().raw_output_contents[0]


def _http(proc: ServerProcess, model: str, name: str, x: np.ndarray, **kwargs) -> np.ndarray:
    inp = httpclient.InferInput(name, list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    out = "OUTPUT0" if name == "INPUT0" else "OUT"
    return httpclient.InferenceServerClient(proc.http_url).infer(model, [inp], **kwargs).as_numpy(out)


@pytest.mark.parametrize("model, name, offset", [("add_one_cached", "INPUT0", 1), ("ens_cached", "IN", 2)])
def test_hits_and_misses_counted_as_triton(server, model, name, offset):
    first = _raw_http(server, model, name, X)  # miss: runs the model, stores the response
    second = _raw_http(server, model, name, X)  # hit
    assert second == first  # the very same bytes
    assert json.loads(first)["outputs"][0]["data"] == (X + offset).reshape(-1).tolist()
    assert np.frombuffer(_grpc_raw(server, model, name, X), np.float32).tolist() == (X + offset).reshape(-1).tolist()
    _http(server, model, name, X, parameters={"foo": 1})  # custom parameters are not part of the key
    assert _counts(_stats(server, model)) == TRITON_STATS[model]
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    for line in TRITON_METRICS:
        if f'model="{model}"' in line:
            assert line in text


def test_different_inputs_miss_and_ensemble_hits_skip_the_composing_models(server):
    before = _counts(_stats(server, "ens_cached"))
    steps_before = _stats(server, "add_one")["inference_stats"]["success"]["count"]
    y = X * 10
    np.testing.assert_array_equal(_http(server, "ens_cached", "IN", y), y + 2)
    np.testing.assert_array_equal(_http(server, "ens_cached", "IN", y), y + 2)
    after = _counts(_stats(server, "ens_cached"))
    assert (after["cache_miss"] - before["cache_miss"], after["cache_hit"] - before["cache_hit"]) == (1, 1)
    # the miss ran both add_one steps, the hit none
    assert _stats(server, "add_one")["inference_stats"]["success"]["count"] - steps_before == 2


def test_bytes_tensors_come_back_identical(server):
    data = np.array([[b"caf\xc3\xa9", b"", b"\x00\x01binary"]], dtype=np.object_)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results = []
    for _ in range(2):
        inp = grpcclient.InferInput("INPUT0", [1, 3], "BYTES")
        inp.set_data_from_numpy(data)
        results.append(client.infer("id_bytes_cached", [inp]).get_response().raw_output_contents[0])
    assert results[0] == results[1]
    counts = _counts(_stats(server, "id_bytes_cached"))
    assert (counts["cache_miss"], counts["cache_hit"]) == (1, 1)


def test_decoupled_model_cannot_enable_the_cache(server):
    assert (
        "Response Cache does not currently support model repeat_cached with 'decoupled' transaction policy. "
        "Please disable the response cache."
    ) in server.log()
    assert not httpclient.InferenceServerClient(server.http_url).is_model_ready("repeat_cached")


def _exit_status(tmp_path: Path, flag: str) -> tuple[int, str]:
    proc = ServerProcess([tmp_path], [flag], log_path=tmp_path / f"{free_port()}.log")
    proc.start(wait_ready=False)
    try:
        return proc.wait_exit(60), proc.log()
    finally:
        proc.stop()


def test_unknown_cache_and_bad_flag(tmp_path):
    status, log = _exit_status(tmp_path, "--cache-config=memcached,size=1")
    # Triton 2.51: "error: creating server: Invalid argument - unable to find 'libtritoncache_memcached.so'
    # for cache. Searched: <cache directory>", exit status 1
    assert status == 1
    assert (
        "error: creating server: Invalid argument - unable to find cache 'memcached': "
        "tritium provides the caches 'local' and 'redis'"
    ) in log
    status, log = _exit_status(tmp_path, "--cache-config=local")
    assert status == 2 and "--cache-config option format is '<cache name>,<setting>=<value>'. Got local" in log


# -- Redis ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian package redis-server; scripts/test.sh installs it)")
    port = free_port()
    folder = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(30)


def test_redis_cache_serves_identical_bytes_across_server_restarts(tmp_path, redis_port):
    import redis

    repo = tmp_path / "models"
    add_python(repo, "add_one_cached", ADD_ONE, CACHE)
    flag = f"--cache-config=redis,host=127.0.0.1,port={redis_port}"
    answers = []
    for run in range(2):
        with ServerProcess([repo], [flag], log_path=tmp_path / f"server{run}.log") as proc:
            _wait_ready(proc, ["add_one_cached"])
            answers.append(_raw_http(proc, "add_one_cached", "INPUT0", X))
            answers.append(_raw_http(proc, "add_one_cached", "INPUT0", X))
            counts = _counts(_stats(proc, "add_one_cached"))
        if run == 0:  # the first server ran the model once and stored its response in Redis
            assert (counts["cache_miss"], counts["cache_hit"], counts["execution_count"]) == (1, 1, 1)
            keys = redis.Redis(host="127.0.0.1", port=redis_port).keys("tritium:*")
            assert len(keys) == 1
        else:  # a new server finds it there: no execution at all
            assert (counts["cache_miss"], counts["cache_hit"], counts["execution_count"]) == (0, 2, 0)
    assert len(set(answers)) == 1
    assert json.loads(answers[0])["outputs"][0]["data"] == (X + 1).reshape(-1).tolist()


def test_unreachable_redis_stops_the_server(tmp_path):
    status, log = _exit_status(tmp_path, f"--cache-config=redis,host=127.0.0.1,port={free_port()}")
    assert status == 1 and "redis cache: cannot reach the Redis server at 127.0.0.1:" in log
