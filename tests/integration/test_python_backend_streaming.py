"""The ``python`` backend: decoupled models over gRPC streaming, and BLS (models calling models).

Black-box: one tritium-server subprocess for the module. Decoupled models are driven through
``ModelStreamInfer`` with the generated gRPC stub (every response of the stream is seen, the
flags-only final one included); BLS models report what their inner requests returned as JSON.
Expected behaviour and messages are those of Triton 2.51's python backend on the same model
code (observed on the real server; see docs/python_backend.md for the differences).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests.support.clients import module_server
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

DECOUPLED = """
    backend: "python"
    max_batch_size: 0
    model_transaction_policy { decoupled: true }
    input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
    output [
      { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
      { name: "MSG" data_type: TYPE_STRING dims: [ 1 ] }
    ]
    instance_group [ { count: 1 kind: KIND_CPU } ]
"""

# Triton's "repeat" pattern: the responses come from a thread of the model, after execute returned
REPEAT_MODEL = """
    import threading
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            for request in requests:
                n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
                threading.Thread(target=self.stream, args=(request.get_response_sender(), n)).start()
            return None

        def stream(self, sender, n):
            for i in range(n):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

MODES_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    LAST = []

    def out(value):
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])

    def msg(text):
        return pb_utils.InferenceResponse([pb_utils.Tensor("MSG", np.array([text.encode()], dtype=np.object_))])

    class TritonPythonModel:
        def execute(self, requests):
            for request in requests:
                mode = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
                sender = request.get_response_sender()
                if mode == 0:  # an error response in the middle of the stream, then the last one with data
                    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("bad part", pb_utils.TritonError.INVALID_ARG)))
                    sender.send(out(7), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                elif mode == 1:  # one response, then execute raises
                    sender.send(out(1))
                    raise ValueError("decoupled boom")
                elif mode == 2:  # a decoupled model must return None
                    return [out(2)]
                elif mode == 3:  # the request is dropped without its final flag
                    sender.send(out(3))
                elif mode == 4:  # sending after the final flag raises
                    sender.send(out(4), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                    try:
                        sender.send(out(5))
                    except pb_utils.TritonModelException as exc:
                        LAST.append(str(exc))
                    try:
                        sender.send(None, flags=0)
                    except pb_utils.TritonModelException as exc:
                        LAST.append(str(exc))
                elif mode == 5:  # what mode 4 saw
                    sender.send(msg(" | ".join(LAST)), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                elif mode == 6:  # an output the config does not declare, then the final flag
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("BOGUS", np.array([1], np.int32))]))
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return None
"""

ASYNC_DECOUPLED_MODEL = """
    import asyncio
    import threading
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            self.active = 0
            self.most = 0

        async def execute(self, requests):
            # decoupled + async: Triton (and tritium) start the next batch while this one awaits
            self.active += 1
            self.most = max(self.most, self.active)
            await asyncio.sleep(0.5)
            self.active -= 1
            for request in requests:
                sender = request.get_response_sender()
                sender.send(pb_utils.InferenceResponse([
                    pb_utils.Tensor("OUT", np.array([self.most], np.int32)),
                    pb_utils.Tensor("MSG", np.array([threading.current_thread().name.encode()], dtype=np.object_)),
                ]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

DOUBLE_MODEL = """
    import json
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
                info = {"id": request.request_id(), "parameters": request.parameters(),
                        "correlation_id": request.correlation_id(), "flags": request.flags()}
                responses.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("Y", x * 2),
                    pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=np.object_)),
                ]))
            return responses
"""

UPPER_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            return [
                pb_utils.InferenceResponse([pb_utils.Tensor("UP", np.array(
                    [s.upper() for s in pb_utils.get_input_tensor_by_name(r, "S").as_numpy().flat], dtype=np.object_))])
                for r in requests
            ]
"""

BLS_MODEL = """
    import json
    import numpy as np
    import triton_python_backend_utils as pb_utils

    def error_of(response):
        if not response.has_error():
            return None
        return [response.error().message(), int(response.error().code())]

    def values(response):
        return {t.name(): t.as_numpy().tolist() if t.as_numpy().dtype != np.object_ else
                [x.decode() for x in t.as_numpy().flat] for t in response.output_tensors()}

    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
                x_tensor = pb_utils.get_input_tensor_by_name(request, "X")
                x = x_tensor.as_numpy()
                info = {}
                y = np.zeros_like(x)
                if mode == 0:  # plain exec() on a python model and on an identity-backend model
                    doubled = pb_utils.InferenceRequest(
                        model_name="double", inputs=[pb_utils.Tensor("X", x)], requested_output_names=["Y", "INFO"],
                        request_id="inner-1", correlation_id=7, parameters={"k": "v", "n": 3},
                    ).exec()
                    same = pb_utils.InferenceRequest(
                        model_name="ident", inputs=[pb_utils.Tensor("INPUT0", x)], requested_output_names=["OUTPUT0"],
                    ).exec()
                    y = pb_utils.get_output_tensor_by_name(doubled, "Y").as_numpy() + pb_utils.get_output_tensor_by_name(same, "OUTPUT0").as_numpy()
                    info = {"inner": json.loads(pb_utils.get_output_tensor_by_name(doubled, "INFO").as_numpy()[0]),
                            "errors": [error_of(doubled), error_of(same)]}
                elif mode == 1:  # errors come back as responses, as in Triton
                    info["unknown"] = error_of(pb_utils.InferenceRequest(
                        model_name="nope", inputs=[pb_utils.Tensor("X", x)], requested_output_names=["Y"]).exec())
                    info["bad_input"] = error_of(pb_utils.InferenceRequest(
                        model_name="double", inputs=[pb_utils.Tensor("NOPE", x)], requested_output_names=["Y"]).exec())
                    info["bad_output"] = error_of(pb_utils.InferenceRequest(
                        model_name="double", inputs=[pb_utils.Tensor("X", x)], requested_output_names=["NOPE"]).exec())
                    info["decoupled"] = error_of(pb_utils.InferenceRequest(
                        model_name="repeat", inputs=[pb_utils.Tensor("IN", np.array([2], np.int32))],
                        requested_output_names=["OUT"]).exec())
                    info["raises"] = error_of(pb_utils.InferenceRequest(
                        model_name="modes", inputs=[pb_utils.Tensor("IN", np.array([2], np.int32))],
                        requested_output_names=["OUT"]).exec(decoupled=True).__next__())
                elif mode == 2:  # exec(decoupled=True): every response, the empty final one included
                    info["repeat"] = [values(r) for r in pb_utils.InferenceRequest(
                        model_name="repeat", inputs=[pb_utils.Tensor("IN", np.array([3], np.int32))],
                        requested_output_names=["OUT"]).exec(decoupled=True)]
                    info["repeat0"] = [values(r) for r in pb_utils.InferenceRequest(
                        model_name="repeat", inputs=[pb_utils.Tensor("IN", np.array([0], np.int32))],
                        requested_output_names=["OUT"]).exec(decoupled=True)]
                    info["not_decoupled"] = [values(r) for r in pb_utils.InferenceRequest(
                        model_name="double", inputs=[pb_utils.Tensor("X", x)],
                        requested_output_names=["Y"]).exec(decoupled=True)]
                    info["unknown"] = [error_of(r) for r in pb_utils.InferenceRequest(
                        model_name="nope", inputs=[pb_utils.Tensor("X", x)],
                        requested_output_names=["Y"]).exec(decoupled=True)]
                elif mode == 3:  # BYTES both ways
                    upper = pb_utils.InferenceRequest(
                        model_name="upper", inputs=[pb_utils.get_input_tensor_by_name(request, "S")],
                        requested_output_names=["UP"]).exec()
                    up = pb_utils.get_output_tensor_by_name(upper, "UP").as_numpy()
                    info["upper"] = [type(v).__name__ for v in up.flat] + [v.decode() for v in up.flat]
                elif mode == 4:  # the request's own input tensor (shared memory) passed on as it is
                    doubled = pb_utils.InferenceRequest(
                        model_name="double", inputs=[pb_utils.Tensor("X", x)], requested_output_names=["Y"]).exec()
                    y = pb_utils.get_output_tensor_by_name(doubled, "Y").as_numpy()
                    info["writeable"] = bool(y.flags.writeable)  # BLS outputs are the caller's own arrays
                responses.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("Y", y.astype(np.float32)),
                    pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=np.object_)),
                ]))
            return responses
"""

BLS_ASYNC_MODEL = """
    import asyncio
    import json
    import threading
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        async def execute(self, requests):
            responses = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
                first = pb_utils.InferenceRequest(
                    model_name="double", inputs=[pb_utils.Tensor("X", x)], requested_output_names=["Y"]).async_exec()
                second = pb_utils.InferenceRequest(
                    model_name="double", inputs=[pb_utils.Tensor("X", x + 1)], requested_output_names=["Y"]).async_exec()
                missing = pb_utils.InferenceRequest(
                    model_name="nope", inputs=[pb_utils.Tensor("X", x)], requested_output_names=["Y"]).async_exec()
                a, b, c = await asyncio.gather(first, second, missing)
                stream = await pb_utils.InferenceRequest(
                    model_name="repeat", inputs=[pb_utils.Tensor("IN", np.array([2], np.int32))],
                    requested_output_names=["OUT"]).async_exec(decoupled=True)
                info = {
                    "future": type(first).__name__,
                    "thread": threading.current_thread().name,
                    "missing": c.error().message() if c.has_error() else None,
                    "stream": [[t.as_numpy().tolist() for t in r.output_tensors()] for r in stream],
                }
                y = pb_utils.get_output_tensor_by_name(a, "Y").as_numpy() + pb_utils.get_output_tensor_by_name(b, "Y").as_numpy()
                responses.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("Y", y),
                    pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=np.object_)),
                ]))
            return responses
"""

X_TO_Y = """
    backend: "python"
    max_batch_size: 0
    input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
    output [
      { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] },
      { name: "INFO" data_type: TYPE_STRING dims: [ 1 ] }
    ]
"""

BLS_CONFIG = """
    backend: "python"
    max_batch_size: 0
    input [
      { name: "MODE" data_type: TYPE_INT32 dims: [ 1 ] },
      { name: "X" data_type: TYPE_FP32 dims: [ -1 ] },
      { name: "S" data_type: TYPE_STRING dims: [ -1 ] optional: true }
    ]
    output [
      { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] },
      { name: "INFO" data_type: TYPE_STRING dims: [ 1 ] }
    ]
"""


def build_repository(repo: Path) -> None:
    add_model(repo, "repeat", DECOUPLED, files={"1/model.py": REPEAT_MODEL})
    add_model(repo, "modes", DECOUPLED, files={"1/model.py": MODES_MODEL})
    add_model(repo, "async_decoupled", DECOUPLED, files={"1/model.py": ASYNC_DECOUPLED_MODEL})
    add_model(repo, "double", X_TO_Y, files={"1/model.py": DOUBLE_MODEL})
    add_model(repo, "ident", identity_config(dims="[ -1 ]", max_batch_size=0))
    add_model(
        repo,
        "upper",
        """
        backend: "python"
        max_batch_size: 0
        input [ { name: "S" data_type: TYPE_STRING dims: [ -1 ] } ]
        output [ { name: "UP" data_type: TYPE_STRING dims: [ -1 ] } ]
        """,
        files={"1/model.py": UPPER_MODEL},
    )
    add_model(repo, "bls", BLS_CONFIG, files={"1/model.py": BLS_MODEL})
    add_model(repo, "bls_async", X_TO_Y, files={"1/model.py": BLS_ASYNC_MODEL})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("python_backend_streaming")
    yield from module_server(root, build_repository, ["--exit-on-error=true"])


@pytest.fixture(scope="module")
def stub(server: ServerProcess) -> Iterator[service_pb2_grpc.GRPCInferenceServiceStub]:
    channel = grpc.insecure_channel(server.grpc_url)
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    triton = httpclient.InferenceServerClient(server.http_url)
    yield triton
    triton.close()


def int_request(model: str, value: int, request_id: str) -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name=model, id=request_id)
    # ask for the flags-only final response too (tritonclient's enable_empty_final_response)
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    request.inputs.add(name="IN", datatype="INT32", shape=[1])
    request.raw_input_contents.append(np.array([value], np.int32).tobytes())
    return request


def summary(response: pb.ModelStreamInferResponse) -> tuple[Any, ...]:
    """``(id, error, {output: values}, final)`` of one streamed response."""
    infer = response.infer_response
    outputs: dict[str, Any] = {}
    for output, raw in zip(infer.outputs, infer.raw_output_contents):
        if output.datatype == "INT32":
            outputs[output.name] = np.frombuffer(raw, np.int32).tolist()
        else:
            outputs[output.name] = raw[4:].decode()
    final = (
        infer.parameters["triton_final_response"].bool_param if "triton_final_response" in infer.parameters else None
    )
    return infer.id, response.error_message, outputs, final


def stream(stub: service_pb2_grpc.GRPCInferenceServiceStub, *requests: pb.ModelInferRequest) -> list[tuple[Any, ...]]:
    return [summary(r) for r in stub.ModelStreamInfer(iter(requests), timeout=30)]


# -- decoupled models over gRPC streaming ------------------------------------------------------------
def test_many_responses_from_a_thread_then_the_final_flag(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    assert stream(stub, int_request("repeat", 3, "r3")) == [
        ("r3", "", {"OUT": [0]}, False),
        ("r3", "", {"OUT": [1]}, False),
        ("r3", "", {"OUT": [2]}, False),
        ("r3", "", {}, True),  # the final flag alone, as Triton streams it
    ]


def test_zero_responses(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    assert stream(stub, int_request("repeat", 0, "r0")) == [("r0", "", {}, True)]


def test_requests_of_one_stream_interleave(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    got = stream(stub, int_request("repeat", 2, "a"), int_request("repeat", 1, "b"))
    assert [g for g in got if g[0] == "a"] == [
        ("a", "", {"OUT": [0]}, False),
        ("a", "", {"OUT": [1]}, False),
        ("a", "", {}, True),
    ]
    assert [g for g in got if g[0] == "b"] == [("b", "", {"OUT": [0]}, False), ("b", "", {}, True)]


def test_error_response_mid_stream_then_final_with_data(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    assert stream(stub, int_request("modes", 0, "m0")) == [
        ("m0", "bad part", {}, False),  # an error in a stream is a message; the stream goes on
        ("m0", "", {"OUT": [7]}, True),
    ]


def test_execute_raising_after_a_response(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, server: ServerProcess
) -> None:
    path = Path(server.repositories[0]) / "modes" / "1" / "model.py"
    line = next(i for i, text in enumerate(MODES_MODEL.splitlines(), start=1) if "decoupled boom" in text)
    assert stream(stub, int_request("modes", 1, "m1")) == [
        ("m1", "", {"OUT": [1]}, False),
        (
            "m1",
            (
                "Failed to process the request(s) for model 'modes_0_0', message: ValueError: decoupled boom\n\n"
                f"At:\n  {path}({line}): execute\n"
            ),
            {},
            True,
        ),
    ]


def test_decoupled_execute_must_return_none(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    assert stream(stub, int_request("modes", 2, "m2")) == [
        (
            "m2",
            (
                "Failed to process the request(s) for model 'modes_0_0', message: Python model 'modes_0_0' is using "
                "the decoupled mode and the execute function must return None."
            ),
            {},
            True,
        )
    ]


def test_a_dropped_request_is_ended_not_left_open(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, server: ServerProcess
) -> None:
    # Triton leaves the stream waiting forever; tritium ends the request when nothing can answer it
    assert stream(stub, int_request("modes", 3, "m3")) == [
        ("m3", "", {"OUT": [3]}, False),
        ("m3", "", {}, True),
    ]
    assert "model 'modes': request 'm3' was dropped without the final flag" in server.log()


def test_sending_after_the_final_flag_raises(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    assert stream(stub, int_request("modes", 4, "m4")) == [("m4", "", {"OUT": [4]}, True)]
    assert stream(stub, int_request("modes", 5, "m5")) == [
        (
            "m5",
            "",
            {
                "MSG": "Unable to send response. Response sender has been closed. | "
                "Inference Response object must be provided when the response flags is set to zero."
            },
            True,
        )
    ]


def test_undeclared_output_in_a_stream(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    assert stream(stub, int_request("modes", 6, "m6")) == [
        # Triton drops the output silently (an empty response); tritium says why (a deliberate difference)
        (
            "m6",
            "model 'modes' returned output 'BOGUS', which its configuration does not declare (outputs: OUT, MSG)",
            {},
            False,
        ),
        ("m6", "", {}, True),
    ]


def test_async_decoupled_execute_runs_in_the_background(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
) -> None:
    results: list[list[tuple[Any, ...]]] = []
    together = threading.Barrier(2)

    def one(request_id: str) -> None:
        together.wait(10)
        results.append(stream(stub, int_request("async_decoupled", 0, request_id)))

    threads = [threading.Thread(target=one, args=(name,)) for name in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    got = sorted(r[0] for r in results)
    assert [g[0] for g in got] == ["x", "y"]
    # the second execute started while the first one awaited: both ran at once
    assert max(g[2]["OUT"][0] for g in got) == 2
    assert "MainThread" not in {g[2]["MSG"] for g in got}  # the backend's own event loop, on its own thread


def test_http_refuses_decoupled_models(client: httpclient.InferenceServerClient) -> None:
    tensor = httpclient.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], np.int32))
    with pytest.raises(InferenceServerException) as info:
        client.infer("repeat", [tensor])
    assert "doesn't support models with decoupled transaction policy" in info.value.message()


# -- BLS ------------------------------------------------------------------------------------------------------
def bls(
    client: httpclient.InferenceServerClient, mode: int, x: np.ndarray, s: np.ndarray | None = None
) -> tuple[np.ndarray, Any]:
    inputs = []
    for name, array, datatype in (
        ("MODE", np.array([mode], np.int32), "INT32"),
        ("X", x, "FP32"),
        ("S", s, "BYTES"),
    ):
        if array is None:
            continue
        tensor = httpclient.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = client.infer("bls", inputs)
    return result.as_numpy("Y"), json.loads(result.as_numpy("INFO")[0])


def test_bls_exec(client: httpclient.InferenceServerClient) -> None:
    x = np.array([1.0, 2.5, -3.0], np.float32)
    y, info = bls(client, 0, x)
    np.testing.assert_array_equal(y, x * 3)  # double(x) + ident(x)
    assert info["errors"] == [None, None]
    # the request's attributes reach the called model
    assert info["inner"] == {
        "id": "inner-1",
        "parameters": '{"k":"v","n":3}',
        "correlation_id": 7,
        "flags": 0,
    }


def test_bls_errors_come_back_as_responses(client: httpclient.InferenceServerClient, server: ServerProcess) -> None:
    _, info = bls(client, 1, np.array([1.0], np.float32))
    internal = 1  # Triton gives every BLS error the code INTERNAL
    assert info["unknown"] == [
        "Model nope - Error when running inference: Failed for execute the inference request. Model 'nope' is not ready.",
        internal,
    ]
    assert info["bad_input"][0].startswith("Model double - Error when running inference: ")
    assert "'NOPE'" in info["bad_input"][0]
    assert info["bad_output"] == [
        "Model double - Error when running inference: unexpected inference output 'NOPE' for model 'double'",
        internal,
    ]
    assert info["decoupled"] == [
        (
            "Model repeat - Error when running inference: Model repeat is using the decoupled. The current BLS request "
            "call doesn't support models using the decoupled transaction policy. Please use 'decoupled=True' argument "
            "to the 'exec' or 'async_exec' calls for decoupled models.'"
        ),
        internal,
    ]
    assert info["raises"] == [
        (
            "Failed to process the request(s) for model 'modes_0_0', message: Python model 'modes_0_0' is using the "
            "decoupled mode and the execute function must return None."
        ),
        internal,
    ]


def test_bls_decoupled(client: httpclient.InferenceServerClient) -> None:
    _, info = bls(client, 2, np.array([1.5], np.float32))
    assert info["repeat"] == [
        {"OUT": [0]},
        {"OUT": [1]},
        {"OUT": [2]},
        {},
    ]  # then the empty final response
    assert info["repeat0"] == [{}]
    assert info["not_decoupled"] == [{"Y": [3.0]}]  # one response, final: nothing after it
    assert info["unknown"] == [
        [
            "Model nope - Error when running inference: Failed for execute the inference request. Model 'nope' is not ready.",
            1,
        ]
    ]


def test_bls_bytes(client: httpclient.InferenceServerClient) -> None:
    s = np.array([b"abc", b"", "\u00e9t\u00e9".encode()], dtype=np.object_)
    _, info = bls(client, 3, np.array([0.0], np.float32), s)
    assert info["upper"] == ["bytes", "bytes", "bytes", "ABC", "", "\u00e9T\u00e9"]


def test_bls_with_the_callers_own_input(client: httpclient.InferenceServerClient) -> None:
    x = np.arange(1000, dtype=np.float32)
    y, info = bls(client, 4, x)
    np.testing.assert_array_equal(y, x * 2)
    assert info["writeable"] is True


def test_bls_async_exec(client: httpclient.InferenceServerClient) -> None:
    x = np.array([1.0, 2.0], np.float32)
    tensor = httpclient.InferInput("X", [2], "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer("bls_async", [tensor])
    np.testing.assert_array_equal(result.as_numpy("Y"), x * 2 + (x + 1) * 2)
    info = json.loads(result.as_numpy("INFO")[0])
    assert info == {
        "future": "Future",  # an asyncio future, as Triton's async_exec returns
        "thread": "tritium-python-asyncio",  # Triton's: "Thread-1 (run_forever)"
        "missing": "Model nope - Error when running inference: Failed for execute the inference request. Model 'nope' is not ready.",
        "stream": [[[0]], [[1]], []],
    }
