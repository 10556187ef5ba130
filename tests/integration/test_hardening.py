"""L0_http_fuzz-style probes of a hostile client: nothing stalls, bloats or crashes the server.

One test per finding of issue 15's probe, each reproducing it as described:
client bytes that took the event loop for seconds (a gRPC message padded
with unknown fields, a compression bomb, a large JSON body, millions of
empty BYTES elements) now leave the health endpoint answering within a
second or two; memory follows what a client actually sends (declared but
unsent bodies cost nothing, abandoned ones are freed at once, a budget
bounds all bodies together); client mistakes are 4xx with a JSON body (gRPC:
INVALID_ARGUMENT / NOT_FOUND); echoed strings are clipped; a load error does
not tell a client where the server is installed; a disconnect is not a
traceback. The timeouts are in test_hardening_timeouts.py (a server of short timeouts).
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.support.clients import declare_body, http_call, module_server, read_reply
from tests.support.hostile import (
    WBITS,
    compressed,
    post,
    post_timed,
    reset_peak_rss,
    rss_mib,
    watched,
    while_watched,
)
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess, transport_plugins

LIMIT = 64 << 20  # --max-request-bytes
BUDGET = 192 << 20  # --max-inflight-request-bytes: three bodies at the limit
JSON_LIMIT = 16 << 20  # --max-json-request-bytes
REPO_ROOT = Path(__file__).resolve().parents[2]
MISSING_BACKEND = """
backend: "nosuchbackend"
max_batch_size: 0
input [ { name: "I" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "O" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "echo", identity_config("TYPE_UINT8", "[ -1 ]", max_batch_size=0))
        add_model(repo, "strings", identity_config("TYPE_STRING", "[ -1 ]", max_batch_size=0))
        add_model(repo, "nob", MISSING_BACKEND)

    args = [
        f"--max-request-bytes={LIMIT}",
        f"--max-inflight-request-bytes={BUDGET}",
        f"--max-json-request-bytes={JSON_LIMIT}",
        "--model-control-mode=explicit",
        "--load-model=echo",
        "--load-model=strings",
    ]
    yield from module_server(tmp_path_factory.mktemp("hardening"), build, args)


#: the health endpoint must answer within this while a hostile input is handled (the issue asks for
#: 1 s; the margin is for the shared test machine)
HEALTH_S = 2.0


def raw_grpc(server: ServerProcess, method: str, payload: bytes) -> tuple[grpc.StatusCode, str]:
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(server.grpc_url, options=options) as channel:
        call = channel.unary_unary(f"/inference.GRPCInferenceService/{method}")
        try:
            call(payload, timeout=120)
            return grpc.StatusCode.OK, ""
        except grpc.RpcError as exc:
            return exc.code(), exc.details()


# -- 1. nothing proportional to a client's bytes on the event loop ------------------------------


def test_grpc_message_padded_with_unknown_fields_does_not_stall_the_server(server: ServerProcess) -> None:
    from tritium.proto import grpc_service_pb2 as pb

    tensor = pb.ModelInferRequest.InferInputTensor(name="INPUT0", datatype="UINT8", shape=[4])
    message = pb.ModelInferRequest(model_name="echo", inputs=[tensor], raw_input_contents=[b"abcd"])
    # field 100, varint 0: 4 M unknown fields, 12 MB (the probe sent 20 MB; past --max-json-request-bytes,
    # the part of a message that is not raw_input_contents is now refused unparsed, as below)
    padding = b"\xa0\x06\x00" * (12_000_000 // 3)
    (status, _details), worst = while_watched(
        server, lambda: raw_grpc(server, "ModelInfer", message.SerializeToString() + padding)
    )
    assert status == grpc.StatusCode.OK
    assert worst < HEALTH_S, f"health took {worst:.2f} s"


def _typed_strings(count: int) -> bytes:
    """A ModelInferRequest for ``strings`` of ``count`` typed bytes_contents ("" and "a" in turn), shape count + 1."""
    from tritium.proto import grpc_service_pb2 as pb

    tensor = pb.ModelInferRequest.InferInputTensor(name="INPUT0", datatype="BYTES", shape=[count + 1])
    tensor.contents.bytes_contents.extend([b"", b"a"] * (count // 2))
    return pb.ModelInferRequest(model_name="strings", inputs=[tensor]).SerializeToString()


def test_millions_of_typed_grpc_strings_are_joined_without_a_python_loop(server: ServerProcess) -> None:
    count = 4_000_000  # 10 MB; joined in Python at about 0.7 µs an element, this held the loop for 3 s
    message = _typed_strings(count)
    reply, worst = while_watched(server, lambda: raw_grpc(server, "ModelInfer", message))
    assert reply == (
        grpc.StatusCode.INVALID_ARGUMENT,
        f"[request id: <id_unknown>] expected {count + 1} string elements for inference input 'INPUT0' for "
        f"model 'strings', got {count}",
    )
    assert worst < HEALTH_S, f"health took {worst:.2f} s"


def test_typed_grpc_contents_past_the_json_limit_are_refused_before_they_are_parsed(server: ServerProcess) -> None:
    message = _typed_strings(7_000_000)  # 17.5 MB of typed contents, within --max-request-bytes
    assert JSON_LIMIT < len(message) < LIMIT
    reply, worst = while_watched(server, lambda: raw_grpc(server, "ModelInfer", message))
    assert reply == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        f"the ModelInferRequest without its raw_input_contents ({len(message)} bytes) exceeds the maximum of "
        f"{JSON_LIMIT} bytes (--max-json-request-bytes); send large tensors as raw_input_contents",
    )
    assert worst < HEALTH_S, f"health took {worst:.2f} s"


@pytest.mark.parametrize("encoding", sorted(WBITS))
def test_compression_bomb_is_refused_once_past_the_limit(server: ServerProcess, encoding: str) -> None:
    deflater = zlib.compressobj(9, zlib.DEFLATED, WBITS[encoding])
    zeros = bytes(1 << 20)
    bomb = b"".join([deflater.compress(zeros) for _ in range(400)] + [deflater.flush()])  # 400 MiB inflated
    assert len(bomb) < LIMIT // 64  # well within the limit itself
    before = reset_peak_rss(server)
    reply, worst = while_watched(
        server, lambda: post(server, "/v2/models/echo/infer", bomb, {"Content-Encoding": encoding})
    )
    assert reply == (413, {"error": f"decompressed request body exceeds the maximum request size of {LIMIT} bytes"})
    assert worst < HEALTH_S, f"health took {worst:.2f} s"
    # inflated a step at a time up to the limit: the peak is the limit and a step, not the bomb
    assert rss_mib(server, "VmHWM") - before < 2 * LIMIT / (1 << 20)


@pytest.mark.parametrize("encoding", [None, *sorted(WBITS)])
def test_large_json_body_is_parsed_off_the_event_loop(server: ServerProcess, encoding: str | None) -> None:
    # 15 MB of JSON (compressed: 15 KB), refused only once all of it is parsed and converted: the
    # health endpoint answers meanwhile. (On the event loop the parse takes about 1 s, too short
    # for a bound on the slowest answer to tell; no answer at all comes while it runs there.)
    count = 5_000_000
    tensor = {"name": "INPUT0", "shape": [count + 1], "datatype": "UINT8", "data": [7] * count}
    body, headers = compressed(json.dumps({"inputs": [tensor]}).encode(), encoding)
    assert len(body) < 16 << 10 if encoding else len(body) < JSON_LIMIT
    (status, reply, sent, answered), watch = watched(
        server, lambda: post_timed(server, "/v2/models/echo/infer", body, headers)
    )
    assert (status, reply) == (
        400,
        {"error": "Unable to parse 'data': Shape does not match true shape of 'data' field"},
    )
    during = watch.answers_between(sent, answered)
    assert during >= 3, f"{during} health answers in the {answered - sent:.2f} s of the parse"
    assert watch.worst < HEALTH_S, f"health took {watch.worst:.2f} s"
    # and a large body (parsed on a parse thread too) is answered
    count = 600_000
    tensor = {"name": "INPUT0", "shape": [count], "datatype": "UINT8", "data": [7] * count}
    body, headers = compressed(json.dumps({"inputs": [tensor]}).encode(), encoding)
    status, reply = post(server, "/v2/models/echo/infer", body, headers)
    assert status == 200 and reply["outputs"][0]["shape"] == [count] and reply["outputs"][0]["data"] == [7] * count


def test_json_past_its_own_limit_is_refused_before_it_is_parsed(server: ServerProcess) -> None:
    count = JSON_LIMIT // 2
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [count], "datatype": "UINT8", "data": [1] * count}]})
    body = body[:-1]  # not JSON at its end: parsed first, this would be a 400 parse error instead
    assert JSON_LIMIT < len(body) < LIMIT
    (status, reply), worst = while_watched(server, lambda: post(server, "/v2/models/echo/infer", body.encode()))
    assert (status, reply) == (
        413,
        {
            "error": f"the JSON of the request ({len(body)} bytes) exceeds the maximum of "
            f"{JSON_LIMIT} bytes (--max-json-request-bytes); send large tensors as "
            "binary data"
        },
    )
    assert worst < HEALTH_S, f"health took {worst:.2f} s"


def binary_strings(shape: int, data: bytes) -> tuple[bytes, dict[str, str]]:
    """The body and headers of an inference on ``strings``: one BYTES input of ``shape`` elements whose
    serialized ``data`` travels as binary data."""
    input0 = {"name": "INPUT0", "shape": [shape], "datatype": "BYTES", "parameters": {"binary_data_size": len(data)}}
    header = json.dumps({"inputs": [input0]}).encode()
    return header + data, {"Inference-Header-Content-Length": str(len(header))}


def test_millions_of_empty_bytes_elements_are_checked_without_a_python_loop(server: ServerProcess) -> None:
    count = 12_000_000  # 48 MB of empty strings
    body, headers = binary_strings(count + 1, struct.pack("<I", 0) * count)
    reply, worst = while_watched(server, lambda: post(server, "/v2/models/strings/infer", body, headers))
    assert reply == (
        400,
        {
            "error": f"[request id: <id_unknown>] expected {count + 1} string elements for inference "
            f"input 'INPUT0' for model 'strings', got {count}"
        },
    )
    assert worst < HEALTH_S, f"health took {worst:.2f} s"


def test_millions_of_bytes_elements_of_varied_lengths_are_checked_in_c(server: ServerProcess) -> None:
    # elements of lengths 0 and 1 in turn: no one stride, so no vectorised count; in Python this
    # walk took about 0.3 µs an element on the event loop (3.6 s here)
    pairs = 6_000_000
    data = (struct.pack("<I", 0) + struct.pack("<I", 1) + b"a") * pairs  # 54 MB
    body, headers = binary_strings(2 * pairs + 1, data)
    reply, worst = while_watched(server, lambda: post(server, "/v2/models/strings/infer", body, headers))
    assert reply == (
        400,
        {
            "error": f"[request id: <id_unknown>] expected {2 * pairs + 1} string elements for inference "
            f"input 'INPUT0' for model 'strings', got {2 * pairs}"
        },
    )
    assert worst < HEALTH_S, f"health took {worst:.2f} s"
    # the same walk finds a broken element at the end of such a body
    assert post(server, "/v2/models/strings/infer", *binary_strings(2 * pairs + 1, data[:-1])) == (
        400,
        {
            "error": "incomplete string data for inference input 'INPUT0', expecting string of length 1 "
            "but only 0 bytes available"
        },
    )


@pytest.fixture(scope="module")
def aio_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The module server's repository and limits, gRPC on the grpc.aio transport."""
    root = tmp_path_factory.mktemp("hardening-aio")

    def build(repo: Path) -> None:
        add_model(repo, "echo", identity_config("TYPE_UINT8", "[ -1 ]", max_batch_size=0))

    args = [f"--max-request-bytes={LIMIT}", "--allow-metrics=false"]
    yield from module_server(root, build, args, env=transport_plugins(root, "aio"))


@pytest.mark.parametrize("transport", ["auto", "aio"])
def test_grpc_compression_bomb_is_resource_exhausted(
    server: ServerProcess, aio_server: ServerProcess, transport: str
) -> None:
    from tritium.proto import grpc_service_pb2 as pb

    target = server if transport == "auto" else aio_server
    # (scripts/test.sh makes sure the native transport is built where gRPC's C++ headers are)
    assert ("gRPC transport: native" in target.log()) == (transport == "auto")
    size = 256 << 20  # all zeros: the channel's gzip sends about 256 KiB
    tensor = pb.ModelInferRequest.InferInputTensor(name="INPUT0", datatype="UINT8", shape=[size])
    message = pb.ModelInferRequest(model_name="echo", inputs=[tensor], raw_input_contents=[bytes(size)])
    payload = message.SerializeToString()
    del message

    def send() -> tuple[grpc.StatusCode, str]:
        options = [("grpc.max_send_message_length", -1)]
        with grpc.insecure_channel(target.grpc_url, options=options, compression=grpc.Compression.Gzip) as channel:
            try:
                channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")(payload, timeout=120)
                return grpc.StatusCode.OK, ""
            except grpc.RpcError as exc:
                return exc.code(), exc.details()

    before = reset_peak_rss(target)
    (code, details), worst = while_watched(target, send)
    # grpcio's core (grpc.aio) stops inflating at the limit; so does the native transport, which
    # inflates compressed messages itself (gRPC C++ 1.51 would inflate them whole first)
    assert (code, details) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "Decompressed message larger than max")
    assert worst < HEALTH_S, f"health took {worst:.2f} s"
    assert http_call(target, "GET", "/v2/health/ready")[0] == 200
    peak = rss_mib(target, "VmHWM") - before
    assert peak < 2 * LIMIT / (1 << 20), f"{peak:.0f} MiB"


# -- 2. memory follows what clients send -------------------------------------------------------


def _settled_rss(server: ServerProcess, below: float) -> float:
    deadline = time.monotonic() + 10
    while rss_mib(server) >= below and time.monotonic() < deadline:
        time.sleep(0.1)
    return rss_mib(server)


def test_declared_but_unsent_bodies_cost_nothing(server: ServerProcess) -> None:
    before = rss_mib(server)
    socks = [declare_body(server, "/v2/repository/index", LIMIT) for _ in range(3)]
    try:
        time.sleep(0.5)
        assert rss_mib(server) - before < 32  # three bodies of 64 MiB declared: no page taken yet
    finally:
        for sock in socks:
            sock.close()


def test_abandoned_uploads_are_freed_at_once(server: ServerProcess) -> None:
    before = rss_mib(server)
    for _ in range(3):
        sock = declare_body(server, "/v2/repository/index", LIMIT, send=48 << 20)
        sock.close()  # 48 MiB of 64 MiB sent, then gone
    assert _settled_rss(server, before + 40) < before + 40


def test_bodies_past_the_in_flight_budget_get_503(server: ServerProcess) -> None:
    # (a load body: the route with the whole --max-request-bytes; the others' bodies are small)
    held = [declare_body(server, "/v2/repository/models/up/load", LIMIT) for _ in range(BUDGET // LIMIT)]
    try:
        time.sleep(0.3)
        head, body = read_reply(declare_body(server, "/v2/repository/models/up/load", LIMIT))
        assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\n") and b"\r\nRetry-After: 1\r\n" in head
        assert json.loads(body) == {"error": f"the server holds {BUDGET} bytes of request bodies already; retry later"}
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)  # the budget is back: a request at the limit is read again
    assert post(server, "/v2/repository/index", b"{}")[0] == 200


# -- 3. client errors are 4xx with a JSON body --------------------------------------------------


HUGE = "9" * 5000


@pytest.mark.parametrize(
    "path, body, headers, status, message",
    [
        (
            "/v2/models/echo/infer",
            f'{{"inputs":[{{"name":"INPUT0","shape":[1],"datatype":"UINT8","data":[{HUGE}]}}]}}'.encode(),
            {},
            400,
            "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer",
        ),
        (
            "/v2/models/echo/infer",
            f'{{"inputs":[{{"name":"INPUT0","shape":[{HUGE}],"datatype":"UINT8","data":[1]}}]}}'.encode(),
            {},
            400,
            "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer",
        ),
        (
            "/v2/models/echo/infer",
            b"{}",
            {"Inference-Header-Content-Length": HUGE},
            400,
            f"inference header size should be in range (0, 2), got: {'9' * 200}... (5000 characters)",
        ),
        (
            "/v2/models/echo/infer",
            b"[" * 100_000 + b"]" * 100_000,
            {},
            400,
            "failed to parse the request JSON buffer: the document is nested too deeply",
        ),
        (
            "/v2/repository/models/echo/load",
            b'{"parameters":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            {},
            400,
            "failed to parse the request JSON buffer: the document is nested too deeply",
        ),
        # (60 KB: within the shared-memory routes' own 64 KiB limit)
        (
            "/v2/systemsharedmemory/region/r/register",
            b"[" * 30_000 + b"]" * 30_000,
            {},
            400,
            "failed to parse the request JSON buffer: the document is nested too deeply",
        ),
        (
            "/v2/models/echo/infer",
            b'{"inputs": [}',
            {},
            400,
            "failed to parse the request JSON buffer: Invalid value. at 12",
        ),
        (
            "/v2/repository/index",
            b'{"ready": tru',
            {},
            400,
            "failed to parse the request JSON buffer: Invalid value. at 10",
        ),
        ("/v2/models/echo/infer", b"{}", {"Content-Encoding": "br"}, 415, "Unsupported compression type"),
    ],
    ids=[
        "huge-number-in-data",
        "huge-number-in-shape",
        "huge-header-length",
        "deep-infer",
        "deep-load",
        "deep-shared-memory",
        "malformed-infer",
        "malformed-index",
        "unknown-content-encoding",
    ],
)
def test_client_errors_are_4xx_with_a_json_body(
    server: ServerProcess, path: str, body: bytes, headers: dict[str, str], status: int, message: str
) -> None:
    assert post(server, path, body, headers) == (status, {"error": message})


@pytest.mark.parametrize("depth", [33, 100_000])
def test_a_deeply_nested_config_override_is_400(server: ServerProcess, depth: int) -> None:
    # Triton 2.51: 500 "failed to poll" (its parser recurses); tritium: bounded at 32 levels, 400 naming it
    override = '{"parameters":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
    message = "failed to load 'echo': the configuration override is nested more than 32 levels deep"
    body = json.dumps({"parameters": {"config": override}}).encode()
    assert post(server, "/v2/repository/models/echo/load", body) == (400, {"error": message})
    from tritium.proto import grpc_service_pb2 as pb

    request = pb.RepositoryModelLoadRequest(model_name="echo")
    request.parameters["config"].string_param = override
    assert raw_grpc(server, "RepositoryModelLoad", request.SerializeToString()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        message,
    )
    # 32 levels parse; the override is then refused for what it says (Triton's answer)
    shallow = json.dumps({"parameters": {"config": '{"parameters":' + "[" * 31 + "]" * 31 + "}"}}).encode()
    assert post(server, "/v2/repository/models/echo/load", shallow) == (
        500,
        {"error": "failed to load 'echo', failed to poll from model repository"},
    )
    assert http_call(server, "GET", "/v2/models/echo/ready")[0] == 200


@pytest.mark.parametrize(
    "method",
    [
        "ServerLive",
        "ServerMetadata",
        "ModelMetadata",
        "ModelConfig",
        "ModelStatistics",
        "RepositoryIndex",
        "RepositoryModelLoad",
        "SystemSharedMemoryRegister",
        "CudaSharedMemoryStatus",
        "ModelInfer",
    ],
)
def test_garbage_to_grpc_methods_is_invalid_argument(server: ServerProcess, method: str) -> None:
    code, details = raw_grpc(server, method, b"\xff\xff\xff garbage")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("malformed ") and len(details) < 200


def test_echoed_names_are_clipped(server: ServerProcess) -> None:
    from tritium.proto import grpc_service_pb2 as pb

    name = "x" * 100_000
    code, details = raw_grpc(server, "ModelMetadata", pb.ModelMetadataRequest(name=name).SerializeToString())
    assert (code, details) == (
        grpc.StatusCode.NOT_FOUND,
        f"Request for unknown model: '{'x' * 200}... (100000 characters)' is not found",
    )
    status, _headers, body = http_call(server, "GET", f"/v2/models/{'y' * 60_000}")
    assert (status, json.loads(body)) == (
        404,
        {"error": f"Request for unknown model: '{'y' * 200}... (60000 characters)' is not found"},
    )


def test_load_errors_do_not_show_the_servers_folders(server: ServerProcess) -> None:
    status, reply = post(server, "/v2/repository/models/nob/load", b"")
    assert status == 400
    message = reply["error"]
    assert "unable to find backend library for backend 'nosuchbackend'" in message
    assert "<backend-directory>/nosuchbackend/libtriton_nosuchbackend.py" in message
    assert "<model-repository>/nob/1/libtriton_nosuchbackend.py" in message
    assert str(REPO_ROOT) not in message and str(Path(server.repositories[0])) not in message
    # the log's line says it as the client's answer does; the options table names the folders
    lines = [line for line in server.log().splitlines() if "failed to load 'nob' version 1: " in line]
    reason = message.split("version 1 is at UNAVAILABLE state: ", 1)[1].rstrip(";\n")
    assert reason.startswith("Not found: unable to find backend library for backend 'nosuchbackend', searched: ")
    assert lines and all(line.endswith(f"failed to load 'nob' version 1: {reason}") for line in lines), lines
    assert f"| backend_directory        | {REPO_ROOT / 'backends'}" in server.log()


def test_a_disconnect_mid_body_is_one_short_line_at_most(server: ServerProcess) -> None:
    lines = len(server.log().splitlines())
    for _ in range(20):
        sock = declare_body(server, "/v2/models/echo/infer", 100_000)
        sock.sendall(b'{"inp')
        sock.close()
    time.sleep(0.5)
    assert post(server, "/v2/repository/index", b"{}")[0] == 200
    assert len(server.log().splitlines()) - lines <= 20


def test_no_traceback_in_the_log(server: ServerProcess) -> None:
    assert "Traceback" not in server.log()
    assert server.proc is not None and server.proc.poll() is None


# -- control-route bodies ---------------------------------------------------------------------------


def test_a_large_shared_memory_body_is_413_from_its_headers(server: ServerProcess) -> None:
    body = json.dumps({"key": "/k", "offset": 0, "byte_size": 8, "pad": "x" * (2 << 20)}).encode()
    expected = {"error": f"request body of {len(body)} bytes exceeds the limit of this route's body of 65536 bytes"}
    for path in (
        "/v2/systemsharedmemory/region/r/register",
        "/v2/logging",
        "/v2/trace/setting",
        "/v2/repository/models/echo/unload",
    ):
        assert post(server, path, body) == (413, expected), path
    assert post(server, "/v2/repository/models/echo/unload", b"{}")[0] == 200
    assert post(server, "/v2/repository/models/echo/load", b"{}")[0] == 200


def test_a_load_body_of_millions_of_values_is_refused_without_a_stall(server: ServerProcess) -> None:
    # millions of parameters take seconds to parse (holding the interpreter) and to walk: counted first
    files = ",".join(f'"file:{i}":""' for i in range(2_500_000))
    body = ('{"parameters":{' + files + "}}").encode()
    assert len(body) < LIMIT
    (status, reply), worst = while_watched(server, lambda: post(server, "/v2/repository/models/up/load", body))
    assert (status, reply) == (
        400,
        {"error": "the load request's JSON has about 7500000 values, more than the 100000 accepted"},
    )
    assert worst < HEALTH_S, worst


def test_a_large_load_body_is_parsed_off_the_event_loop(server: ServerProcess) -> None:
    # a model file of 60 MiB (base64): parsed and decoded (in pieces) on a thread, the health endpoint
    # answering meanwhile (about 10 answers; on the loop: none in about 0.5 s, too short for a bound)
    body = json.dumps({"parameters": {"config": "{}", "file:1/model.onnx": "QUJD" * (15 << 20)}}).encode()
    assert len(body) < LIMIT
    (status, reply, sent, answered), watch = watched(
        server, lambda: post_timed(server, "/v2/repository/models/up/load", body, {})
    )
    assert (status, reply) == (
        400,
        {
            "error": "failed to load 'up': loading model files sent in the request is disabled; start the "
            "server with --model-load-allow-file-override=true to allow it"
        },
    )
    during = watch.answers_between(sent, answered)
    assert during >= 4, f"{during} health answers in the {answered - sent:.2f} s of the parse"
    assert watch.worst < HEALTH_S, watch.worst
