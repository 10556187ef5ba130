"""The ``python`` backend: Triton ``model.py`` files served unchanged (load, execute, errors, pb_utils).

Black-box: one tritium-server subprocess for the module, on a repository of
small ``model.py`` models, driven with ``tritonclient`` and plain HTTP.
Expected messages are Triton 2.51's python backend, as recorded in
/work/ref/REPORT.md (``broken_init``, ``exec_error``) or observed on the real
server with the same model files; the deliberate differences (an output the
config does not declare, an output of the wrong datatype: Triton passes them
on silently) are marked where they are tested. Decoupled models and BLS are in
test_python_backend_streaming.py.
"""

from __future__ import annotations

import importlib.util
import json
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import http_call, module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

FP32_IO = """
    backend: "python"
    max_batch_size: 0
    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
    output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

ARGS_MODEL = """
    import json
    import sys
    import numpy as np
    import triton_python_backend_utils as pb_utils
    import helper  # a file next to model.py: the version folder is on sys.path, as in Triton

    class TritonPythonModel:
        def initialize(self, args):
            self.info = {
                "args": args,
                "module": __name__,
                "helper": helper.VALUE,
                "pb_utils": pb_utils.__file__,
                "model_dir": pb_utils.get_model_dir(),
            }

        def execute(self, requests):
            out = np.array([json.dumps(self.info).encode()], dtype=np.object_)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
"""

REQUEST_INFO_MODEL = """
    import json
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                inputs = []
                for tensor in request.inputs():
                    array = tensor.as_numpy()
                    inputs.append({
                        "name": tensor.name(), "dtype": str(array.dtype), "shape": tensor.shape(),
                        "writeable": bool(array.flags.writeable), "owndata": bool(array.flags.owndata),
                        "elements": sorted({type(x).__name__ for x in array.flat}) if array.dtype == object else None,
                        "is_cpu": tensor.is_cpu(),
                    })
                info = {
                    "id": request.request_id(), "correlation_id": request.correlation_id(),
                    "flags": request.flags(), "parameters": request.parameters(), "timeout": request.timeout(),
                    "requested": sorted(request.requested_output_names()),
                    "requested_type": type(request.requested_output_names()).__name__,
                    "inputs": inputs, "is_cancelled": request.is_cancelled(),
                }
                x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                responses.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=np.object_)),
                    pb_utils.Tensor("OUTPUT0", x),  # the input view itself, sent back without a copy
                ]))
            return responses
"""

BYTES_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                s = pb_utils.get_input_tensor_by_name(request, "S").as_numpy()
                assert s.dtype == np.object_ and all(type(x) is bytes for x in s.flat), s
                reversed_ = np.array([x[::-1] for x in s.flat], dtype=np.object_).reshape(s.shape)
                mixed = np.array([b"raw", "w\\u00f6rld", 7], dtype=np.object_)
                responses.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("REVERSED", reversed_),
                    pb_utils.Tensor("MIXED", mixed),
                    pb_utils.Tensor("FIXED", np.array([b"ab", b"c"], dtype=np.bytes_)),
                ]))
            return responses
"""

AUTOCOMPLETE_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        @staticmethod
        def auto_complete_config(auto_complete_model_config):
            config = auto_complete_model_config
            assert config.as_dict()["input"] == [] and config.as_dict()["max_batch_size"] == 0
            config.set_max_batch_size(4)
            config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]})
            config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]})
            config.set_dynamic_batching()
            return config

        def execute(self, requests):
            return [
                pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() * 2)])
                for r in requests
            ]
"""

AUTOCOMPLETE_NO_CONFIG_MODEL = """
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        @staticmethod
        def auto_complete_config(config):
            config.add_input({"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [2]})
            config.add_output({"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [2]})
            config.set_model_transaction_policy(dict(decoupled=False))
            return config

        def execute(self, requests):
            return [
                pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() + 1)])
                for r in requests
            ]
"""

AUTOCOMPLETE_RAISES_MODEL = """
    class TritonPythonModel:
        @staticmethod
        def auto_complete_config(config):
            config.set_max_batch_size(2)
            return config

        def execute(self, requests):
            return []
"""

AUTOCOMPLETE_RETURNS_NONE_MODEL = """
    class TritonPythonModel:
        @staticmethod
        def auto_complete_config(config):
            config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]})

        def execute(self, requests):
            return []
"""

# /work/ref/models/broken_init/1/model.py, byte for byte
BROKEN_INIT_MODEL = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("boom: deliberate failure in initialize")

    def execute(self, requests):
        return []
"""

NESTED_INIT_MODEL = """
    class MyError(Exception):
        pass

    def helper(what):
        raise MyError("nested " + what)

    class TritonPythonModel:
        def initialize(self, args):
            helper("boom")

        def execute(self, requests):
            return []
"""

IMPORT_ERROR_MODEL = """
    import numpy as np
    import no_such_module_for_tritium_tests

    class TritonPythonModel:
        def execute(self, requests):
            return []
"""

SYNTAX_ERROR_MODEL = """
    class TritonPythonModel:
        def execute(self, requests)
            return []
"""

# /work/ref/models/exec_error/1/model.py, byte for byte
EXEC_ERROR_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        pass

    def execute(self, requests):
        responses = []
        for req in requests:
            v = int(pb_utils.get_input_tensor_by_name(req, "INPUT0").as_numpy().flatten()[0])
            if v == 5:
                raise ValueError("raised in execute")
            if v == 0:
                responses.append(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("OUTPUT0", np.array([v], dtype=np.int32))]))
            elif v == 1:
                responses.append(pb_utils.InferenceResponse(output_tensors=[],
                    error=pb_utils.TritonError("model says no")))
            else:
                code = {2: pb_utils.TritonError.UNAVAILABLE, 3: pb_utils.TritonError.INVALID_ARG,
                        4: pb_utils.TritonError.NOT_FOUND}[v]
                responses.append(pb_utils.InferenceResponse(output_tensors=[],
                    error=pb_utils.TritonError("model says no with code", code)))
        return responses
"""

EXEC_ERROR_CONFIG = """
    backend: "python"
    max_batch_size: 0
    input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
    output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
    instance_group [ { count: 1 kind: KIND_CPU } ]
"""

BAD_RESPONSES_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    def ok():
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.array([1], dtype=np.int32))])

    class TritonPythonModel:
        def execute(self, requests):
            mode = int(pb_utils.get_input_tensor_by_name(requests[0], "INPUT0").as_numpy()[0])
            if mode == 0:
                return [pb_utils.InferenceResponse([pb_utils.Tensor("BOGUS", np.array([1], dtype=np.int32))])]
            if mode == 1:
                return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.array([1.5]))])]
            if mode == 2:
                return []
            if mode == 3:
                return None
            if mode == 4:
                return 5
            if mode == 5:
                return [5]
            if mode == 6:
                return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.array(["text"]))])]
            if mode == 7:
                return [ok(), ok()]
            if mode == 8:  # the response sender works for a model that is not decoupled too
                requests[0].get_response_sender().send(ok(), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return None
            if mode == 9:  # no outputs at all: Triton sends the response as it is
                return [pb_utils.InferenceResponse([])]
            return [ok()]
"""

DLPACK_MODEL = """
    import json
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
                back = pb_utils.Tensor.from_dlpack("OUTPUT0", tensor.to_dlpack())
                info = {
                    "is_cpu": back.is_cpu(),
                    "protocol": np.from_dlpack(tensor).tolist(),  # pb_utils.Tensor speaks __dlpack__ too
                }
                try:
                    pb_utils.Tensor("S", np.array([b"a"], dtype=np.object_)).to_dlpack()
                except pb_utils.TritonModelException as exc:
                    info["bytes_error"] = str(exc)
                try:
                    import torch
                except ImportError:
                    info["torch"] = None
                else:
                    doubled = torch.utils.dlpack.from_dlpack(tensor.to_dlpack()) * 2
                    out = pb_utils.Tensor.from_dlpack("DOUBLED", torch.utils.dlpack.to_dlpack(doubled))
                    bf16 = pb_utils.Tensor.from_dlpack("BF16", torch.tensor([1.5, -2.0], dtype=torch.bfloat16))
                    info["torch"] = [out.as_numpy().tolist(), str(out.as_numpy().dtype), bf16.as_numpy().tolist()]
                responses.append(pb_utils.InferenceResponse([
                    back, pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=np.object_)),
                ]))
            return responses
"""

LOGGER_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            pb_utils.Logger.log_info("pb-logger info line")
            pb_utils.Logger.log_warn("pb-logger warn line")
            pb_utils.Logger.log_error("pb-logger error line")
            pb_utils.Logger.log_verbose("pb-logger verbose line")
            pb_utils.Logger.log("pb-logger log line", pb_utils.Logger.WARNING)

        def execute(self, requests):
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.zeros(1, np.float32))]) for _ in requests]
"""

TIMES_THREE_MODEL = """
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            return [
                pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() * 3)])
                for r in requests
            ]
"""

ASYNC_RAISES_MODEL = """
    import asyncio
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        async def execute(self, requests):
            await asyncio.sleep(0.01)
            if pb_utils.get_input_tensor_by_name(requests[0], "INPUT0").as_numpy()[0] < 0:
                raise ValueError("async boom")
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.array([1.0], np.float32))]) for _ in requests]
"""

NO_EXECUTE_MODEL = """
    class TritonPythonModel:
        pass
"""

NO_CLASS_MODEL = """
    VALUE = 1
"""


def _line_of(text: str, needle: str) -> int:
    """1-based line number of the first line of dedented ``text`` containing ``needle``."""
    for number, line in enumerate(textwrap.dedent(text).splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(needle)


def build_repository(repo: Path) -> None:
    add_model(
        repo,
        "args",
        """
        backend: "python"
        max_batch_size: 0
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "INFO" data_type: TYPE_STRING dims: [ 1 ] } ]
        parameters { key: "foo" value { string_value: "bar" } }
        """,
        files={"1/model.py": ARGS_MODEL, "1/helper.py": "VALUE = 'helper next to model.py'\n"},
    )
    add_model(
        repo,
        "request_info",
        """
        backend: "python"
        max_batch_size: 0
        input [
          { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] },
          { name: "S" data_type: TYPE_STRING dims: [ -1 ] optional: true }
        ]
        output [
          { name: "INFO" data_type: TYPE_STRING dims: [ 1 ] },
          { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }
        ]
        """,
        files={"1/model.py": REQUEST_INFO_MODEL},
    )
    add_model(
        repo,
        "bytes",
        """
        backend: "python"
        max_batch_size: 0
        input [ { name: "S" data_type: TYPE_STRING dims: [ -1 ] } ]
        output [
          { name: "REVERSED" data_type: TYPE_STRING dims: [ -1 ] },
          { name: "MIXED" data_type: TYPE_STRING dims: [ 3 ] },
          { name: "FIXED" data_type: TYPE_STRING dims: [ 2 ] }
        ]
        """,
        files={"1/model.py": BYTES_MODEL},
    )
    add_model(repo, "autocomplete", 'backend: "python"\n', files={"1/model.py": AUTOCOMPLETE_MODEL})
    add_model(repo, "autocomplete_no_config", None, files={"1/model.py": AUTOCOMPLETE_NO_CONFIG_MODEL})
    add_model(
        repo,
        "autocomplete_raises",
        'backend: "python"\nmax_batch_size: 8\n',
        files={"1/model.py": AUTOCOMPLETE_RAISES_MODEL},
    )
    add_model(
        repo,
        "autocomplete_none",
        'backend: "python"\n',
        files={"1/model.py": AUTOCOMPLETE_RETURNS_NONE_MODEL},
    )
    add_model(repo, "broken_init", FP32_IO, files={"1/model.py": BROKEN_INIT_MODEL})
    add_model(repo, "nested_init", FP32_IO, files={"1/model.py": NESTED_INIT_MODEL})
    add_model(repo, "import_error", FP32_IO, files={"1/model.py": IMPORT_ERROR_MODEL})
    add_model(repo, "syntax_error", FP32_IO, files={"1/model.py": SYNTAX_ERROR_MODEL})
    add_model(repo, "no_class", FP32_IO, files={"1/model.py": NO_CLASS_MODEL})
    add_model(repo, "no_execute", FP32_IO, files={"1/model.py": NO_EXECUTE_MODEL})
    add_model(repo, "async_raises", FP32_IO, files={"1/model.py": ASYNC_RAISES_MODEL})
    add_model(repo, "exec_error", EXEC_ERROR_CONFIG, files={"1/model.py": EXEC_ERROR_MODEL})
    add_model(repo, "bad_responses", EXEC_ERROR_CONFIG, files={"1/model.py": BAD_RESPONSES_MODEL})
    add_model(
        repo,
        "dlpack",
        """
        backend: "python"
        max_batch_size: 0
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
        output [
          { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] },
          { name: "INFO" data_type: TYPE_STRING dims: [ 1 ] }
        ]
        """,
        files={"1/model.py": DLPACK_MODEL},
    )
    add_model(
        repo,
        "logger",
        'backend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]\n',
        files={"1/model.py": LOGGER_MODEL},
    )
    # a model named by its file alone: `default_model_filename` other than model.py
    add_model(
        repo,
        "custom_filename",
        FP32_IO + 'default_model_filename: "my_model.py"\n',
        files={"1/my_model.py": TIMES_THREE_MODEL},
    )


READY_MODELS = [
    "args",
    "request_info",
    "bytes",
    "autocomplete",
    "autocomplete_no_config",
    "no_execute",
    "async_raises",
    "exec_error",
    "bad_responses",
    "dlpack",
    "logger",
    "custom_filename",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("python_backend")
    for proc in module_server(root, build_repository, ["--exit-on-error=false", "--log-verbose=1"]):
        deadline = time.monotonic() + 120
        for name in READY_MODELS:
            while http_call(proc, "GET", f"/v2/models/{name}/ready")[0] != 200:
                assert time.monotonic() < deadline, f"model {name} not ready:\n{proc.log()}"
                time.sleep(0.1)
        yield proc


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    triton = httpclient.InferenceServerClient(server.http_url)
    yield triton
    triton.close()


@pytest.fixture(scope="module")
def repo(server: ServerProcess) -> Path:
    return Path(server.repositories[0])


def infer(client: httpclient.InferenceServerClient, model: str, **arrays: np.ndarray) -> Any:
    inputs = []
    for name, array in arrays.items():
        datatype = "BYTES" if array.dtype == np.object_ else {np.float32: "FP32", np.int32: "INT32"}[array.dtype.type]
        tensor = httpclient.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return client.infer(model, inputs)


def infer_error(client: httpclient.InferenceServerClient, model: str, **arrays: np.ndarray) -> tuple[str | None, str]:
    with pytest.raises(InferenceServerException) as info:
        infer(client, model, **arrays)
    return info.value.status(), info.value.message()


def load_failure(server: ServerProcess, model: str) -> str:
    """The reason the log gives for ``model``'s failed load (``failed to load 'm' version 1: <reason>``)."""
    log = server.log()
    head = f"failed to load '{model}' version 1: "
    lines = log[log.index(head) + len(head) :].split("\n")
    kept = [lines[0]]
    for line in lines[1:]:  # a multi-line reason runs until the next log line ("I1130 ...")
        if len(line) > 5 and line[0] in "IWE" and line[1:5].isdigit():
            break
        kept.append(line)
    return "\n".join(kept)


def info_of(result: Any) -> Any:
    return json.loads(result.as_numpy("INFO").reshape(-1)[0])


# -- initialize(args) and where model code runs ----------------------------------------------------
def test_initialize_gets_tritons_args(
    server: ServerProcess, client: httpclient.InferenceServerClient, repo: Path
) -> None:
    info = info_of(infer(client, "args", INPUT0=np.zeros(1, np.float32)))
    args = info["args"]
    assert sorted(args) == [
        "model_config",
        "model_instance_device_id",
        "model_instance_kind",
        "model_instance_name",
        "model_name",
        "model_repository",
        "model_version",
    ]
    assert {k: v for k, v in args.items() if k != "model_config"} == {
        "model_instance_kind": "CPU",
        "model_instance_name": "args_0",
        "model_instance_device_id": "0",
        "model_repository": str(repo / "args"),
        "model_version": "1",
        "model_name": "args",
    }
    # the config as a compact JSON string: the same document the model configuration extension returns
    assert ", " not in args["model_config"] and ": " not in args["model_config"]
    status, _, body = http_call(server, "GET", "/v2/models/args/config")
    assert status == 200
    assert json.loads(args["model_config"]) == json.loads(body)
    assert json.loads(args["model_config"])["parameters"] == {"foo": {"string_value": "bar"}}
    # imported as Triton names it, with its own folder importable; pb_utils comes from the backend folder
    assert info["module"] == "1.model"
    assert info["helper"] == "helper next to model.py"
    assert info["model_dir"] == str(repo / "args" / "1")
    assert Path(info["pb_utils"]).parent.name == "python"
    assert Path(info["pb_utils"]).parent.parent.name == "backends"


def test_pb_utils_is_not_importable_outside_workers() -> None:
    # the backend puts its folder on sys.path inside its worker only: nothing is installed globally
    assert importlib.util.find_spec("triton_python_backend_utils") is None
    assert importlib.util.find_spec("c_python_backend_utils") is None


def test_default_model_filename(client: httpclient.InferenceServerClient) -> None:
    result = infer(client, "custom_filename", INPUT0=np.array([1.0, 2.0], np.float32))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.array([3.0, 6.0], np.float32))


# -- requests ------------------------------------------------------------------------------------
def test_request_attributes_over_http(client: httpclient.InferenceServerClient) -> None:
    x = np.array([1.5, 2.5], np.float32)
    s = httpclient.InferInput("S", [2], "BYTES")
    s.set_data_from_numpy(np.array([b"ab", b"\xff\x00z"], dtype=np.object_))
    x_in = httpclient.InferInput("INPUT0", [2], "FP32")
    x_in.set_data_from_numpy(x, binary_data=True)
    result = client.infer(
        "request_info",
        [x_in, s],
        request_id="rid-1",
        parameters={"p1": "v", "p2": 3, "p3": True},
        timeout=5000,
    )
    info = info_of(result)
    assert info["id"] == "rid-1"
    assert (info["correlation_id"], info["flags"], info["timeout"]) == (0, 0, 5000)
    # a JSON string, as in Triton; the reserved parameters (timeout, ...) are not the model's
    assert info["parameters"] == '{"p1":"v","p2":3,"p3":true}'
    # no outputs named: all of the model's, as a set
    assert (info["requested"], info["requested_type"]) == (["INFO", "OUTPUT0"], "set")
    assert info["is_cancelled"] is False
    assert info["inputs"] == [
        # a read-only view of shared memory: no copy (Triton's is a writable copy)
        {"name": "INPUT0", "dtype": "float32", "shape": [2], "writeable": False, "owndata": False,
         "elements": None, "is_cpu": True},
        {"name": "S", "dtype": "object", "shape": [2], "writeable": False, "owndata": False,
         "elements": ["bytes"], "is_cpu": True},
    ]  # fmt: skip
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x)


def test_request_attributes_over_grpc(server: ServerProcess) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
        tensor.set_data_from_numpy(np.array([4.0], np.float32))
        result = client.infer(
            "request_info",
            [tensor],
            request_id="rid-2",
            parameters={"p4": 2.5},
            sequence_id=42,
            sequence_start=True,
            outputs=[grpcclient.InferRequestedOutput("INFO")],
        )
    finally:
        client.close()
    info = info_of(result)
    assert (info["id"], info["correlation_id"], info["flags"]) == ("rid-2", 42, 1)
    assert info["parameters"] == '{"p4":2.5}'
    assert info["requested"] == ["INFO"]
    assert result.as_numpy("OUTPUT0") is None  # not requested: dropped


def test_bytes_in_and_out(client: httpclient.InferenceServerClient, server: ServerProcess) -> None:
    data = np.array([b"hello", "w\u00f6rld".encode(), b"", b"a\x00b", b"\xff\xfe"], dtype=np.object_)
    result = infer(client, "bytes", S=data)
    np.testing.assert_array_equal(result.as_numpy("REVERSED"), np.array([x[::-1] for x in data], dtype=np.object_))
    # an object array may hold str and other objects: Triton sends str(x) UTF-8 encoded
    assert result.as_numpy("MIXED").tolist() == [b"raw", "w\u00f6rld".encode(), b"7"]
    assert result.as_numpy("FIXED").tolist() == [b"ab", b"c"]
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        tensor = grpcclient.InferInput("S", [5], "BYTES")
        tensor.set_data_from_numpy(data)
        result = grpc.infer("bytes", [tensor])
    finally:
        grpc.close()
    assert result.as_numpy("REVERSED").tolist() == [x[::-1] for x in data]


# -- auto_complete_config --------------------------------------------------------------------------
def test_auto_complete_config(server: ServerProcess, client: httpclient.InferenceServerClient) -> None:
    status, _, body = http_call(server, "GET", "/v2/models/autocomplete/config")
    assert status == 200
    config = json.loads(body)
    assert config["max_batch_size"] == 4
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [("INPUT0", "TYPE_FP32", [-1])]
    assert [(o["name"], o["data_type"], o["dims"]) for o in config["output"]] == [("OUTPUT0", "TYPE_FP32", [-1])]
    assert config["dynamic_batching"]["preferred_batch_size"] == [4]
    result = infer(client, "autocomplete", INPUT0=np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((2, 3), 2.0, np.float32))


def test_auto_complete_without_config_file(server: ServerProcess, client: httpclient.InferenceServerClient) -> None:
    status, _, body = http_call(server, "GET", "/v2/models/autocomplete_no_config/config")
    assert status == 200
    config = json.loads(body)
    assert (config["backend"], config["default_model_filename"], config["max_batch_size"]) == (
        "python",
        "model.py",
        0,
    )
    assert config["model_transaction_policy"] == {"decoupled": False}
    result = infer(client, "autocomplete_no_config", INPUT0=np.array([1, 2], np.int32))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.array([2, 3], np.int32))


def test_auto_complete_failures_fail_the_load(server: ServerProcess, repo: Path) -> None:
    pb_utils_file = Path(__file__).resolve().parents[2] / "backends" / "python" / "triton_python_backend_utils.py"
    reason = load_failure(server, "autocomplete_raises")
    assert reason.startswith(
        "Internal: ValueError: configuration specified max_batch_size 8, but in auto-complete-config function "
        "for model 'autocomplete_raises' specified max_batch_size 2\n\nAt:\n"
    )
    model_line = _line_of(AUTOCOMPLETE_RAISES_MODEL, "set_max_batch_size(2)")
    # Triton's pure-Python ModelConfig shows in the traceback, as it does in Triton
    assert (
        f"): set_max_batch_size\n  <model-repository>/autocomplete_raises/1/model.py({model_line}): auto_complete_config\n"
        in reason
    )
    # the log's reason names the server's folders by role, as the clients' answer does
    assert f"  <backend-directory>/python/{pb_utils_file.name}(" in reason and str(repo) not in reason
    assert load_failure(server, "autocomplete_none") == (
        "Internal: auto_complete_config function in model 'autocomplete_none' must return a valid pb.ModelConfig object."
    )


# -- load failures -------------------------------------------------------------------------------
def test_initialize_exception_fails_the_load_with_the_traceback(
    server: ServerProcess, client: httpclient.InferenceServerClient, repo: Path
) -> None:
    path = "<model-repository>/broken_init/1/model.py"
    message = f"RuntimeError: boom: deliberate failure in initialize\n\nAt:\n  {path}(6): initialize\n"
    # the log line Triton writes (the traceback ends with a newline), the model's folder by role
    assert f"failed to load 'broken_init' version 1: Internal: {message}\n" in server.log()
    assert http_call(server, "GET", "/v2/models/broken_init/ready")[0] == 400
    assert client.is_model_ready("exec_error")  # the others serve


def test_load_failure_messages(server: ServerProcess, repo: Path) -> None:
    helper_line = _line_of(NESTED_INIT_MODEL, 'raise MyError("nested "')
    init_line = _line_of(NESTED_INIT_MODEL, 'helper("boom")')
    nested = "<model-repository>/nested_init/1/model.py"
    assert load_failure(server, "nested_init") == (
        f"Internal: MyError: nested boom\n\nAt:\n  {nested}({helper_line}): helper\n  {nested}({init_line}): initialize\n"
    )
    reason = load_failure(server, "import_error")
    assert reason.startswith(
        "Internal: ModuleNotFoundError: No module named 'no_such_module_for_tritium_tests'\n\nAt:\n"
        "  <model-repository>/import_error/1/model.py(3): <module>\n"
    )
    reason = load_failure(server, "syntax_error")
    assert reason.startswith("Internal: SyntaxError: ") and reason.endswith("(model.py, line 3)")
    assert load_failure(server, "no_class") == (
        "Internal: AttributeError: module '1.model' has no attribute 'TritonPythonModel'"
    )
    for name in ("nested_init", "import_error", "syntax_error", "no_class", "autocomplete_raises"):
        assert http_call(server, "GET", f"/v2/models/{name}/ready")[0] == 400


# -- execute errors --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, status, message",
    [
        (1, "500", "model says no"),
        (2, "503", "model says no with code"),
        (3, "400", "model says no with code"),
        (4, "404", "model says no with code"),
    ],
)
def test_error_responses_keep_their_code(
    client: httpclient.InferenceServerClient, value: int, status: str, message: str
) -> None:
    assert infer_error(client, "exec_error", INPUT0=np.array([value], np.int32)) == (
        status,
        message,
    )


def test_execute_exception_fails_the_request_and_the_next_one_works(
    client: httpclient.InferenceServerClient, server: ServerProcess, repo: Path
) -> None:
    path = repo / "exec_error" / "1" / "model.py"
    expected = (
        "Failed to process the request(s) for model 'exec_error_0_0', message: ValueError: raised in execute\n\n"
        f"At:\n  {path}(14): execute\n"
    )
    assert infer_error(client, "exec_error", INPUT0=np.array([5], np.int32)) == ("500", expected)
    result = infer(client, "exec_error", INPUT0=np.array([0], np.int32))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.array([0], np.int32))
    assert expected in server.log()  # logged too, as Triton does
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        tensor = grpcclient.InferInput("INPUT0", [1], "INT32")
        tensor.set_data_from_numpy(np.array([5], np.int32))
        with pytest.raises(InferenceServerException) as info:
            grpc.infer("exec_error", [tensor])
    finally:
        grpc.close()
    assert (info.value.status(), info.value.message()) == ("StatusCode.INTERNAL", expected)


PREFIX = "Failed to process the request(s) for model 'bad_responses_0_0', message: "


@pytest.mark.parametrize(
    "mode, message",
    [
        # Triton sends these on without a word (an unknown output is dropped, a float64 goes out as FP64):
        # tritium refuses them, naming the model (a deliberate difference)
        (
            0,
            "model 'bad_responses' returned output 'BOGUS', which its configuration does not declare (outputs: OUTPUT0)",
        ),
        (
            1,
            "output 'OUTPUT0' of model 'bad_responses' has dtype float64, but the model config declares TYPE_INT32",
        ),
        # Triton's messages
        (
            2,
            PREFIX + "Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
            "InferenceRequest(s) size is:1, and InferenceResponse(s) size is:0\n",
        ),
        # Triton leaves the client waiting forever here
        (3, PREFIX + "Expected a list in the execute return, found type '<class 'NoneType'>'."),
        (4, PREFIX + "Expected a list in the execute return, found type '<class 'int'>'."),
        (
            5,
            PREFIX
            + "Expected an 'InferenceResponse' object in the execute function return list, found type '<class 'int'>'.",
        ),
        (6, PREFIX + "TritonModelException: NumPy dtype is not supported.\n\nAt:\n"),
        (
            7,
            PREFIX + "Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
            "InferenceRequest(s) size is:1, and InferenceResponse(s) size is:2\n",
        ),
    ],
)
def test_bad_responses_get_a_clear_error(client: httpclient.InferenceServerClient, mode: int, message: str) -> None:
    status, text = infer_error(client, "bad_responses", INPUT0=np.array([mode], np.int32))
    assert status == "500"
    if message.endswith("At:\n"):
        assert text.startswith(message) and "): execute\n" in text
    else:
        assert text == message
    # the worker survives: the next request is answered
    np.testing.assert_array_equal(
        infer(client, "bad_responses", INPUT0=np.array([100], np.int32)).as_numpy("OUTPUT0"),
        np.array([1], np.int32),
    )


def test_response_sender_in_a_model_that_is_not_decoupled(
    client: httpclient.InferenceServerClient,
) -> None:
    result = infer(client, "bad_responses", INPUT0=np.array([8], np.int32))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.array([1], np.int32))


def test_response_without_outputs(client: httpclient.InferenceServerClient) -> None:
    result = infer(client, "bad_responses", INPUT0=np.array([9], np.int32))
    assert result.get_response()["outputs"] == []


def test_missing_execute(client: httpclient.InferenceServerClient, repo: Path) -> None:
    path = repo / "no_execute" / "1" / "model.py"
    assert infer_error(client, "no_execute", INPUT0=np.zeros(1, np.float32)) == (
        "500",
        (
            f"Failed to process the request(s) for model 'no_execute_0', message: Python model {path} does not "
            "implement `execute` method."
        ),
    )


def test_async_execute_runs_to_completion(client: httpclient.InferenceServerClient, repo: Path) -> None:
    result = infer(client, "async_raises", INPUT0=np.array([1.0], np.float32))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.array([1.0], np.float32))
    path = repo / "async_raises" / "1" / "model.py"
    line = _line_of(ASYNC_RAISES_MODEL, "async boom")
    assert infer_error(client, "async_raises", INPUT0=np.array([-1.0], np.float32)) == (
        "500",
        "Failed to process the request(s) for model 'async_raises_0', message: ValueError: async boom\n\n"
        f"At:\n  {path}({line}): execute\n",
    )


# -- DLPack, logging ---------------------------------------------------------------------------------
def test_dlpack_round_trip(client: httpclient.InferenceServerClient) -> None:
    x = np.array([1.0, -2.5, 3.25], np.float32)
    result = infer(client, "dlpack", INPUT0=x)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x)
    info = info_of(result)
    assert info["is_cpu"] is True
    assert info["protocol"] == x.tolist()
    assert info["bytes_error"] == "DLPack does not have support for string tensors."
    if importlib.util.find_spec("torch") is not None:  # the worker runs this interpreter
        assert info["torch"] == [
            (x * 2).tolist(),
            "float32",
            [16320, 49152],
        ]  # bfloat16 1.5, -2.0: raw bits


def test_logger_lines_name_the_model_file(server: ServerProcess) -> None:
    lines = [line for line in server.log().splitlines() if "pb-logger" in line]
    assert len(lines) == 5, lines
    expected = [
        ("I", "info"),
        ("W", "warn"),
        ("E", "error"),
        ("I", "verbose"),  # shown with --log-verbose=1
        ("W", "log"),
    ]
    for line, (letter, word) in zip(lines, expected):
        assert line.startswith(letter), line
        assert (
            f"model.py:{_line_of(LOGGER_MODEL, f'pb-logger {word} line')}] logger (logger_0): pb-logger {word} line"
            in line
        )
