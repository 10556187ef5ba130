"""``model_operations.op_library_filename`` on the onnxruntime backend: custom operation libraries.

The library is onnxruntime-extensions' (its ``ai.onnx.contrib`` ``Inverse`` operator),
copied into the model's folder; the model cannot load without it. As Triton's onnxruntime
backend, each instance's session registers the libraries before it loads the model.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support.clients import grpc_call, http_call
from tests.support.repo import add_model
from tests.support.server import ServerProcess
from tritium.proto import grpc_service_pb2 as pb

# onnxruntime_extensions sets PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python in os.environ as it
# imports: every server the suite started after this module's collection inherited pure-Python
# protobuf (test_hardening's 12 MB gRPC messages then took 11 s to parse). Its setting is undone.
_PROTOBUF_SETTING = os.environ.get("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION")
ox = pytest.importorskip("onnxruntime_extensions")
if _PROTOBUF_SETTING is None:
    os.environ.pop("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", None)
else:
    os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = _PROTOBUF_SETTING

CONFIG = {
    "backend": "onnxruntime",
    "max_batch_size": 0,
    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [2, 2]}],
    "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [2, 2]}],
    "instance_group": [{"kind": "KIND_CPU", "count": 1}],
}


def inverse_model() -> bytes:
    from onnx import TensorProto, helper

    node = helper.make_node("Inverse", ["X"], ["Y"], domain="ai.onnx.contrib")
    graph = helper.make_graph(
        [node],
        "inverse",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.contrib", 1)]
    )
    model.ir_version = 8
    return model.SerializeToString()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("op_library")
    folder = add_model(root / "models", "inverse", None)
    (folder / "1" / "model.onnx").write_bytes(inverse_model())
    shutil.copy(ox.get_library_path(), folder / "libortextensions.so")
    proc = ServerProcess([root / "models"], ["--model-control-mode=explicit"], log_path=root / "server.log")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def load(server: ServerProcess, cfg: dict[str, Any]) -> tuple[int, str]:
    body = json.dumps({"parameters": {"config": json.dumps(cfg)}}).encode()
    status, _, reply = http_call(server, "POST", "/v2/repository/models/inverse/load", body)
    return status, json.loads(reply)["error"] if reply else ""


def with_libraries(*names: str) -> dict[str, Any]:
    return {**CONFIG, "model_operations": {"op_library_filename": list(names)}}


def test_custom_operation_runs_over_http_and_grpc(server: ServerProcess) -> None:
    assert load(server, with_libraries("libortextensions.so")) == (200, "")
    x = np.array([[2, 0], [0, 4]], np.float32)
    for module, url in ((httpclient, server.http_url.replace("http://", "")), (grpcclient, server.grpc_url)):
        client = module.InferenceServerClient(url)
        try:
            tensor = module.InferInput("X", [2, 2], "FP32")
            tensor.set_data_from_numpy(x)
            assert client.infer("inverse", [tensor]).as_numpy("Y").tolist() == [[0.5, 0.0], [0.0, 0.25]]
        finally:
            client.close()


def test_without_the_library_the_model_does_not_load(server: ServerProcess) -> None:
    status, message = load(server, CONFIG)
    assert status == 400
    assert "ai.onnx.contrib:Inverse(-1) is not a registered function/op" in message


@pytest.mark.parametrize(
    ("filename", "reason"),
    [
        (
            "/usr/lib/libortextensions.so",
            "invalid model_operations.op_library_filename '/usr/lib/libortextensions.so': it must be a file name "
            "inside the model folder",
        ),
        (
            "../libortextensions.so",
            "invalid model_operations.op_library_filename '../libortextensions.so': it must be a file name inside "
            "the model folder",
        ),
    ],
)
def test_library_outside_the_model_folder_refused(server: ServerProcess, filename: str, reason: str) -> None:
    expected = f"load failed for model 'inverse': version 1 is at UNAVAILABLE state: Invalid argument: {reason};\n"
    assert load(server, with_libraries(filename)) == (400, expected)
    request = pb.RepositoryModelLoadRequest(model_name="inverse")
    request.parameters["config"].string_param = json.dumps(with_libraries(filename))
    assert grpc_call(server, "RepositoryModelLoad", request) == (grpc.StatusCode.INVALID_ARGUMENT, expected)


def test_missing_library_named(server: ServerProcess) -> None:
    status, message = load(server, with_libraries("nope.so"))
    assert status == 400
    assert message.startswith(
        "load failed for model 'inverse': version 1 is at UNAVAILABLE state: Invalid argument: model 'inverse': "
        "model_operations.op_library_filename 'nope.so' could not be registered: "
    )
