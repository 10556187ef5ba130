"""The tensorflow backend, black-box: SavedModels and a frozen GraphDef over HTTP and gRPC.

Tiny models are built once (``tests/support/tensorflow_models.py``) and every
answer is compared with TensorFlow run in this process. One server serves
them all (TensorFlow's import takes seconds); a second, cheap one checks the
backend-config ``version`` refusal. The real examples (EfficientNet-Lite0,
``simple``, the Keras classifier) are in ``test_framework_examples.py``.
"""

from __future__ import annotations

import concurrent.futures
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support import tensorflow_models as tfm
from tests.support.clients import module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

tfm.skip_without_tensorflow()

ADD_SUB_IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
SIMPLE_IO = """
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
"""
STATE = """
sequence_batching {
  max_sequence_idle_microseconds: 10000000
  state [ {
    input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 2 ]
    initial_state { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true name: "zeros" }
  } ]
}
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
SAVEDMODEL = 'platform: "tensorflow_savedmodel"\n'
ONE = "instance_group [ { count: 1 kind: KIND_CPU } ]\n"


def _param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


#: model -> (config text, the exact load error, as the repository index reports it: "<code>: <message>")
REFUSED = {
    "bad_intra": (
        _param("TF_NUM_INTRA_THREADS", "-1"),
        "Invalid argument: parameter 'TF_NUM_INTRA_THREADS' must be non-negative number for TensorFlow model 'bad_intra'",
    ),
    "bad_share": (
        _param("MAX_SESSION_SHARE_COUNT", "0"),
        "Invalid argument: parameter 'MAX_SESSION_SHARE_COUNT' must be positive number for TensorFlow model 'bad_share'",
    ),
    "bad_init_ops": (
        _param("TF_INIT_OPS_FILE", "init.json"),
        "Unsupported: unable to load model 'bad_init_ops': the tensorflow backend does not support parameter 'TF_INIT_OPS_FILE': "
        "initialization operations from a JSON file are not run by tritium's tensorflow backend (put them in the "
        "SavedModel's main_op / init op)",
    ),
    "bad_signature": (
        _param("TF_SIGNATURE_DEF", "nope"),
        "Invalid argument: unable to load model 'bad_signature': the SavedModel has no signature 'nope' (it has scaled, "
        "serving_default; parameter TF_SIGNATURE_DEF names the one to serve)",
    ),
    "bad_tag": (
        _param("TF_GRAPH_TAG", "train"),
        "Invalid argument: unable to load model 'bad_tag': the SavedModel has no graph tagged 'train' (it has serve)",
    ),
    "bad_jit": (
        "optimization { graph { level: 5 } }\n",
        "Invalid argument: optimization graph level 5 of model 'bad_jit' is not a TensorFlow XLA global_jit_level "
        "(-1 off, 0 default, 1 ON_1, 2 ON_2)",
    ),
    "bad_trt": (
        'optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "tensorrt" } ] } }\n',
        "Unsupported: unable to load model 'bad_trt': the tensorflow backend does not run the TensorRT execution accelerator "
        "(TF-TRT); convert the model with TF-TRT beforehand, or serve a TensorRT plan",
    ),
    "bad_cpu_acc": (
        'optimization { execution_accelerators { cpu_execution_accelerator: [ { name: "openvino" } ] } }\n',
        "Invalid argument: CPU Execution Accelerator is not supported in TensorFlow backend",
    ),
    "bad_name": (
        "",  # the config names an input the signature lacks (below)
        "Invalid argument: unable to load model 'bad_name', unexpected inference input 'INPUT9', allowed inputs are: INPUT0, INPUT1",
    ),
    "bad_gpu": (
        "instance_group [ { count: 1 kind: KIND_GPU } ]\n",
        "Invalid argument: instance group bad_gpu_0 of model bad_gpu has kind KIND_GPU but no GPUs are available",
    ),
}


def build(repo: Path) -> None:
    add_model(
        repo,
        "tf_savedmodel",
        SAVEDMODEL
        + "max_batch_size: 8\n"
        + ADD_SUB_IO
        + "dynamic_batching { max_queue_delay_microseconds: 1000000 }\n"
        + ONE
        + _param("TF_NUM_INTRA_THREADS", "1")
        + _param("TF_NUM_INTER_THREADS", "1")
        + _param("TF_USE_PER_SESSION_THREADS", "true"),
    )
    tfm.add_sub_savedmodel(repo / "tf_savedmodel" / "1" / "model.savedmodel")
    add_model(
        repo,
        "tf_scaled",
        SAVEDMODEL
        + "max_batch_size: 8\n"
        + ADD_SUB_IO.replace(', { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }', "")
        + ONE
        + _param("TF_SIGNATURE_DEF", "scaled")
        + _param("TF_GRAPH_TAG", "serve")
        + "optimization { graph { level: 1 } }\n",
    )
    shutil.copytree(repo / "tf_savedmodel" / "1", repo / "tf_scaled" / "1", dirs_exist_ok=True)
    add_model(repo, "tf_auto", None)  # no config.pbtxt: everything from the SavedModel's signature
    shutil.copytree(repo / "tf_savedmodel" / "1", repo / "tf_auto" / "1", dirs_exist_ok=True)
    add_model(repo, "tf_graphdef", 'platform: "tensorflow_graphdef"\nmax_batch_size: 8\n' + SIMPLE_IO + ONE)
    tfm.simple_graphdef(repo / "tf_graphdef" / "1" / "model.graphdef")
    add_model(
        repo,
        "tf_strings",
        SAVEDMODEL
        + "max_batch_size: 4\n"
        + 'input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 2 ] } ]\n'
        + 'output [ { name: "UPPER" data_type: TYPE_STRING dims: [ 2 ] }, '
        + '{ name: "LENGTH" data_type: TYPE_INT32 dims: [ 2 ] } ]\n'
        + ONE,
    )
    tfm.strings_savedmodel(repo / "tf_strings" / "1" / "model.savedmodel")
    add_model(
        repo,
        "tf_checked",
        SAVEDMODEL
        + "max_batch_size: 4\n"
        + 'input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        + 'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        + ONE,
    )
    tfm.checked_savedmodel(repo / "tf_checked" / "1" / "model.savedmodel")
    add_model(
        repo,
        "tf_state",
        SAVEDMODEL
        + "max_batch_size: 4\n"
        + 'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        + 'output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        + STATE,
    )
    tfm.stateful_savedmodel(repo / "tf_state" / "1" / "model.savedmodel")
    for name, (extra, _message) in REFUSED.items():
        io = ADD_SUB_IO.replace('"INPUT1"', '"INPUT9"') if name == "bad_name" else ADD_SUB_IO
        group = "" if "instance_group" in extra else ONE
        add_model(repo, name, SAVEDMODEL + "max_batch_size: 8\n" + io + group + extra)
        shutil.copytree(repo / "tf_savedmodel" / "1", repo / name / "1", dirs_exist_ok=True)
    add_model(repo, "broken_savedmodel", SAVEDMODEL + "max_batch_size: 8\n" + ADD_SUB_IO + ONE)
    (repo / "broken_savedmodel" / "1" / "model.savedmodel").mkdir(parents=True)
    (repo / "broken_savedmodel" / "1" / "model.savedmodel" / "saved_model.pb").write_bytes(b"not a SavedModel")
    add_model(repo, "broken_graphdef", 'platform: "tensorflow_graphdef"\nmax_batch_size: 8\n' + SIMPLE_IO + ONE)
    (repo / "broken_graphdef" / "1" / "model.graphdef").write_bytes(b"\xff\xff not a GraphDef")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from module_server(tmp_path_factory.mktemp("tensorflow"), build, ["--exit-on-error=false"])


def _client(server: ServerProcess, protocol: str):
    module = httpclient if protocol == "http" else grpcclient
    return module, module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)


def _infer(server: ServerProcess, protocol: str, model: str, inputs: dict[str, np.ndarray], datatype: str, **kw):
    module, client = _client(server, protocol)
    tensors = []
    for name, array in inputs.items():
        tensor = module.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    try:
        return client.infer(model, tensors, **kw)
    finally:
        client.close()


def _repo(server: ServerProcess) -> Path:
    return Path(server.repositories[0])


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_savedmodel_matches_tensorflow_in_process(server: ServerProcess, protocol: str) -> None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    result = _infer(server, protocol, "tf_savedmodel", {"INPUT0": a, "INPUT1": b}, "FP32")
    expected = tfm.run_savedmodel(_repo(server) / "tf_savedmodel/1/model.savedmodel", INPUT0=a, INPUT1=b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), expected["OUTPUT0"])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), expected["OUTPUT1"])


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_signature_def_parameter_picks_the_signature(server: ServerProcess, protocol: str) -> None:
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.full((2, 4), 0.5, np.float32)
    result = _infer(server, protocol, "tf_scaled", {"INPUT0": a, "INPUT1": b}, "FP32")
    expected = tfm.run_savedmodel(_repo(server) / "tf_scaled/1/model.savedmodel", "scaled", INPUT0=a, INPUT1=b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), expected["OUTPUT0"])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * a + b)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_graphdef_matches_tensorflow_in_process(server: ServerProcess, protocol: str) -> None:
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    b = np.full((2, 16), 7, np.int32)
    result = _infer(server, protocol, "tf_graphdef", {"INPUT0": a, "INPUT1": b}, "INT32")
    total, difference = tfm.run_graphdef(
        _repo(server) / "tf_graphdef/1/model.graphdef", ["OUTPUT0", "OUTPUT1"], {"INPUT0": a, "INPUT1": b}
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), total)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), difference)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - 7)


def test_a_batch_of_mixed_requests_returns_each_its_own_rows(server: ServerProcess) -> None:
    rng = np.random.default_rng(5)
    sizes = [1, 3, 2, 1, 1]
    pairs = [
        (rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal((n, 4)).astype(np.float32)) for n in sizes
    ]
    stats_before = _stats(server, "tf_savedmodel")
    with concurrent.futures.ThreadPoolExecutor(len(pairs)) as pool:
        futures = [
            pool.submit(_infer, server, ("http", "grpc")[i % 2], "tf_savedmodel", {"INPUT0": a, "INPUT1": b}, "FP32")
            for i, (a, b) in enumerate(pairs)
        ]
        results = [f.result() for f in futures]
    for (a, b), result in zip(pairs, results):
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    stats_after = _stats(server, "tf_savedmodel")
    inferences = stats_after["inference_count"] - stats_before["inference_count"]
    executions = stats_after["execution_count"] - stats_before["execution_count"]
    assert inferences == sum(sizes)
    assert executions < len(sizes)  # the dynamic batcher ran some requests as one Session.run


def _stats(server: ServerProcess, model: str) -> dict:
    client = httpclient.InferenceServerClient(server.http_url)
    stats = client.get_inference_statistics(model)["model_stats"][0]
    return {"inference_count": int(stats["inference_count"]), "execution_count": int(stats["execution_count"])}


def test_auto_complete_from_the_savedmodel_signature(server: ServerProcess) -> None:
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("tf_auto")
    assert config["platform"] == "tensorflow_savedmodel"
    assert config["backend"] == "tensorflow"
    assert config["default_model_filename"] == "model.savedmodel"
    assert config["max_batch_size"] == 4
    assert "dynamic_batching" in config
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("INPUT0", "TYPE_FP32", [4]),
        ("INPUT1", "TYPE_FP32", [4]),
    ]
    assert [(o["name"], o["data_type"], o["dims"]) for o in config["output"]] == [
        ("OUTPUT0", "TYPE_FP32", [4]),
        ("OUTPUT1", "TYPE_FP32", [4]),
    ]
    a = np.ones((2, 4), np.float32)
    result = _infer(server, "grpc", "tf_auto", {"INPUT0": a, "INPUT1": a}, "FP32")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bytes_in_and_out_as_tf_string(server: ServerProcess, protocol: str) -> None:
    text = np.array([["tritium", "ünï"], ["", "TensorFlow"]], dtype=object)
    encoded = np.vectorize(lambda s: s.encode("utf-8"), otypes=[object])(text)
    result = _infer(server, protocol, "tf_strings", {"TEXT": encoded}, "BYTES")
    expected = tfm.run_savedmodel(_repo(server) / "tf_strings/1/model.savedmodel", TEXT=encoded)
    assert result.as_numpy("UPPER").tolist() == expected["UPPER"].tolist()
    assert result.as_numpy("UPPER").tolist() == [[b"TRITIUM", "üNï".encode()], [b"", b"TENSORFLOW"]]
    np.testing.assert_array_equal(result.as_numpy("LENGTH"), np.array([[7, 5], [0, 10]], np.int32))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_error_inside_tensorflow_fails_the_request_with_its_message(server: ServerProcess, protocol: str) -> None:
    with pytest.raises(InferenceServerException) as err:
        _infer(server, protocol, "tf_checked", {"X": np.array([[4.0, -1.0]], np.float32)}, "FP32")
    assert "TensorFlow execute failure for model 'tf_checked'" in err.value.message()
    assert "X must be >= 0" in err.value.message()
    result = _infer(server, protocol, "tf_checked", {"X": np.array([[4.0, 9.0]], np.float32)}, "FP32")
    np.testing.assert_array_equal(result.as_numpy("Y"), np.array([[2.0, 3.0]], np.float32))


def _load_error(server: ServerProcess, model: str) -> str:
    index = httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
    return next(entry.get("reason", "") for entry in index if entry["name"] == model)


@pytest.mark.parametrize("model", sorted(REFUSED))
def test_refused_settings_fail_the_load_naming_them(server: ServerProcess, model: str) -> None:
    assert _load_error(server, model) == REFUSED[model][1]


def test_broken_model_files_fail_their_own_load_only(server: ServerProcess) -> None:
    savedmodel = _load_error(server, "broken_savedmodel")
    assert savedmodel.startswith(
        "Invalid argument: unable to load model 'broken_savedmodel': cannot read the SavedModel at "
    )
    graphdef = _load_error(server, "broken_graphdef")
    assert graphdef.startswith("Internal: tensorflow failed to load model 'broken_graphdef' from ")
    client = httpclient.InferenceServerClient(server.http_url)
    assert not client.is_model_ready("broken_savedmodel") and not client.is_model_ready("broken_graphdef")
    a = np.ones((1, 16), np.int32)
    result = _infer(server, "http", "tf_graphdef", {"INPUT0": a, "INPUT1": a}, "INT32")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)


def _step(module, client, value: np.ndarray, seq: int, start: bool, end: bool, requested: bool):
    tensor = module.InferInput("INPUT", [1, 2], "FP32")
    tensor.set_data_from_numpy(value.reshape(1, 2))
    outputs = [module.InferRequestedOutput("OUTPUT")] if requested else None
    result = client.infer(
        "tf_state", [tensor], outputs=outputs, sequence_id=seq, sequence_start=start, sequence_end=end
    )
    return result.as_numpy("OUTPUT")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("requested", [False, True])
def test_stateful_sequences_carry_their_implicit_state(server: ServerProcess, protocol: str, requested: bool) -> None:
    module, client = _client(server, protocol)
    path = _repo(server) / "tf_state/1/model.savedmodel"
    rng = np.random.default_rng(7)
    steps = rng.standard_normal((2, 4, 2)).astype(np.float32)  # two sequences, four steps each
    states = [np.zeros((1, 2), np.float32), np.zeros((1, 2), np.float32)]
    base = 700 + (10 if requested else 0) + (100 if protocol == "grpc" else 0)
    try:
        for step in range(4):
            for seq in range(2):
                got = _step(module, client, steps[seq, step], base + seq, step == 0, step == 3, requested)
                expected = tfm.run_savedmodel(path, INPUT=steps[seq, step].reshape(1, 2), STATE_IN=states[seq])
                states[seq] = expected["STATE_OUT"]
                np.testing.assert_array_equal(got, expected["OUTPUT"])
    finally:
        client.close()


def test_backend_config_version_1_is_refused_with_tritons_message(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    add_model(repo, "simple", 'platform: "tensorflow_graphdef"\nmax_batch_size: 8\n' + SIMPLE_IO + ONE)
    (repo / "simple" / "1" / "model.graphdef").write_bytes(b"")
    with ServerProcess(
        [repo], ["--exit-on-error=false", "--backend-config=tensorflow,version=1"], log_path=tmp_path / "log"
    ) as proc:
        index = httpclient.InferenceServerClient(proc.http_url).get_model_repository_index()
    assert index[0]["reason"] == (
        "Invalid argument: starting from 23.04, Triton no longer supports Tensorflow 1. Please switch to Tensorflow 2."
    )
