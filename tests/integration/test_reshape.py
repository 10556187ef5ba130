"""The model config's ``reshape`` on inputs and outputs, as Triton 2.51 applies it.

Black-box: one tritium-server subprocess, python models that report the shapes they were
given, tritonclient over HTTP and gRPC. The client sends and receives the config's dims;
the model sees and produces the ``reshape`` shapes; a batching model keeps its batch
dimension outside the reshape. Expected values are Triton 2.51's on the same models.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

PLAIN = """
    backend: "python"
    max_batch_size: 0
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 6 ] reshape: { shape: [ 2, 3 ] } } ]
    output [
      { name: "y" data_type: TYPE_FP32 dims: [ 6 ] reshape: { shape: [ 3, 2 ] } },
      { name: "shape" data_type: TYPE_INT64 dims: [ -1 ] }
    ]
"""

PLAIN_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for r in requests:
                x = pb_utils.get_input_tensor_by_name(r, "x").as_numpy()
                y = x.reshape(3, 2) if x.size == 6 else x
                out.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("y", y), pb_utils.Tensor("shape", np.array(x.shape, dtype=np.int64))]))
            return out
"""

# x: [batch, 6] -> [batch, 2, 3]; s: [batch, 1] -> [batch] (reshape to a scalar per item);
# v: [batch, 3, -1] -> [batch, 3, 1, -1] (the variable dim carried across)
BATCHING = """
    backend: "python"
    max_batch_size: 8
    input [
      { name: "x" data_type: TYPE_FP32 dims: [ 6 ] reshape: { shape: [ 2, 3 ] } },
      { name: "s" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } },
      { name: "v" data_type: TYPE_INT32 dims: [ 3, -1 ] reshape: { shape: [ 3, 1, -1 ] } }
    ]
    output [
      { name: "y" data_type: TYPE_FP32 dims: [ 6 ] reshape: { shape: [ 3, 2 ] } },
      { name: "shapes" data_type: TYPE_INT64 dims: [ 10 ] }
    ]
"""

BATCHING_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for r in requests:
                x = pb_utils.get_input_tensor_by_name(r, "x").as_numpy()
                s = pb_utils.get_input_tensor_by_name(r, "s").as_numpy()
                v = pb_utils.get_input_tensor_by_name(r, "v").as_numpy()
                b = x.shape[0]
                seen = list(x.shape) + list(s.shape) + [-1] * (2 - s.ndim) + list(v.shape) + [len(requests)]
                out.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("y", (x * s.reshape(b, 1, 1)).reshape(b, 3, 2)),
                    pb_utils.Tensor("shapes", np.array([seen] * b, dtype=np.int64)),
                ]))
            return out
"""


# y has 4 elements where the config's dims say 6
MISFIT = """
    backend: "python"
    max_batch_size: 0
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 6 ] } ]
    output [ { name: "y" data_type: TYPE_FP32 dims: [ 6 ] reshape: { shape: [ 3, 2 ] } } ]
"""

MISFIT_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            return [pb_utils.InferenceResponse([pb_utils.Tensor("y", np.zeros((2, 2), np.float32))]) for _ in requests]
"""


def build_repository(repo: Path) -> None:
    add_model(repo, "reshape", PLAIN, files={"1/model.py": PLAIN_MODEL})
    add_model(repo, "reshape_batching", BATCHING, files={"1/model.py": BATCHING_MODEL})
    # the same with the dynamic batcher (a batch forms once three requests are queued)
    dynamic = BATCHING.replace(
        "max_batch_size: 8",
        "max_batch_size: 8\n    dynamic_batching { max_queue_delay_microseconds: 5000000 preferred_batch_size: [ 3 ] }",
    )
    add_model(repo, "reshape_dynamic", dynamic, files={"1/model.py": BATCHING_MODEL})
    add_model(repo, "misfit", MISFIT, files={"1/model.py": MISFIT_MODEL})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("reshape")
    yield from module_server(root, build_repository, ["--exit-on-error=true"])


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, server: ServerProcess) -> Iterator[tuple[Any, Any]]:
    module = httpclient if request.param == "http" else grpcclient
    url = server.http_url if request.param == "http" else server.grpc_url
    triton = module.InferenceServerClient(url)
    yield module, triton
    triton.close()


def _input(module: Any, name: str, array: np.ndarray, datatype: str) -> Any:
    inp = module.InferInput(name, list(array.shape), datatype)
    inp.set_data_from_numpy(array)
    return inp


def test_model_sees_reshape_client_sees_dims(client: tuple[Any, Any]) -> None:
    module, triton = client
    x = np.arange(6, dtype=np.float32)
    result = triton.infer("reshape", [_input(module, "x", x, "FP32")])
    assert result.as_numpy("shape").tolist() == [2, 3]
    y = result.as_numpy("y")
    assert y.shape == (6,) and y.tolist() == x.tolist()


def test_request_in_the_reshape_shape_is_refused(client: tuple[Any, Any]) -> None:
    module, triton = client
    with pytest.raises(InferenceServerException) as info:
        triton.infer("reshape", [_input(module, "x", np.zeros((2, 3), np.float32), "FP32")])
    assert "unexpected shape for input 'x' for model 'reshape'. Expected [6], got [2,3]. " in info.value.message()


def test_batching_keeps_the_batch_dim_outside(client: tuple[Any, Any]) -> None:
    module, triton = client
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    s = np.array([[1], [10]], np.float32)
    v = np.arange(12, dtype=np.int32).reshape(2, 3, 2)
    result = triton.infer(
        "reshape_batching",
        [_input(module, "x", x, "FP32"), _input(module, "s", s, "FP32"), _input(module, "v", v, "INT32")],
    )
    # x [2,2,3], s [2] (no second dim), v [2,3,1,2] (the -1 of 2 carried into the reshape's -1)
    assert result.as_numpy("shapes")[0].tolist()[:9] == [2, 2, 3, 2, -1, 2, 3, 1, 2]
    y = result.as_numpy("y")
    assert y.shape == (2, 6) and y.tolist() == (x * s).tolist()


def test_dynamic_batch_of_reshaped_requests(server: ServerProcess) -> None:
    """Three requests batched together: the batch dim is the sum, each gets its own rows back."""
    triton = grpcclient.InferenceServerClient(server.grpc_url)
    results: list[Any] = []
    try:
        for i in range(3):
            x = np.full((1, 6), i, np.float32)
            inputs = [
                _input(grpcclient, "x", x, "FP32"),
                _input(grpcclient, "s", np.ones((1, 1), np.float32), "FP32"),
                _input(grpcclient, "v", np.zeros((1, 3, 1), np.int32), "INT32"),
            ]
            triton.async_infer("reshape_dynamic", inputs, lambda result, error: results.append((result, error)))
        deadline_ok = _wait(lambda: len(results) == 3)
    finally:
        triton.close()
    assert deadline_ok
    assert all(e is None for _r, e in results)
    # one batch of three requests (the python backend hands them over side by side, as Triton's):
    # each saw x [1,2,3], s [1], v [1,3,1,1]
    assert [r.as_numpy("shapes")[0].tolist() for r, _e in results] == [[1, 2, 3, 1, -1, 1, 3, 1, 1, 3]] * 3
    assert sorted(r.as_numpy("y")[0, 0] for r, _e in results) == [0.0, 1.0, 2.0]
    assert all(r.as_numpy("y").shape == (1, 6) for r, _e in results)


def _wait(check: Any, timeout: float = 60.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


def test_output_that_does_not_fit_its_reshape(client: tuple[Any, Any]) -> None:
    """The model returns y of 4 elements where the config says 6: an error, never a wrong shape."""
    module, triton = client
    with pytest.raises(InferenceServerException) as info:
        triton.infer("misfit", [_input(module, "x", np.zeros(6, np.float32), "FP32")])
    assert (
        info.value.message()
        == "output 'y' of model 'misfit' version 1 has shape [2, 2], which does not fit its reshape to [6]"
    )
