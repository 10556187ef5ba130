"""L0_lifecycle: loading, the backend loader's search rules, load failures, worker crashes, shutdown."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.procs import shm_entries, worker_pids
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

REPO_ROOT = Path(__file__).resolve().parents[2]

# A backend that answers with where it was loaded from (its MARK) — for the search-order tests.
WHERE_BACKEND = """
import numpy as np
MARK = "{mark}"
def TRITONBACKEND_ModelInstanceExecute(instance, requests):
    for request in requests:
        request.respond({{"OUTPUT0": np.array([MARK.encode()], dtype=object)}})
"""

WHERE_CONFIG = """
backend: "where"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_STRING dims: [ 1 ] } ]
"""


def http_get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def where(server: ServerProcess, model: str = "m") -> str:
    client = httpclient.InferenceServerClient(server.http_url)
    inp = httpclient.InferInput("INPUT0", [1], "INT32")
    inp.set_data_from_numpy(np.array([1], dtype=np.int32))
    return client.infer(model, [inp]).as_numpy("OUTPUT0")[0].decode()


def test_backend_search_order_first_match_wins(tmp_path, start_server):
    repo, backends = tmp_path / "repo", tmp_path / "backends"
    model = add_model(repo, "m", WHERE_CONFIG)
    (backends / "where").mkdir(parents=True)
    (backends / "where" / "libtriton_where.py").write_text(WHERE_BACKEND.format(mark="backend_dir"))
    (model / "libtriton_where.py").write_text(WHERE_BACKEND.format(mark="model_dir"))
    (model / "1" / "libtriton_where.py").write_text(WHERE_BACKEND.format(mark="version_dir"))
    args = [f"--backend-directory={backends}"]
    with ServerProcess([repo], args, log_path=tmp_path / "a.log") as server:
        assert where(server) == "version_dir"
    (model / "1" / "libtriton_where.py").unlink()
    with ServerProcess([repo], args, log_path=tmp_path / "b.log") as server:
        assert where(server) == "model_dir"
    (model / "libtriton_where.py").unlink()
    with ServerProcess([repo], args, log_path=tmp_path / "c.log") as server:
        assert where(server) == "backend_dir"


def test_runtime_names_another_library_file(tmp_path, start_server):
    repo = tmp_path / "repo"
    model = add_model(repo, "m", WHERE_CONFIG + 'runtime: "custom_runtime.py"\n')
    (model / "1" / "libtriton_where.py").write_text(WHERE_BACKEND.format(mark="default_name"))
    (model / "custom_runtime.py").write_text(WHERE_BACKEND.format(mark="runtime_file"))
    assert where(start_server([repo])) == "runtime_file"


def test_missing_backend_fails_alone_and_lists_every_path_searched(tmp_path, start_server):
    repo, backends = tmp_path / "repo", tmp_path / "backends"
    backends.mkdir()
    add_model(repo, "broken", WHERE_CONFIG.replace('"where"', '"nope"'))
    add_model(repo, "ok", identity_config())
    shutil.copytree(REPO_ROOT / "backends" / "identity", backends / "identity")
    server = start_server([repo], [f"--backend-directory={backends}", "--exit-on-error=false"])
    log = server.log()
    searched = [  # by the folders' roles, as clients see them; the options table names the folders
        "<model-repository>/broken/1/libtriton_nope.py",
        "<model-repository>/broken/1/libtriton_nope",
        "<model-repository>/broken/1/libtriton_nope.so",
        "<model-repository>/broken/libtriton_nope.py",
        "<model-repository>/broken/libtriton_nope.so",
        "<backend-directory>/nope/libtriton_nope.py",
        "<backend-directory>/nope/libtriton_nope.so",
    ]
    assert "failed to load 'broken' version 1: Not found: unable to find backend library for backend 'nope'" in log
    for path in searched:
        assert path in log
    assert f"| backend_directory        | {backends}" in log and f"| model_repository_path[0] | {repo}" in log
    # the broken model is unavailable, the other one serves, and the server is not ready (strict readiness)
    assert http_get(f"http://{server.http_url}/v2/models/broken") == (
        404,
        b'{"error":"Request for unknown model: \'broken\' has no available versions"}',
    )
    assert http_get(f"http://{server.http_url}/v2/health/ready")[0] == 400
    client = httpclient.InferenceServerClient(server.http_url)
    inp = httpclient.InferInput("INPUT0", [1, 16], "FP32")
    inp.set_data_from_numpy(np.ones((1, 16), np.float32))
    assert client.infer("ok", [inp]).as_numpy("OUTPUT0").tolist() == [[1.0] * 16]


def test_a_failed_model_stops_the_server_by_default(tmp_path):
    repo = tmp_path / "repo"
    add_model(repo, "broken", WHERE_CONFIG.replace('"where"', '"nope"'))
    server = ServerProcess([repo], log_path=tmp_path / "s.log")
    server.start(wait_ready=False)
    assert server.wait_exit(120) == 1
    assert "error: creating server: Internal - failed to load all models" in server.log()
    server.stop()


def test_third_party_backend_dropped_into_a_backend_directory_serves(tmp_path, start_server):
    backends, repo = tmp_path / "backends", tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "examples" / "backends" / "add_sub", backends / "add_sub")
    add_model(repo, "adder", 'backend: "add_sub"\nmax_batch_size: 0\n')  # auto-completed by the backend
    server = start_server([repo], [f"--backend-directory={backends}", "--backend-config=add_sub,greeting=hi there"])
    assert "add_sub backend says: hi there" in server.log()
    a = np.array([1.0, 2.0, 3.0], np.float32)
    b = np.array([0.5, 0.5, 0.5], np.float32)
    client = httpclient.InferenceServerClient(server.http_url)
    inputs = [httpclient.InferInput("INPUT0", [3], "FP32"), httpclient.InferInput("INPUT1", [3], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("adder", inputs)
    assert result.as_numpy("OUTPUT0").tolist() == [1.5, 2.5, 3.5]
    assert result.as_numpy("OUTPUT1").tolist() == [0.5, 1.5, 2.5]
    config = client.get_model_config("adder")
    assert [i["dims"] for i in config["input"]] == [[-1], [-1]]
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    ginputs = [grpcclient.InferInput("INPUT0", [3], "FP32"), grpcclient.InferInput("INPUT1", [2], "FP32")]
    ginputs[0].set_data_from_numpy(a)
    ginputs[1].set_data_from_numpy(b[:2])
    with pytest.raises(InferenceServerException, match=r"INPUT0 shape \[3\] != INPUT1 shape \[2\]"):
        grpc.infer("adder", ginputs)


def _slow_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    add_model(
        repo,
        "slow",
        identity_config(
            dims="[ 4 ]",
            max_batch_size=0,
            extra='parameters { key: "execute_delay_ms" value: { string_value: "1000" } }',
        ),
    )
    return repo


def test_a_killed_worker_fails_its_requests_and_is_restarted(tmp_path, start_server):
    before = shm_entries(client_regions=False)
    server = start_server([_slow_repo(tmp_path)])
    assert server.proc is not None
    [worker] = worker_pids(server.proc.pid)
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(np.arange(4, dtype=np.float32))
    failure: list[BaseException] = []

    def call() -> None:
        try:  # tritonclient.http (gevent) clients must not cross threads: one per thread
            httpclient.InferenceServerClient(server.http_url, network_timeout=60).infer("slow", [inp])
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion below
            failure.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    time.sleep(0.5)
    os.kill(worker, signal.SIGKILL)  # the worker is a child of the server this test started
    thread.join(30)
    assert len(failure) == 1
    assert "model instance 'slow_0_0': worker process was killed by signal SIGKILL" in str(failure[0])
    # the instance comes back and serves again; the server never went down
    deadline = time.monotonic() + 30
    while not client.is_model_ready("slow") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.is_model_ready("slow")
    assert client.infer("slow", [inp]).as_numpy("OUTPUT0").tolist() == [0.0, 1.0, 2.0, 3.0]
    assert worker_pids(server.proc.pid) != [worker]
    assert "restarting model instance 'slow_0_0'" in server.log()
    assert server.stop() == 0
    assert shm_entries(client_regions=False) == before


def test_sigterm_finishes_in_flight_requests_then_exits(tmp_path, start_server):
    server = start_server([_slow_repo(tmp_path)])
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(np.ones(4, np.float32))
    results: list[object] = []
    thread = threading.Thread(
        target=lambda: results.append(client.infer("slow", [inp]).as_numpy("OUTPUT0"))
    )  # only user
    thread.start()
    time.sleep(0.3)
    assert server.proc is not None
    workers = worker_pids(server.proc.pid)
    server.proc.send_signal(signal.SIGTERM)
    thread.join(30)
    assert server.wait_exit(60) == 0
    assert [r.tolist() for r in results] == [[1.0, 1.0, 1.0, 1.0]]  # type: ignore[attr-defined]
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists()


def test_command_line_errors(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tritium", *args], capture_output=True, text=True, timeout=60)

    result = run("--model-repository=x", "--no-such-flag")
    assert result.returncode == 2 and "unrecognized arguments: --no-such-flag" in result.stderr
    result = run("--model-repository=x", "--backend-config=onnxruntime,worker-isolation=bogus")
    assert result.returncode == 2
    assert (
        "--backend-config onnxruntime,worker-isolation=bogus: worker-isolation must be one of shared, model, instance"
        in result.stderr
    )
    result = run("--model-repository=x", "--backend-config=python,worker-isolation=model")
    assert result.returncode == 2
    assert "python models run in a worker process per instance, as in Triton" in result.stderr
    result = run("--model-repository=x", "--model-namespacing=true")
    assert result.returncode == 2
    assert (
        "--model-namespacing=true: tritium does not have model namespacing; it accepts --model-namespacing only with a "
        "value that asks for nothing (false)" in result.stderr
    )
    result = run("--model-repository=x", "--model-control-mode=explicit", "--load-model=*", "--load-model=a")
    assert result.returncode == 2
    assert "Wildcard model name '*' must be the ONLY startup model if specified at all." in result.stderr
    result = run("--model-repository=x", "--allow-http=maybe")
    assert result.returncode == 2 and "invalid boolean value 'maybe'" in result.stderr
    result = run()
    assert result.returncode == 2 and "--model-repository must be specified" in result.stderr


def test_metrics_count_what_statistics_count(tmp_path, start_server):
    repo = tmp_path / "repo"
    add_model(repo, "m", identity_config(dims="[ 4 ]", max_batch_size=0))
    server = start_server([repo])
    client = httpclient.InferenceServerClient(server.http_url)
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(np.ones(4, np.float32))
    for _ in range(5):
        client.infer("m", [inp])
    stats = client.get_inference_statistics("m")["model_stats"][0]
    status, body = http_get(server.metrics_url)
    assert status == 200
    text = body.decode()
    assert "# TYPE nv_inference_request_success counter" in text
    assert 'nv_inference_request_success{model="m",version="1"} 5' in text
    assert 'nv_inference_count{model="m",version="1"} 5' in text
    assert 'nv_inference_exec_count{model="m",version="1"} 5' in text
    assert 'nv_inference_request_failure{model="m",reason="BACKEND",version="1"} 0' in text
    success_us = int(stats["inference_stats"]["success"]["ns"]) // 1000
    line = next(line for line in text.splitlines() if line.startswith('nv_inference_request_duration_us{model="m"'))
    assert abs(int(line.split()[-1]) - success_us) <= 1
    assert stats["inference_count"] == 5 and stats["execution_count"] == 5


def test_an_execution_over_the_timeout_kills_and_restarts_the_worker(tmp_path, start_server):
    repo = tmp_path / "repo"
    add_model(
        repo,
        "hang",
        identity_config(
            dims="[ 4 ]",
            max_batch_size=0,
            extra='parameters { key: "execute_delay_ms" value: { string_value: "60000" } }\n'
            'parameters { key: "execute_timeout_seconds" value: { string_value: "1" } }',
        ),
    )
    add_model(repo, "ok", identity_config(dims="[ 4 ]", max_batch_size=0))
    server = start_server([repo], ["--backend-config=identity,execute-timeout-seconds=30"])
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(np.ones(4, np.float32))
    started = time.monotonic()
    with pytest.raises(InferenceServerException) as info:
        client.infer("hang", [inp])
    assert time.monotonic() - started < 20
    assert str(info.value) == (
        "[500] model instance 'hang_0_0': worker process did not finish executing within the execute timeout "
        "of 1 s and was killed"
    )
    assert client.infer("ok", [inp]).as_numpy("OUTPUT0").tolist() == [1.0] * 4  # the rest keeps serving
    deadline = time.monotonic() + 30
    while not client.is_model_ready("hang") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.is_model_ready("hang")  # restarted


def test_a_bad_execute_timeout_fails_the_model(tmp_path, start_server):
    repo = tmp_path / "repo"
    add_model(
        repo,
        "m",
        identity_config(
            dims="[ 4 ]",
            max_batch_size=0,
            extra='parameters { key: "execute_timeout_seconds" value: { string_value: "soon" } }',
        ),
    )
    server = start_server([repo], ["--exit-on-error=false"])
    assert "model 'm': execute timeout 'soon' is not a number of seconds >= 0" in server.log()


def test_a_relative_backend_directory_is_taken_from_where_the_server_starts(tmp_path):
    """``--backend-directory=backends`` names a folder relative to the server's working folder, as any path flag."""
    backends, repo = tmp_path / "backends", tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "examples" / "backends" / "add_sub", backends / "add_sub")
    add_model(repo, "adder", 'backend: "add_sub"\nmax_batch_size: 0\n')
    server = ServerProcess(["repo"], ["--backend-directory=backends"], log_path=tmp_path / "server.log", cwd=tmp_path)
    server.start()
    try:
        client = httpclient.InferenceServerClient(server.http_url)
        inputs = [httpclient.InferInput("INPUT0", [1], "FP32"), httpclient.InferInput("INPUT1", [1], "FP32")]
        inputs[0].set_data_from_numpy(np.array([2.0], np.float32))
        inputs[1].set_data_from_numpy(np.array([0.5], np.float32))
        assert client.infer("adder", inputs).as_numpy("OUTPUT0").tolist() == [2.5]
    finally:
        server.stop()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_to_the_whole_process_group_drains_like_one_to_the_server(tmp_path, sig):
    """Ctrl-C in a terminal (or a service manager's SIGTERM) reaches every process of the group;
    the workers leave it to the core, which finishes the request in flight and exits cleanly."""
    server = ServerProcess([_slow_repo(tmp_path)], log_path=tmp_path / "server.log")
    server._log = open(server.log_path, "wb")
    server.proc = subprocess.Popen(
        server.command(), stdout=server._log, stderr=subprocess.STDOUT, env=server.env, start_new_session=True
    )  # its own process group
    try:
        server.wait_live()
        inp = httpclient.InferInput("INPUT0", [4], "FP32")
        inp.set_data_from_numpy(np.ones(4, np.float32))
        results: list[object] = []

        def call() -> None:  # the client lives and is closed in its thread (its gevent hub is that thread's)
            client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
            try:
                results.append(client.infer("slow", [inp]).as_numpy("OUTPUT0"))
            finally:
                client.close()

        thread = threading.Thread(target=call)
        thread.start()
        time.sleep(0.3)
        os.killpg(server.proc.pid, sig)  # the group is the server's own (start_new_session)
        thread.join(30)
        assert server.wait_exit(60) == 0
        assert [r.tolist() for r in results] == [[1.0, 1.0, 1.0, 1.0]]  # type: ignore[attr-defined]
        log = server.log()
        assert "Traceback" not in log and "control channel failed" not in log and "killed by signal" not in log
    finally:
        server.stop()
