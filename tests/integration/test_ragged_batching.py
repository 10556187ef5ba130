"""Ragged batching, black-box over HTTP and gRPC: ragged inputs, every batch-input kind, a batch output.

An ONNX model (served by the onnxruntime and the openvino backends) and a
TorchScript model (``tests/support/ragged_models.py``) take a
ragged input and the six batch inputs, and answer each request with its own
slice of ``2 * INPUT`` (BATCH_SCATTER_WITH_INPUT_SHAPE) and every batch
input's whole value, so a test sees what the model saw. Three requests of
different lengths are sent at once; the preferred batch size (4 = 1 + 1 + 2)
sends them as one batch, which the model statistics confirm. Values follow
Triton's backend library (``BackendInputCollector::ProcessBatchInput``,
``BackendOutputResponder::ProcessBatchOutput``); the load errors are the
messages real Triton 2.51 gives for the same configs.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support import framework_models as fm
from tests.support.clients import module_server
from tests.support.ragged_models import IO_CONFIG, ragged_onnx, ragged_torchscript
from tests.support.repo import add_model
from tests.support.server import ServerProcess

BATCHED = "dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 20000000 }"
ONE_INSTANCE = "instance_group [ { count: 1 kind: KIND_CPU } ]"
#: a python model reports the inputs each request brought and how many requests its execute got
PYTHON_PROBE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            names = [f"{t.name()}{list(t.as_numpy().shape)}" for t in request.inputs()]
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", x * 2),
                pb_utils.Tensor("SEEN", np.array([[n.encode() for n in names]], dtype=object)),
                pb_utils.Tensor("NREQ", np.array([[len(requests)]], dtype=np.int32)),
            ]))
        return responses
"""
PYTHON_CONFIG = """
backend: "python"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "INDEX" data_type: TYPE_FP32 source_input: "INPUT" } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "SEEN" data_type: TYPE_STRING dims: [ -1 ] },
         { name: "NREQ" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""
_PY_IO = """
backend: "python"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""
#: a third-party Python backend that lays a batch out with BatchIO and reports whether the ragged input
#: reached it as a view of the requests' arrays (no copy)
VIEW_PROBE = """
import numpy as np
from tritium.core.backend.batch_io import BatchIO


def TRITONBACKEND_ModelInstanceExecute(instance, requests):
    layout = BatchIO.from_config(instance.model.config)
    inputs = layout.inputs(requests)
    view = int(all(np.shares_memory(inputs["INPUT"], r.inputs["INPUT"]) for r in requests))
    parts = layout.scatter(requests, "OUT", inputs["INPUT"] * 2)
    for request, part in zip(requests, parts):
        request.respond({"OUT": part, "VIEW": np.full((part.shape[0], 1), view, np.int32)})
"""
#: configs real Triton 2.51 refuses -> its message (after "Invalid argument: ")
BAD_CONFIGS = {
    "bad_source": (
        'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 source_input: "NOPE" } ]',
        "unknown source input name 'NOPE' for bad_source",
    ),
    "bad_two_sources": (
        'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 '
        'source_input: [ "INPUT", "INPUT" ] } ]',
        "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 source input, got 2 for bad_two_sources",
    ),
    "bad_no_source": (
        'batch_input [ { kind: BATCH_ITEM_SHAPE target_name: "N" data_type: TYPE_FP32 } ]',
        "batch input kind 'BATCH_ITEM_SHAPE' expects 1 source input, got 0 for bad_no_source",
    ),
    "bad_type": (
        'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_INT64 source_input: "INPUT" } ]',
        "batch input data type must be TYPE_INT32 or TYPE_FP32 for bad_type",
    ),
    "bad_no_type": (
        'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" source_input: "INPUT" } ]',
        "unexpected batch input data type 'TYPE_INVALID'",
    ),
    "bad_target": (
        'batch_output [ { target_name: "NOPE" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]',
        "unknown target output name 'NOPE' for bad_target",
    ),
    "bad_target_twice": (
        'batch_output [ { target_name: [ "OUT", "OUT" ] kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]',
        "target output name 'OUT' can only be specified once for bad_target_twice",
    ),
    "bad_output_source": (
        'batch_output [ { target_name: "OUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "NOPE" } ]',
        "unknown source input name 'NOPE' for bad_output_source",
    ),
    "bad_output_no_source": (
        'batch_output [ { target_name: "OUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE } ]',
        "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 0 for bad_output_no_source",
    ),
}


def build(repo: Path) -> None:
    onnx_config = f'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n{IO_CONFIG}{ONE_INSTANCE}\n'
    torch_config = f'backend: "pytorch"\nmax_batch_size: 8\n{IO_CONFIG}{ONE_INSTANCE}\n'
    add_model(repo, "ort_ragged", onnx_config + BATCHED)
    ragged_onnx(repo / "ort_ragged" / "1" / "model.onnx")
    add_model(repo, "ort_ragged_alone", onnx_config)  # no dynamic batcher: each request runs on its own
    ragged_onnx(repo / "ort_ragged_alone" / "1" / "model.onnx")
    add_model(repo, "ov_ragged", f'backend: "openvino"\nmax_batch_size: 8\n{IO_CONFIG}{ONE_INSTANCE}\n' + BATCHED)
    ragged_onnx(repo / "ov_ragged" / "1" / "model.onnx")  # the openvino backend reads ONNX files too
    add_model(repo, "pt_ragged", torch_config + BATCHED)
    ragged_torchscript(repo / "pt_ragged" / "1" / "model.pt")
    add_model(repo, "py_ragged", PYTHON_CONFIG + BATCHED, files={"1/model.py": PYTHON_PROBE})
    add_model(
        repo,
        "view_probe",
        'backend: "view_probe"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]\n'
        'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "VIEW" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'batch_output [ { target_name: "OUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]\n'
        f"{ONE_INSTANCE}\n{BATCHED}",
        files={"libtriton_view_probe.py": VIEW_PROBE},
    )
    for name, (extra, _message) in BAD_CONFIGS.items():
        add_model(repo, name, _PY_IO + extra, files={"1/model.py": PYTHON_PROBE})
    add_model(
        repo,
        "bad_onnx_shape",  # the ragged input is [batch, 4] in the ONNX model, not [-1]
        'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] allow_ragged_batch: true },'
        '        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
    )
    fm.add_sub_onnx(repo / "bad_onnx_shape" / "1" / "model.onnx")
    add_model(
        repo,
        "bad_onnx_target",  # a batch input the ONNX model does not take
        'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n' + IO_CONFIG.replace('target_name: "F"', 'target_name: "G"'),
    )
    ragged_onnx(repo / "bad_onnx_target" / "1" / "model.onnx")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    good = ("ort_ragged", "ort_ragged_alone", "pt_ragged", "ov_ragged", "py_ragged", "view_probe")
    yield from module_server(
        tmp_path_factory.mktemp("ragged"),
        build,
        ["--model-control-mode=explicit", *(f"--load-model={m}" for m in good)],
    )


def _client(server: ServerProcess, protocol: str) -> Any:
    if protocol == "http":
        return httpclient.InferenceServerClient(server.http_url)
    return grpcclient.InferenceServerClient(server.grpc_url)


def _infer(server: ServerProcess, protocol: str, model: str, x: np.ndarray) -> Any:
    module = httpclient if protocol == "http" else grpcclient
    client = _client(server, protocol)
    try:
        tensor = module.InferInput("INPUT", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        return client.infer(model, [tensor])
    finally:
        client.close()


def _stats(server: ServerProcess, model: str) -> tuple[int, int]:
    """``(execution_count, inference_count)`` of ``model``."""
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        stats = client.get_inference_statistics(model)["model_stats"][0]
    finally:
        client.close()
    return int(stats["execution_count"]), int(stats["inference_count"])


def _concurrently(server: ServerProcess, protocol: str, model: str, inputs: list[np.ndarray]) -> list[Any]:
    with concurrent.futures.ThreadPoolExecutor(len(inputs)) as pool:
        return list(pool.map(lambda x: _infer(server, protocol, model, x), inputs))


#: three requests of different lengths: shapes [1, 3], [1, 5] and [2, 2] (4 batch items, 12 elements)
REQUESTS = [
    np.arange(3, dtype=np.float32).reshape(1, 3) + 10,
    np.arange(5, dtype=np.float32).reshape(1, 5) + 20,
    np.arange(4, dtype=np.float32).reshape(2, 2) + 30,
]


def _expected_batch_inputs(batch: list[np.ndarray]) -> dict[str, list[Any]]:
    """Each batch input's value for ``batch`` (the requests' source inputs, in batch order), as Triton computes it."""
    counts = [int(x.size) for x in batch]
    accumulated = np.cumsum(counts).tolist()
    items = [list(x.shape[1:]) for x in batch for _ in range(x.shape[0])]
    return {
        "E_OUT": counts,
        "A_OUT": accumulated,
        "Z_OUT": [0, *accumulated],
        "M_OUT": [max(counts)],
        "S_OUT": [d for item in items for d in item],  # [items, 1], flattened by the model
        "F_OUT": [d for item in items for d in item],
    }


@pytest.mark.parametrize("model", ["ort_ragged", "pt_ragged", "ov_ragged"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_mixed_lengths_run_as_one_batch_with_every_batch_input(
    server: ServerProcess, model: str, protocol: str
) -> None:
    executions, items = _stats(server, model)
    results = _concurrently(server, protocol, model, REQUESTS)
    assert _stats(server, model) == (executions + 1, items + 4)  # one execution of 4 batch items
    for x, result in zip(REQUESTS, results):  # each its own slice, in its own shape
        out = result.as_numpy("OUT")
        assert out.shape == x.shape and out.dtype == np.float32
        np.testing.assert_array_equal(out, x * 2)
    # the batch's order is the order the requests reached the queue: read it from the element counts
    seen = results[0].as_numpy("E_OUT")[0].astype(int).tolist()
    assert sorted(seen) == [3, 4, 5]
    batch = [next(x for x in REQUESTS if x.size == count) for count in seen]
    expected = _expected_batch_inputs(batch)
    dtypes = {"E_OUT": np.float32, "A_OUT": np.int32, "Z_OUT": np.float32, "M_OUT": np.int64}
    dtypes |= {"S_OUT": np.int32, "F_OUT": np.float32}
    for x, result in zip(REQUESTS, results):
        for name, value in expected.items():
            got = result.as_numpy(name)
            assert got.dtype == dtypes[name], name
            assert got.shape == (x.shape[0], len(value)), name  # one row per batch item of the request
            assert got.tolist() == [value] * x.shape[0], name


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_request_alone_gets_the_batch_inputs_of_a_batch_of_one(server: ServerProcess, protocol: str) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    result = _infer(server, protocol, "ort_ragged_alone", x)
    np.testing.assert_array_equal(result.as_numpy("OUT"), x * 2)
    assert result.as_numpy("E_OUT").tolist() == [[6], [6]]
    assert result.as_numpy("A_OUT").tolist() == [[6], [6]]
    assert result.as_numpy("Z_OUT").tolist() == [[0, 6], [0, 6]]
    assert result.as_numpy("M_OUT").tolist() == [[6], [6]]
    assert result.as_numpy("S_OUT").tolist() == [[3, 3], [3, 3]]
    assert result.as_numpy("F_OUT").tolist() == [[3, 3], [3, 3]]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_python_model_gets_the_ragged_requests_together_each_with_its_own_inputs(
    server: ServerProcess, protocol: str
) -> None:
    """As Triton 2.51's python backend (measured): one execute, each request only the inputs it brought
    (no flattening and no batch input: they are what a framework backend builds)."""
    executions, items = _stats(server, "py_ragged")
    results = _concurrently(server, protocol, "py_ragged", REQUESTS)
    assert _stats(server, "py_ragged") == (executions + 1, items + 4)
    for x, result in zip(REQUESTS, results):
        np.testing.assert_array_equal(result.as_numpy("OUT"), x * 2)
        assert result.as_numpy("SEEN").tolist() == [[f"INPUT{list(x.shape)}".encode()]]
        assert result.as_numpy("NREQ").tolist() == [[3]]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_batched_ragged_input_is_a_view_of_the_requests_arrays(server: ServerProcess, protocol: str) -> None:
    """The dynamic batcher lays the batch out contiguously, so the flattened ragged input costs no copy."""
    executions, _items = _stats(server, "view_probe")
    results = _concurrently(server, protocol, "view_probe", REQUESTS)
    assert _stats(server, "view_probe")[0] == executions + 1
    for x, result in zip(REQUESTS, results):
        np.testing.assert_array_equal(result.as_numpy("OUT"), x * 2)
        assert result.as_numpy("VIEW").tolist() == [[1]] * x.shape[0]


@pytest.mark.parametrize(("model", "message"), [(m, msg) for m, (_extra, msg) in BAD_CONFIGS.items()])
def test_batch_input_and_output_configs_triton_refuses(server: ServerProcess, model: str, message: str) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        with pytest.raises(InferenceServerException) as info:
            client.load_model(model)
        assert f"Invalid argument: {message}" in info.value.message()
        assert info.value.status() == "400"
    finally:
        client.close()


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            "bad_onnx_shape",
            "unable to load model 'bad_onnx_shape', configuration expects model provides input with shape [-1]  "
            "for ragged input 'INPUT0', model provides [-1,4]",
        ),
        (
            "bad_onnx_target",
            "unable to load model 'bad_onnx_target', batch input 'G' is not an input of the model, whose inputs "
            "are: A, E, F, INPUT, M, S, Z",
        ),
    ],
)
def test_onnx_model_must_take_the_ragged_and_batch_inputs(server: ServerProcess, model: str, message: str) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        with pytest.raises(InferenceServerException) as info:
            client.load_model(model)
        assert message in info.value.message()
    finally:
        client.close()
