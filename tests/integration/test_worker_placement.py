"""Where model instances run (Triton's many-models-per-server density): the framework backends'
shared workers, isolation on request, worker groups, python models forked from the template
process, and what a crash or a reload in a shared worker does to the other models.

Black-box: one ``tritium-server`` (explicit model control, everything loaded) with 200 ONNX
models that each answer ``INPUT0 + i``; the worker a model instance runs in is read from the
metrics endpoint (``tritium_instance_worker_pid``).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import module_server
from tests.support.framework_models import offset_onnx
from tests.support.procs import worker_pids
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

MODELS = 200
X = np.array([1.0, 2.0, 3.0, 4.0], np.float32)


def _onnx_config(extra: str = "", count: int = 1) -> str:
    return f"""
        backend: "onnxruntime"
        max_batch_size: 0
        input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
        output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
        instance_group [ {{ count: {count} kind: KIND_CPU }} ]
        {extra}
    """


def _parameter(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}'


RANDOM_MODEL = """
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.first = np.random.rand(4).astype(np.float32)  # drawn at start-up, in this instance's process

    def execute(self, requests):
        time.sleep(0.05)  # so that requests sent together run on both instances
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", self.first)]) for _ in requests]
"""
RANDOM_CONFIG = """
    backend: "python"
    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
    output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
    instance_group [ { count: 2 kind: KIND_CPU } ]
"""


def _write_repository(root: Path) -> None:
    for i in range(MODELS):
        model = add_model(root, f"m{i:03d}", _onnx_config())
        (model / "1" / "model.onnx").write_bytes(offset_onnx(i))
    isolated = add_model(root, "isolated", _onnx_config(_parameter("worker_isolation", "model"), count=2))
    (isolated / "1" / "model.onnx").write_bytes(offset_onnx(1000))
    alone = add_model(root, "alone", _onnx_config(_parameter("worker_isolation", "instance"), count=2))
    (alone / "1" / "model.onnx").write_bytes(offset_onnx(2000))
    for name, offset in (("grouped_a", 3000), ("grouped_b", 4000)):
        grouped = add_model(root, name, _onnx_config(_parameter("worker_group", "tenant")))
        (grouped / "1" / "model.onnx").write_bytes(offset_onnx(offset))
    add_model(root, "echo", identity_config(dims="[ 4 ]", max_batch_size=0))
    add_model(
        root,
        "echo_timed",
        identity_config(dims="[ 4 ]", max_batch_size=0, extra=_parameter("execute_timeout_seconds", "30")),
    )
    add_model(root, "random", RANDOM_CONFIG, files={"1/model.py": RANDOM_MODEL})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = ["--model-control-mode=explicit", "--load-model=*", "--model-load-thread-count=8"]
    yield from module_server(tmp_path_factory.mktemp("placement"), _write_repository, args)


def _http_infer(client: httpclient.InferenceServerClient, model: str) -> np.ndarray:
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(X)
    return client.infer(model, [inp]).as_numpy("OUTPUT0")


def _grpc_infer(client: grpcclient.InferenceServerClient, model: str) -> np.ndarray:
    inp = grpcclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(X)
    return client.infer(model, [inp]).as_numpy("OUTPUT0")


def _pid(server: ServerProcess, model: str) -> int:
    [pid] = set(server.instance_pids(model).values())
    return pid


def _wait_restarted(server: ServerProcess, model: str, victim: int, timeout: float = 120.0) -> None:
    """Until ``model``'s instances run in a worker other than ``victim`` and it is READY again."""
    client = httpclient.InferenceServerClient(server.http_url)
    deadline = time.monotonic() + timeout
    while victim in server.instance_pids(model).values() or not client.is_model_ready(model):
        assert time.monotonic() < deadline, f"{model} not restarted after {timeout} s"
        time.sleep(0.1)
    client.close()


def test_200_models_share_one_worker_and_each_answers_its_own_values(server: ServerProcess) -> None:
    shared = _pid(server, "m000")
    assert {_pid(server, f"m{i:03d}") for i in range(MODELS)} == {shared}

    def check(i: int) -> None:
        model = f"m{i:03d}"
        http = httpclient.InferenceServerClient(server.http_url)
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        assert _http_infer(http, model).tolist() == (X + i).tolist()
        assert _grpc_infer(grpc, model).tolist() == (X + i).tolist()
        http.close()
        grpc.close()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(check, range(MODELS)))
    metrics = server.wait_metrics()
    assert f'tritium_worker_instances{{pid="{shared}",worker="onnxruntime shared worker"}} 200\n' in metrics


def test_isolation_and_groups_are_honoured(server: ServerProcess) -> None:
    shared = _pid(server, "m000")
    isolated = server.instance_pids("isolated")
    alone = server.instance_pids("alone")
    assert sorted(isolated) == ["isolated_0_0", "isolated_0_1"] and len(set(isolated.values())) == 1
    assert sorted(alone) == ["alone_0_0", "alone_0_1"] and len(set(alone.values())) == 2
    group = _pid(server, "grouped_a")
    assert _pid(server, "grouped_b") == group
    echo = _pid(server, "echo")  # another backend: another shared worker
    timed = _pid(server, "echo_timed")  # a model with an execute timeout: a worker of its own by default
    pids = [shared, *set(isolated.values()), *alone.values(), group, echo, timed]
    assert len(set(pids)) == len(pids)
    assert set(pids) <= set(worker_pids(server.proc.pid))  # type: ignore[union-attr]
    # ps shows what each worker hosts (its command line), top and ps -e its name
    assert _cmdline(shared) == "tritium-worker onnxruntime shared worker"
    assert _cmdline(group) == "tritium-worker onnxruntime worker group 'tenant'"
    assert _cmdline(next(iter(isolated.values()))) == "tritium-worker model 'isolated'"
    assert {_cmdline(pid) for pid in alone.values()} == {"tritium-worker alone_0_0", "tritium-worker alone_0_1"}
    client = httpclient.InferenceServerClient(server.http_url)
    for model, offset in (("isolated", 1000), ("alone", 2000), ("grouped_a", 3000), ("grouped_b", 4000)):
        assert _http_infer(client, model).tolist() == (X + offset).tolist()
    assert _http_infer(client, "echo").tolist() == X.tolist()


def test_python_instances_are_forked_from_the_template_each_with_its_own_random_state(server: ServerProcess) -> None:
    pids = server.instance_pids("random")
    assert len(set(pids.values())) == 2  # a process per python model instance
    template = {_parent(pid) for pid in pids.values()}
    assert len(template) == 1
    [template_pid] = template
    assert Path(f"/proc/{template_pid}/comm").read_text().strip() == "tritium-tmpl"
    assert _parent(template_pid) == server.proc.pid  # type: ignore[union-attr]

    def draw(_: int) -> tuple[float, ...]:
        return tuple(_http_infer(httpclient.InferenceServerClient(server.http_url), "random").tolist())

    with concurrent.futures.ThreadPoolExecutor(4) as pool:  # in flight together: both instances answer
        seen = set(pool.map(draw, range(16)))
    assert len(seen) == 2  # forked from one template, yet numpy's generator was reseeded in each


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ").decode()


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _hammer(server: ServerProcess, models: list[str], stop: threading.Event, errors: dict[str, list[str]]) -> None:
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    while not stop.is_set():
        for model in models:
            try:
                out = _http_infer(client, model)
                offset = 0 if model == "echo" else int(model[1:])
                assert out.tolist() == (X + offset).tolist(), (model, out)
            except InferenceServerException as exc:
                errors.setdefault(model, []).append(str(exc))


def test_a_crash_in_an_isolated_worker_touches_nothing_else(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    shared, victim = _pid(server, "m000"), _pid(server, "isolated")
    stop, errors = threading.Event(), {}
    threads = [threading.Thread(target=_hammer, args=(server, ["m001", "m002", "echo"], stop, errors))]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    os.kill(victim, signal.SIGKILL)  # a worker of the server this test started
    _wait_restarted(server, "isolated", victim)
    stop.set()
    for thread in threads:
        thread.join(60)
    assert errors == {}
    assert _pid(server, "m000") == shared and _pid(server, "isolated") != victim
    assert _http_infer(client, "isolated").tolist() == (X + 1000).tolist()


def test_a_killed_shared_worker_fails_only_its_models_requests_and_they_come_back(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    victim = _pid(server, "m000")
    stop, errors = threading.Event(), {}
    threads = [
        threading.Thread(target=_hammer, args=(server, models, stop, errors))
        for models in (["m010", "m011"], ["m150", "m199"], ["echo"])
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    os.kill(victim, signal.SIGKILL)
    for i in range(MODELS):
        _wait_restarted(server, f"m{i:03d}", victim)
    time.sleep(0.3)
    stop.set()
    for thread in threads:
        thread.join(60)
    assert "echo" not in errors  # the identity model's worker never noticed
    failed = [message for messages in errors.values() for message in messages]
    assert failed, "the requests in flight when the worker died failed"
    for message in failed:  # in flight: the worker's death; arriving during the restart: no instance yet
        assert "worker process was killed by signal SIGKILL" in message or "has no available instance" in message, (
            message
        )
    assert "worker process 'onnxruntime shared worker' (pid" in server.log()
    restarted = _pid(server, "m000")
    assert restarted != victim and {_pid(server, f"m{i:03d}") for i in range(MODELS)} == {restarted}
    for i in (0, 10, 199):
        assert _http_infer(client, f"m{i:03d}").tolist() == (X + i).tolist()


def test_live_reload_of_one_model_leaves_the_others_in_its_worker_alone(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    shared = _pid(server, "m005")
    stop, errors = threading.Event(), {}
    threads = [threading.Thread(target=_hammer, args=(server, models, stop, errors)) for models in (["m005"], ["m006"])]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    for _ in range(3):
        client.load_model("m005")  # a live reload: new instance beside the old, which drains and finalizes
    stop.set()
    for thread in threads:
        thread.join(60)
    assert errors == {}
    assert _pid(server, "m005") == shared == _pid(server, "m006")
    deadline = time.monotonic() + 60  # the old versions drain and finalize in the background
    while server.log().count("successfully unloaded 'm005' version 1") < 3:
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("model", "parameters", "message"),
    [
        (
            "m007",
            {"worker_isolation": "separate"},
            "model 'm007': model config parameter 'worker_isolation' is 'separate'; expected one of shared, model, "
            "instance",
        ),
        ("m007", {"worker_group": " "}, "model 'm007': model config parameter 'worker_group' is empty"),
        (
            "m007",
            {"worker_group": "g", "worker_isolation": "instance"},
            "model 'm007': 'worker_group' puts a model in a shared worker; it cannot be combined with "
            "worker_isolation 'instance'",
        ),
        (
            "random",
            {"worker_isolation": "shared"},
            "model 'random': python models run in a worker process per instance, as in Triton (their code holds "
            "global state); worker isolation 'shared' (model config parameter 'worker_isolation') is not "
            "supported for them",
        ),
    ],
)
def test_bad_isolation_settings_fail_the_load_and_the_model_keeps_serving(
    server: ServerProcess, model: str, parameters: dict[str, str], message: str
) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config(model)
    config["parameters"] = {key: {"string_value": value} for key, value in parameters.items()}
    with pytest.raises(InferenceServerException) as info:
        client.load_model(model, config=json.dumps(config))
    assert message in str(info.value)
    assert client.is_model_ready(model)  # a failed reload leaves the loaded version serving


NEEDS_TORCH = """
try:
    import torch  # read by the server (not run) to preload torch in the template process
except ImportError:
    torch = None
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]
            )
            for r in requests
        ]
"""


def test_the_template_logs_a_framework_it_cannot_preload_and_keeps_forking(tmp_path: Path, start_server) -> None:
    """A python model whose model.py imports torch asks the template to preload it; where torch
    cannot be imported the template says so in the server's log and goes on forking workers."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("this torch is a test stand-in")\n')
    repo = tmp_path / "repo"
    add_model(repo, "echo", identity_config(dims="[ 4 ]", max_batch_size=0))
    config = RANDOM_CONFIG.replace("count: 2", "count: 1")
    add_model(repo, "needs_torch", config, files={"1/model.py": NEEDS_TORCH})
    server = start_server([repo], env={"PYTHONPATH": str(tmp_path / "fake")})
    client = httpclient.InferenceServerClient(server.http_url)
    assert _http_infer(client, "needs_torch").tolist() == X.tolist()
    assert _http_infer(client, "echo").tolist() == X.tolist()
    assert "worker template: not preloading torch: ImportError: this torch is a test stand-in" in server.log()
    [template] = {_parent(pid) for pid in server.instance_pids("needs_torch").values()}
    assert Path(f"/proc/{template}/comm").read_text().strip() == "tritium-tmpl"
    assert _parent(_pid(server, "echo")) == template
