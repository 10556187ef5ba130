"""The openvino backend, black-box: OpenVINO IR and ONNX files over HTTP and gRPC.

Tiny ONNX models are built here and converted to IR with
``openvino.convert_model``; answers are compared with OpenVINO run in this
process. EfficientNet-Lite0 as IR is in ``test_framework_examples.py``.
"""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support import framework_models as fm
from tests.support.clients import module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def _param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


def _ir(repo: Path, name: str, config: str, batch: int | str = "batch") -> None:
    add_model(repo, name, config)
    fm.add_sub_onnx(repo / name / "source.onnx", batch)
    fm.openvino_ir(repo / name / "source.onnx", repo / name / "1" / "model.xml")
    (repo / name / "source.onnx").unlink()


def build(repo: Path) -> None:
    _ir(
        repo,
        "ov_ir",
        'backend: "openvino"\nmax_batch_size: 8\n'
        + IO
        + "dynamic_batching { max_queue_delay_microseconds: 300000 }\n"
        + _param("NUM_STREAMS", "1")
        + _param("PERFORMANCE_HINT", "LATENCY")
        + _param("INFERENCE_NUM_THREADS", "1"),
    )
    add_model(repo, "ov_onnx", 'backend: "openvino"\nmax_batch_size: 8\n' + IO)
    fm.add_sub_onnx(repo / "ov_onnx" / "1" / "model.onnx")
    _ir(repo, "ov_auto", 'backend: "openvino"\n')
    _ir(
        repo,
        "ov_padded",
        'backend: "openvino"\nmax_batch_size: 4\n' + IO + _param("ENABLE_BATCH_PADDING", "YES"),
        batch=4,
    )
    _ir(
        repo,
        "ov_reshape",
        'backend: "openvino"\nmax_batch_size: 4\n' + IO + _param("RESHAPE_IO_LAYERS", "YES"),
        batch=1,
    )
    _ir(
        repo,
        "ov_pair",
        'backend: "openvino"\nmax_batch_size: 8\n' + IO + "instance_group [ { count: 2 kind: KIND_CPU } ]\n",
    )
    _ir(repo, "bad_hint", 'backend: "openvino"\nmax_batch_size: 8\n' + IO + _param("PERFORMANCE_HINT", "FAST"))
    _ir(repo, "bad_name", 'backend: "openvino"\nmax_batch_size: 8\n' + IO.replace('"INPUT1"', '"INPUT9"'))
    _ir(repo, "bad_bin", 'backend: "openvino"\nmax_batch_size: 8\n' + IO)
    (repo / "bad_bin" / "1" / "model.bin").unlink()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from module_server(tmp_path_factory.mktemp("openvino"), build, ["--exit-on-error=false"])


def _infer(server: ServerProcess, protocol: str, model: str, a: np.ndarray, b: np.ndarray):
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    tensors = []
    for name, array in (("INPUT0", a), ("INPUT1", b)):
        tensor = module.InferInput(name, list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    try:
        return client.infer(model, tensors)
    finally:
        client.close()


def _reference(server: ServerProcess, model: str, filename: str, a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    from tritium.backends.openvino.libtriton_openvino import import_openvino

    ov = import_openvino()

    compiled = ov.Core().compile_model(f"{server.repositories[0]}/{model}/1/{filename}", "CPU")
    results = compiled({"INPUT0": a, "INPUT1": b})
    return {port.get_any_name(): np.asarray(value) for port, value in results.items()}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(("model", "filename"), [("ov_ir", "model.xml"), ("ov_onnx", "model.onnx")])
def test_ir_and_onnx_files_match_openvino_in_process(
    server: ServerProcess, protocol: str, model: str, filename: str
) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    result = _infer(server, protocol, model, a, b)
    expected = _reference(server, model, filename, a, b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), expected["OUTPUT0"])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), expected["OUTPUT1"])


def test_auto_complete_reads_the_models_inputs_and_outputs(server: ServerProcess) -> None:
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("ov_auto")
    assert config["max_batch_size"] == 4 and "dynamic_batching" in config
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("INPUT0", "TYPE_FP32", [4]),
        ("INPUT1", "TYPE_FP32", [4]),
    ]
    assert [o["name"] for o in config["output"]] == ["OUTPUT0", "OUTPUT1"]
    a = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(_infer(server, "http", "ov_auto", a, a).as_numpy("OUTPUT0"), a * 2)


def test_batch_padding_and_reshaped_io_layers(server: ServerProcess) -> None:
    a, b = np.arange(8, dtype=np.float32).reshape(2, 4), np.ones((2, 4), np.float32)
    padded = _infer(server, "http", "ov_padded", a, b)  # the model takes exactly 4 rows
    assert padded.as_numpy("OUTPUT0").shape == (2, 4)
    np.testing.assert_array_equal(padded.as_numpy("OUTPUT1"), a - b)
    reshaped = _infer(server, "grpc", "ov_reshape", a, b)  # the IR was fixed at 1 row
    np.testing.assert_array_equal(reshaped.as_numpy("OUTPUT0"), a + b)


def test_a_dynamic_batch_returns_each_request_its_rows(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    before = client.get_inference_statistics("ov_ir")["model_stats"][0]
    rng = np.random.default_rng(2)
    pairs = [
        (rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal((n, 4)).astype(np.float32))
        for n in (1, 3, 2)
    ]
    with concurrent.futures.ThreadPoolExecutor(len(pairs)) as pool:
        results = list(pool.map(lambda ab: _infer(server, "http", "ov_ir", *ab), pairs))
    for (a, b), result in zip(pairs, results):
        np.testing.assert_allclose(result.as_numpy("OUTPUT0"), a + b, rtol=1e-6)
    after = client.get_inference_statistics("ov_ir")["model_stats"][0]
    assert int(after["execution_count"]) - int(before["execution_count"]) < len(pairs)


def test_two_instances_serve_at_once(server: ServerProcess) -> None:
    a = np.ones((1, 4), np.float32)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: _infer(server, "http", "ov_pair", a, a), range(8)))
    assert all(np.array_equal(r.as_numpy("OUTPUT1"), np.zeros((1, 4), np.float32)) for r in results)
    stats = httpclient.InferenceServerClient(server.http_url).get_inference_statistics("ov_pair")["model_stats"][0]
    assert int(stats["inference_count"]) == 8


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            "bad_hint",
            "Invalid argument: parameter 'PERFORMANCE_HINT' of model 'bad_hint' must be one of LATENCY, "
            "THROUGHPUT, CUMULATIVE_THROUGHPUT, got 'FAST'",
        ),
        (
            "bad_name",
            "Invalid argument: unable to load model 'bad_name', unexpected inference input 'INPUT9', "
            "allowed inputs are: INPUT0, INPUT1",
        ),
        ("bad_bin", "Not found: unable to find '"),
    ],
)
def test_bad_models_fail_to_load_with_the_reason(server: ServerProcess, model: str, message: str) -> None:
    line = next(line for line in server.log().splitlines() if f"failed to load '{model}' version 1: " in line)
    assert message in line
    assert httpclient.InferenceServerClient(server.http_url).is_model_ready("ov_ir")


def test_missing_openvino_is_a_clear_load_error(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    add_model(
        repo,
        "needs_openvino",
        'backend: "openvino"\nmax_batch_size: 8\n' + IO,
        files={"1/model.xml": "<net/>", "1/model.bin": ""},
    )
    server = ServerProcess(
        [repo],
        ["--exit-on-error=false"],
        log_path=tmp_path / "server.log",
        env=fm.without_package(tmp_path, "openvino"),
    )
    server.start()
    try:
        assert not httpclient.InferenceServerClient(server.http_url).is_model_ready("needs_openvino")
        assert (
            "failed to load 'needs_openvino' version 1: Unavailable: the openvino backend needs the openvino "
            "package: pip install 'tritium[openvino]' (No module named 'openvino')"
        ) in server.log()
    finally:
        server.stop()


def test_the_backend_imports_openvino_without_its_usage_telemetry() -> None:
    # ``import openvino`` alone starts a thread that sends a Google Analytics event; the backend's import does not
    script = (
        "import sys, threading\n"
        "from tritium.backends.openvino.libtriton_openvino import import_openvino\n"
        "ov = import_openvino()\n"
        "print(sorted(t.name for t in threading.enumerate()), sys.modules['openvino_telemetry'])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout == "['MainThread'] None\n"


def test_many_instances_load_at_once_in_one_worker(tmp_path: Path) -> None:
    # first use of OpenVINO's bindings from several loader threads at once deadlocked (pybind11's numpy glue)
    repo = tmp_path / "models"
    for n in range(4):
        _ir(repo, f"ov_{n}", 'backend: "openvino"\nmax_batch_size: 8\n' + IO + "instance_group [ { count: 3 } ]\n")
    server = ServerProcess([repo], [], log_path=tmp_path / "server.log")
    server.start(timeout=60)
    try:
        client = httpclient.InferenceServerClient(server.http_url)
        assert all(client.is_model_ready(f"ov_{n}") for n in range(4))
    finally:
        server.stop()
