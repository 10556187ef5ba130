"""Triton's generate extension (``/generate``, ``/generate_stream``), and the server metadata's extensions.

Black-box: one tritium-server subprocess for the module, python models, plain HTTP. The
expected statuses, bodies and Server-Sent Events framing are Triton 2.51's on the same model
code (observed on the real server), except where docs/compatibility.md says why tritium
answers otherwise (400 where Triton answers a broken body with 500, or the wrong number of
responses with 200).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support.clients import http_call, module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

PLAIN = """
    backend: "python"
    max_batch_size: 0
    input [
      { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] },
      { name: "n" data_type: TYPE_INT32 dims: [ 1 ] optional: true }
    ]
    output [
      { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] },
      { name: "count" data_type: TYPE_INT32 dims: [ 1 ] }
    ]
"""

# echoes its text and the request parameters it saw
PLAIN_MODEL = """
    import json
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for r in requests:
                t = pb_utils.get_input_tensor_by_name(r, "text_input").as_numpy()
                p = json.dumps(json.loads(r.parameters()), sort_keys=True).encode()
                out.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("text_output", np.array([t[0], p], dtype=object)),
                    pb_utils.Tensor("count", np.array([len(t)], dtype=np.int32)),
                ]))
            return out
"""

DECOUPLED = """
    backend: "python"
    max_batch_size: 0
    model_transaction_policy { decoupled: true }
    input [
      { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] },
      { name: "n" data_type: TYPE_INT32 dims: [ 1 ] }
    ]
    output [
      { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] },
      { name: "idx" data_type: TYPE_INT32 dims: [ 1 ] }
    ]
"""

# n responses (an error response in place of the third when n == 3; n < 0: only an error)
DECOUPLED_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            for r in requests:
                s = r.get_response_sender()
                t = pb_utils.get_input_tensor_by_name(r, "text_input").as_numpy()
                n = int(pb_utils.get_input_tensor_by_name(r, "n").as_numpy()[0])
                if n < 0:
                    s.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative n")),
                           flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                    continue
                for i in range(n):
                    if n == 3 and i == 2:
                        s.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("failed at 2")))
                        continue
                    s.send(pb_utils.InferenceResponse([
                        pb_utils.Tensor("text_output", np.array([t[0]], dtype=object)),
                        pb_utils.Tensor("idx", np.array([i], dtype=np.int32)),
                    ]))
                s.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return None
"""

BATCHING = """
    backend: "python"
    max_batch_size: 2
    input [
      { name: "a" data_type: TYPE_FP32 dims: [ -1, -1 ] },
      { name: "b" data_type: TYPE_INT64 dims: [ 3, -1 ] optional: true }
    ]
    output [
      { name: "sa" data_type: TYPE_INT64 dims: [ -1 ] },
      { name: "sb" data_type: TYPE_INT64 dims: [ -1 ] },
      { name: "total" data_type: TYPE_FP32 dims: [ 1 ] }
    ]
"""

# the shapes the model saw, and the sum of a
BATCHING_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for r in requests:
                a = pb_utils.get_input_tensor_by_name(r, "a").as_numpy()
                b = pb_utils.get_input_tensor_by_name(r, "b")
                sb = b.as_numpy().shape if b is not None else ()
                out.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("sa", np.array([a.shape], dtype=np.int64)),
                    pb_utils.Tensor("sb", np.array([sb], dtype=np.int64)),
                    pb_utils.Tensor("total", np.array([[a.sum()]], dtype=np.float32)),
                ]))
            return out
"""


def build_repository(repo: Path) -> None:
    add_model(repo, "plain", PLAIN, files={"1/model.py": PLAIN_MODEL})
    add_model(repo, "dec", DECOUPLED, files={"1/model.py": DECOUPLED_MODEL})
    add_model(repo, "batching", BATCHING, files={"1/model.py": BATCHING_MODEL})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("generate")
    yield from module_server(root, build_repository, ["--exit-on-error=true"])


def post(server: ServerProcess, path: str, body: str | bytes) -> tuple[int, str, bytes]:
    data = body.encode() if isinstance(body, str) else body
    status, headers, answer = http_call(server, "POST", f"/v2/models/{path}", data)
    return status, headers.get("content-type", ""), answer


def error(message: str) -> bytes:
    return json.dumps({"error": message}, separators=(",", ":")).encode()


# -- /generate ------------------------------------------------------------------------------------------
def test_inputs_by_name_other_keys_parameters(server: ServerProcess) -> None:
    status, kind, body = post(server, "plain/generate", '{"text_input":"hi","foo":"bar","z":3,"parameters":{"x":1.5}}')
    assert (status, kind) == (200, "application/json")
    seen = json.dumps({"foo": "bar", "x": 1.5, "z": 3}, sort_keys=True)
    # one element: a scalar; several: a list; keys sorted (Triton's order)
    assert json.loads(body) == {"count": 1, "model_name": "plain", "model_version": "1", "text_output": ["hi", seen]}
    assert body.startswith(b'{"count":1,"model_name":"plain","model_version":"1","text_output":["hi",')


def test_lists_versions_and_request_id(server: ServerProcess) -> None:
    status, _, body = post(server, "plain/versions/1/generate", '{"text_input":["hi"],"n":[2],"id":"r7"}')
    assert status == 200
    assert json.loads(body) == {
        "count": 1,
        "id": "r7",
        "model_name": "plain",
        "model_version": "1",
        "text_output": ["hi", json.dumps({"id": "r7"})],
    }


def test_batching_model_gets_batch_dim_and_variable_dims(server: ServerProcess) -> None:
    status, _, body = post(server, "batching/generate", '{"a":[1,2,3,4],"b":[1,2,3,4,5,6]}')
    assert status == 200
    # a: dims [-1,-1] -> [1,4] (the last -1 takes the elements), b: [3,-1] -> [3,2]; batch dim 1 first
    assert json.loads(body) == {
        "model_name": "batching",
        "model_version": "1",
        "sa": [1, 1, 4],
        "sb": [1, 3, 2],
        "total": 10.0,
    }


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("nope/generate", '{"text_input":"hi"}', 404, "Request for unknown model: 'nope' is not found"),
        (
            "plain/versions/2/generate",
            '{"text_input":"hi"}',
            404,
            "Request for unknown model: 'plain' version 2 is not found",
        ),
        ("plain/generate", "xx", 400, "failed to parse the request JSON buffer: Invalid value. at 0"),
        ("plain/generate", "", 400, "failed to parse the request JSON buffer: The document is empty. at 0"),
        ("plain/generate", "[1]", 400, "attempt to get members for non-object"),
        (
            "plain/generate",
            '{"text_input":5}',
            400,
            "Unable to parse JSON bytes array: attempt to access JSON non-string as string",
        ),
        (
            "plain/generate",
            '{"text_input":"hi","n":"x"}',
            400,
            "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer",
        ),
        (
            "plain/generate",
            '{"text_input":"hi","p":[1]}',
            400,
            "parameter 'p' has invalid type. It should be either 'int', 'bool', or 'string'.",
        ),
        (
            "plain/generate",
            '{"text_input":"hi","p":null}',
            400,
            "parameter 'p' has invalid type. It should be either 'int', 'bool', or 'string'.",
        ),
        (
            "batching/generate",
            '{"a":[1,2],"b":[1,2,3,4]}',
            400,
            "The schema can not convert input 'b' to tensor with proper shape",
        ),
        (
            "batching/generate",
            '{"a":[[1,2],[3,4]]}',
            400,
            "Unable to parse 'data': Shape does not match true shape of 'data' field",
        ),
        (
            "batching/generate",
            '{"a":[1],"a":[2]}',
            400,
            "[request id: <id_unknown>] input 'a' already exists in request",
        ),
        (
            "batching/generate",
            "{}",
            400,
            "[request id: <id_unknown>] expected number of inputs between 1 and 2 but got 0 inputs "
            "for model 'batching'. Got input(s) [], but missing required input(s) ['a']. Please provide all required input(s).",
        ),
        ("dec/generate", '{"text_input":"hi","n":-1}', 400, "negative n"),
    ],
)
def test_generate_errors(server: ServerProcess, path: str, body: str, status: int, message: str) -> None:
    assert post(server, path, body) == (status, "application/json", error(message))


def test_generate_on_decoupled_model(server: ServerProcess) -> None:
    status, _, body = post(server, "dec/generate", '{"text_input":"hi","n":1}')
    assert (status, json.loads(body)) == (
        200,
        {"idx": 0, "model_name": "dec", "model_version": "1", "text_output": "hi"},
    )
    many = "generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses"
    for n in (0, 2):  # Triton answers these with 200 and the error body
        assert post(server, "dec/generate", f'{{"text_input":"hi","n":{n}}}') == (400, "application/json", error(many))


def test_generate_is_post_only(server: ServerProcess) -> None:
    status, _, body = http_call(server, "GET", "/v2/models/plain/generate")
    assert (status, body) == (405, b'{"error":"Method Not Allowed"}')


# -- /generate_stream -----------------------------------------------------------------------------------
def stream(server: ServerProcess, path: str, body: str) -> tuple[int, dict[str, str], bytes]:
    """One streaming request; the body as the client reads it (chunks joined)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
    try:
        conn.request("POST", f"/v2/models/{path}", body=body.encode())
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def event(payload: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def test_stream_events(server: ServerProcess) -> None:
    status, headers, body = stream(server, "dec/generate_stream", '{"text_input":"hi","n":2}')
    assert status == 200
    assert headers["content-type"] == "text/event-stream; charset=utf-8"
    assert headers["transfer-encoding"] == "chunked"
    assert body == b"".join(
        event({"idx": i, "model_name": "dec", "model_version": "1", "text_output": "hi"}) for i in range(2)
    )


def test_stream_framing_on_the_wire(server: ServerProcess) -> None:
    """One chunk per event, then the last chunk (byte for byte what Triton sends)."""
    import socket

    body = b'{"text_input":"hi","n":1}'
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=60) as sock:
        sock.sendall(
            b"POST /v2/models/dec/generate_stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, rest = raw.partition(b"\r\n\r\n")
    data = event({"idx": 0, "model_name": "dec", "model_version": "1", "text_output": "hi"})
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 200 OK"
    assert rest == b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)


def test_stream_error_during_stream_is_an_event(server: ServerProcess) -> None:
    status, _, body = stream(server, "dec/generate_stream", '{"text_input":"hi","n":3}')
    first = [event({"idx": i, "model_name": "dec", "model_version": "1", "text_output": "hi"}) for i in range(2)]
    assert (status, body) == (200, b"".join(first) + b'data: {"error":"failed at 2"}\n\n')


def test_stream_error_before_the_first_response(server: ServerProcess) -> None:
    # the model's error response: an error status, the error as the stream's event
    status, headers, body = stream(server, "dec/generate_stream", '{"text_input":"hi","n":-1}')
    assert (status, headers["content-type"], body) == (
        400,
        "text/event-stream; charset=utf-8",
        b'data: {"error":"negative n"}\n\n',
    )
    # refused before it runs: a JSON error
    status, headers, body = stream(server, "dec/generate_stream", '{"text_input":"hi"}')
    assert (status, headers["content-type"]) == (400, "application/json")
    assert json.loads(body)["error"].startswith(
        "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'dec'."
    )
    assert stream(server, "nope/generate_stream", "{}")[::2] == (
        404,
        error("Request for unknown model: 'nope' is not found"),
    )
    assert stream(server, "dec/generate_stream", "xx")[::2] == (
        400,
        error("failed to parse the request JSON buffer: Invalid value. at 0"),
    )


def test_stream_no_response_and_plain_model(server: ServerProcess) -> None:
    assert stream(server, "dec/generate_stream", '{"text_input":"hi","n":0}')[::2] == (200, b"")
    status, _, body = stream(server, "plain/generate_stream", '{"text_input":"hi","id":"s1"}')
    expected = {
        "count": 1,
        "id": "s1",
        "model_name": "plain",
        "model_version": "1",
        "text_output": ["hi", json.dumps({"id": "s1"})],
    }
    assert (status, body) == (200, event(expected))


def test_keep_alive_after_a_stream(server: ServerProcess) -> None:
    """The connection serves the next request once the stream ended."""
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
    try:
        for n in (2, 1):
            conn.request("POST", "/v2/models/dec/generate_stream", body=f'{{"text_input":"x","n":{n}}}'.encode())
            resp = conn.getresponse()
            assert resp.status == 200 and resp.read().count(b"data: ") == n
        conn.request("GET", "/v2/health/ready")
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def test_client_leaving_mid_stream_keeps_server_serving(server: ServerProcess) -> None:
    import socket

    body = b'{"text_input":"hi","n":200}'
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=60) as sock:
        sock.sendall(
            b"POST /v2/models/dec/generate_stream HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
        )
        assert sock.recv(64).startswith(b"HTTP/1.1 200 OK")
    status, _, answer = post(server, "dec/generate", '{"text_input":"hi","n":1}')
    assert status == 200 and json.loads(answer)["idx"] == 0


# -- server metadata --------------------------------------------------------------------------------------
EXTENSIONS = [
    "classification",
    "sequence",
    "model_repository",
    "model_repository(unload_dependents)",
    "schedule_policy",
    "model_configuration",
    "system_shared_memory",
    "cuda_shared_memory",
    "binary_tensor_data",
    "parameters",
    "statistics",
    "generate",
    "trace",
    "logging",
]


def test_server_metadata_lists_the_extensions(server: ServerProcess) -> None:
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        extensions = http.get_server_metadata()["extensions"]
        listed = list(grpc.get_server_metadata().extensions)
    finally:
        http.close()
        grpc.close()
    assert extensions == listed == EXTENSIONS
