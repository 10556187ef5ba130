"""HTTP/REST endpoint: inference through the ``identity`` backend, JSON and binary tensor data.

Every datatype round-trips exactly (JSON and the binary extension; FP16/BF16
binary only), output kinds follow ``binary_data``/``binary_data_output``,
float rendering, compression, raw binary requests and classification, each
checked against Triton 2.51's bytes over plain HTTP and through
``tritonclient.http``. One server for the module.
"""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.support.clients import HTTP_ONLY, http_call, module_server
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

TYPES = [
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BF16",
    "BYTES",
]
NUMPY: dict[str, Any] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BF16": np.float32,
    "BYTES": np.object_,
}
NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned-integer"
NOT_INT = "attempt to access JSON non-signed-integer as signed-integer"


def _all_types_config() -> str:
    """An identity model with one optional input (and its output) of every datatype, dims [-1]."""

    def tensors(prefix: str, optional: bool) -> str:
        items = []
        for t in TYPES:
            config_type = "TYPE_STRING" if t == "BYTES" else f"TYPE_{t}"
            extra = " optional: true" if optional else ""
            items.append(f'{{ name: "{prefix}_{t}" data_type: {config_type} dims: [ -1 ]{extra} }}')
        return ",\n".join(items)

    return f"""
        backend: "identity"
        max_batch_size: 0
        input [ {tensors("IN", True)} ]
        output [ {tensors("OUT", False)} ]
    """


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "all_types", _all_types_config())
        add_model(repo, "identity_fp32", identity_config("TYPE_FP32", "[ 16 ]", max_batch_size=8))

    yield from module_server(tmp_path_factory.mktemp("http_infer"), build, HTTP_ONLY)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpclient.InferenceServerClient]:
    triton = httpclient.InferenceServerClient(server.http_url, network_timeout=120.0)
    yield triton
    triton.close()


def call(
    server: ServerProcess, path: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    return http_call(server, "POST", path, body, headers)


def infer_json(
    server: ServerProcess, request: dict[str, Any], model: str = "all_types"
) -> tuple[int, dict[str, str], bytes]:
    return call(server, f"/v2/models/{model}/infer", json.dumps(request).encode())


def infer_binary(
    server: ServerProcess, header: dict[str, Any], payload: bytes, model: str = "all_types"
) -> tuple[int, dict[str, str], bytes]:
    head = json.dumps(header).encode()
    headers = {
        "Inference-Header-Content-Length": str(len(head)),
        "Content-Type": "application/octet-stream",
    }
    return call(server, f"/v2/models/{model}/infer", head + payload, headers)


def one(name: str, datatype: str, shape: list[int], data: Any) -> dict[str, Any]:
    return {"inputs": [{"name": name, "shape": shape, "datatype": datatype, "data": data}]}


def binary_input(name: str, datatype: str, shape: list[int], size: int) -> dict[str, Any]:
    params = {"binary_data_size": size}
    return {"name": name, "shape": shape, "datatype": datatype, "parameters": params}


def binary_output(name: str) -> dict[str, Any]:
    return {"name": name, "parameters": {"binary_data": True}}


def header(outputs: str, model: str = "all_types", id_: str = "") -> bytes:
    """The JSON header of a response with ``outputs`` (their JSON text)."""
    echo = f'"id":"{id_}",' if id_ else ""
    return f'{{{echo}"model_name":"{model}","model_version":"1","outputs":[{outputs}]}}'.encode()


def output(name: str, datatype: str, shape: list[int], rest: str) -> str:
    dims = ",".join(map(str, shape))
    return f'{{"name":"{name}","datatype":"{datatype}","shape":[{dims}],{rest}}}'


def expected(datatype: str, shape: list[int], data: str, name: str = "") -> bytes:
    return header(output(name or f"OUT_{datatype}", datatype, shape, f'"data":{data}'))


def strings(*items: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(s)) + s for s in items)


# -- JSON data ---------------------------------------------------------------------------------

JSON_CASES = [
    ("BOOL", [True, False, True], "[true,false,true]"),
    ("UINT8", [0, 1, 255], "[0,1,255]"),
    ("UINT16", [0, 1, 65535], "[0,1,65535]"),
    ("UINT32", [0, 1, 4294967295], "[0,1,4294967295]"),
    ("UINT64", [0, 1, 2**64 - 1], "[0,1,18446744073709551615]"),
    ("INT8", [-128, 0, 127], "[-128,0,127]"),
    ("INT16", [-32768, 0, 32767], "[-32768,0,32767]"),
    ("INT32", [-(2**31), 0, 2**31 - 1], "[-2147483648,0,2147483647]"),
    ("INT64", [-(2**63), 0, 2**63 - 1], "[-9223372036854775808,0,9223372036854775807]"),
    # FP32 values come back as the doubles they convert to, as Triton writes them
    ("FP32", [1.5, 0.1, 1e-08, -0.0, 1, -3], "[1.5,0.10000000149011612,9.99999993922529e-9,-0.0,1.0,-3.0]"),
    # RapidJSON's layout: fixed notation for decimal exponents -6 < e+1 <= 21, else "1e-7"
    (
        "FP64",
        [1.5, 0.1, 1e300, -0.0, 1e-05, 2.5e-06, 1e-07, 1e16, 1e20, 1e21, 1.2345678901234568e20, 5e-324],
        "[1.5,0.1,1e300,-0.0,0.00001,0.0000025,1e-7,10000000000000000.0,100000000000000000000.0,"
        "1e21,123456789012345680000.0,5e-324]",
    ),
    (
        "BYTES",
        ["hello", "w\u00f6rld", "", "a\u0000b", "\t\u001f"],
        '["hello","w\u00f6rld","","a\\u0000b","\\t\\u001F"]',
    ),
]


@pytest.mark.parametrize("datatype,data,rendered", JSON_CASES, ids=[c[0] for c in JSON_CASES])
def test_json_round_trip(server: ServerProcess, datatype: str, data: list[Any], rendered: str) -> None:
    status, headers, body = infer_json(server, one(f"IN_{datatype}", datatype, [len(data)], data))
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    assert "inference-header-content-length" not in headers
    assert body == expected(datatype, [len(data)], rendered)


@pytest.mark.parametrize(
    "datatype,data,rendered",
    [
        ("FP32", [[1, 2], [3, [4]]], "[1.0,2.0,3.0,4.0]"),  # nesting is flattened, in order
        ("FP32", [float("nan"), float("inf"), -float("inf")], "[NaN,Infinity,-Infinity]"),
        ("FP32", [1e39, -1e39, 1.5], "[Infinity,-Infinity,1.5]"),  # beyond FP32: infinities, as Triton casts
        ("FP32", [float("nan"), 1e39], "[NaN,Infinity]"),
        ("UINT8", [256, 257], "[0,1]"),  # out-of-range integers wrap, as Triton's C casts do
        ("INT8", [-129, 128], "[127,-128]"),
    ],
    ids=["nested", "non-finite", "fp32-overflow", "nan-then-overflow", "uint8-wraps", "int8-wraps"],
)
def test_json_data_details(server: ServerProcess, datatype: str, data: list[Any], rendered: str) -> None:
    count = rendered.count(",") + 1
    status, _, body = infer_json(server, one(f"IN_{datatype}", datatype, [count], data))
    assert (status, body) == (200, expected(datatype, [count], rendered))


@pytest.mark.parametrize(
    "datatype,data,message",
    [
        ("BOOL", [0, 1], "attempt to access JSON non-boolean as boolean"),
        ("UINT32", [-1], NOT_UINT),
        ("UINT64", [2**64], NOT_UINT),
        ("INT64", [2**63], NOT_INT),
        ("FP64", [True], "attempt to access JSON non-number as double"),
    ],
)
def test_json_data_type_errors(server: ServerProcess, datatype: str, data: list[Any], message: str) -> None:
    status, _, body = infer_json(server, one(f"IN_{datatype}", datatype, [len(data)], data))
    assert (status, json.loads(body)) == (400, {"error": f"Unable to parse 'data': {message}"})  # Triton: 500


@pytest.mark.parametrize("datatype", ["FP16", "BF16"])
def test_half_precision_is_binary_only(server: ServerProcess, datatype: str) -> None:
    status, _, body = infer_json(server, one(f"IN_{datatype}", datatype, [2], [1.5, 0.1]))
    assert status == 400
    assert json.loads(body)["error"] == (
        f"receiving {datatype} data via JSON is not supported. Please use the binary data format "
        f"for input IN_{datatype}"
    )
    raw = bytes.fromhex("003e80c0662e")
    request: dict[str, Any] = {"inputs": [binary_input(f"IN_{datatype}", datatype, [3], 6)]}
    status, _, body = infer_binary(server, request, raw)
    assert status == 400
    assert json.loads(body)["error"] == (
        f"sending {datatype} data via JSON is not supported. Please use the binary data format for output"
    )
    request["outputs"] = [binary_output(f"OUT_{datatype}")]
    status, headers, body = infer_binary(server, request, raw)
    head = header(output(f"OUT_{datatype}", datatype, [3], '"parameters":{"binary_data_size":6}'))
    assert (status, body) == (200, head + raw)
    assert headers["content-type"] == "application/octet-stream"
    assert headers["inference-header-content-length"] == str(len(head))


def test_empty_tensors(server: ServerProcess) -> None:
    status, _, body = infer_json(server, one("IN_FP32", "FP32", [0], []))
    assert (status, body) == (200, expected("FP32", [0], "[]"))
    request = {"inputs": [binary_input("IN_INT16", "INT16", [0], 0)], "outputs": [binary_output("OUT_INT16")]}
    status, headers, body = infer_binary(server, request, b"")
    # a binary output of 0 bytes sends no binary data: a plain JSON response (as Triton)
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert "inference-header-content-length" not in headers
    assert body == header(output("OUT_INT16", "INT16", [0], '"parameters":{"binary_data_size":0}'))


def test_empty_bytes_tensor(server: ServerProcess) -> None:
    status, _, body = infer_json(server, one("IN_BYTES", "BYTES", [0], []))
    assert (status, body) == (200, expected("BYTES", [0], "[]"))


# -- binary data -------------------------------------------------------------------------------


def sample(datatype: str) -> np.ndarray:
    if datatype == "BYTES":
        return np.array([b"a\x00b", b"\xff\xfe\x00", b"", "w\u00f6rld".encode()], dtype=np.object_)
    if datatype == "BOOL":
        return np.array([True, False, True, True])
    if datatype in ("FP16", "FP32", "FP64", "BF16"):
        largest = {"FP16": 65504.0, "BF16": 2.0**100}.get(datatype, 3.0e38)  # exact in the type
        return np.array([1.5, -2.0, 0.0, largest], dtype=NUMPY[datatype])
    info = np.iinfo(NUMPY[datatype])
    return np.array([info.min, 0, 1, info.max], dtype=NUMPY[datatype])


ROUND_TRIPS = [(t, True) for t in TYPES] + [(t, False) for t in TYPES if t not in ("FP16", "BF16")]


@pytest.mark.parametrize(
    "datatype,binary", ROUND_TRIPS, ids=[f"{t}-{'binary' if b else 'json'}" for t, b in ROUND_TRIPS]
)
def test_tritonclient_round_trip(client: httpclient.InferenceServerClient, datatype: str, binary: bool) -> None:
    data = sample(datatype)
    if datatype == "BYTES" and not binary:
        data = data[[0, 3]]  # JSON strings must be UTF-8 text for the client library
    inp = httpclient.InferInput(f"IN_{datatype}", list(data.shape), datatype)
    inp.set_data_from_numpy(data, binary_data=binary)
    out = httpclient.InferRequestedOutput(f"OUT_{datatype}", binary_data=binary)
    result = client.infer("all_types", [inp], outputs=[out], request_id="rt-1")
    got = result.as_numpy(f"OUT_{datatype}")
    assert result.get_response()["id"] == "rt-1"
    if datatype == "BYTES":
        # the client library gives JSON strings back as str, binary BYTES as bytes
        assert list(got) == (list(data) if binary else [b.decode() for b in data])
    else:
        np.testing.assert_array_equal(got, data)
        assert got.dtype == data.dtype


def test_non_utf8_bytes_rendered_as_json(server: ServerProcess) -> None:
    request = {"inputs": [binary_input("IN_BYTES", "BYTES", [3], 17)]}
    status, headers, body = infer_binary(server, request, strings(b"\xff\xfe\x00", b"ok", b""))
    assert status == 200
    assert headers["content-type"] == "application/json"
    # the element's raw bytes, not valid UTF-8, exactly as Triton (RapidJSON) writes them
    rendered = header(output("OUT_BYTES", "BYTES", [3], '"data":DATA'))
    assert body == rendered.replace(b"DATA", b'["\xff\xfe\\u0000","ok",""]')


def test_binary_output_with_id(server: ServerProcess) -> None:
    data = [float(i) + 0.5 for i in range(16)]
    request = {"id": "b1", **one("INPUT0", "FP32", [1, 16], data)}
    request["outputs"] = [binary_output("OUTPUT0")]
    status, headers, body = infer_json(server, request, "identity_fp32")
    rendered = output("OUTPUT0", "FP32", [1, 16], '"parameters":{"binary_data_size":64}')
    head = header(rendered, "identity_fp32", id_="b1")
    assert (status, body) == (200, head + np.array(data, dtype=np.float32).tobytes())
    assert headers["content-type"] == "application/octet-stream"
    assert headers["inference-header-content-length"] == str(len(head))
    assert headers["content-length"] == str(len(head) + 64)


def test_binary_data_output(server: ServerProcess) -> None:
    data = [float(i) for i in range(16)]
    request = {"parameters": {"binary_data_output": True}, **one("INPUT0", "FP32", [1, 16], data)}
    status, headers, body = infer_json(server, request, "identity_fp32")
    assert status == 200 and headers["content-type"] == "application/octet-stream"
    assert body.endswith(np.array(data, dtype=np.float32).tobytes())
    # a listed output uses its own binary_data (default false), not binary_data_output
    request["outputs"] = [{"name": "OUTPUT0", "parameters": {"binary_data": False}}]
    status, headers, body = infer_json(server, request, "identity_fp32")
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(body)["outputs"][0]["data"] == data
    request["id"] = ""  # an empty id is not echoed
    status, _, body = infer_json(server, request, "identity_fp32")
    assert "id" not in json.loads(body)


def test_mixed_binary_and_json_outputs(server: ServerProcess) -> None:
    request = {
        "inputs": [
            binary_input("IN_INT32", "INT32", [2], 8),
            {"name": "IN_FP64", "shape": [2], "datatype": "FP64", "data": [0.25, -1]},
        ],
        "outputs": [binary_output("OUT_INT32"), {"name": "OUT_FP64"}],
    }
    ints = np.array([7, -8], dtype=np.int32).tobytes()
    status, headers, body = infer_binary(server, request, ints)
    head = header(
        output("OUT_INT32", "INT32", [2], '"parameters":{"binary_data_size":8}')
        + ","
        + output("OUT_FP64", "FP64", [2], '"data":[0.25,-1.0]')
    )
    assert (status, body) == (200, head + ints)
    assert headers["inference-header-content-length"] == str(len(head))


def test_request_parameters_are_accepted(server: ServerProcess) -> None:
    parameters = {"foo": "bar", "n": 3, "flag": True, "x": 1.5, "sequence_id": 0}
    request = {"id": "p1", "parameters": parameters, **one("IN_INT8", "INT8", [1], [5])}
    status, _, body = infer_json(server, request)
    assert status == 200
    assert json.loads(body)["id"] == "p1"


def test_raw_binary_request(server: ServerProcess) -> None:
    data = np.arange(16, dtype=np.float32).tobytes()
    headers = {"Inference-Header-Content-Length": "0"}
    status, got_headers, body = call(server, "/v2/models/identity_fp32/infer", data, headers)
    rendered = output("OUTPUT0", "FP32", [1, 16], '"parameters":{"binary_data_size":64}')
    assert (status, body) == (200, header(rendered, "identity_fp32") + data)
    assert got_headers["content-type"] == "application/octet-stream"


def test_chunked_request_body(server: ServerProcess) -> None:
    body = json.dumps(one("IN_UINT16", "UINT16", [2], [3, 4])).encode()
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
    try:
        chunks = iter([body[:10], body[10:]])
        conn.request("POST", "/v2/models/all_types/infer", body=chunks, encode_chunked=True)
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, expected("UINT16", [2], "[3,4]"))
    finally:
        conn.close()


def test_large_binary_tensor(client: httpclient.InferenceServerClient) -> None:
    data = np.random.default_rng(0).random(4 << 20, dtype=np.float32)  # 16 MiB each way
    inp = httpclient.InferInput("IN_FP32", list(data.shape), "FP32")
    inp.set_data_from_numpy(data)
    result = client.infer("all_types", [inp], outputs=[httpclient.InferRequestedOutput("OUT_FP32")])
    np.testing.assert_array_equal(result.as_numpy("OUT_FP32"), data)


# -- compression -------------------------------------------------------------------------------


@pytest.mark.parametrize("request_algorithm", [None, "gzip", "deflate"])
@pytest.mark.parametrize("response_algorithm", [None, "gzip", "deflate"])
def test_tritonclient_compression(
    client: httpclient.InferenceServerClient,
    request_algorithm: str | None,
    response_algorithm: str | None,
) -> None:
    data = np.arange(64, dtype=np.int64)
    inputs = [
        httpclient.InferInput("IN_INT64", [64], "INT64"),
        httpclient.InferInput("IN_FP32", [3], "FP32"),
    ]
    inputs[0].set_data_from_numpy(data)
    inputs[1].set_data_from_numpy(np.array([1, 2, 3], dtype=np.float32), binary_data=False)
    outputs = [
        httpclient.InferRequestedOutput("OUT_INT64"),
        httpclient.InferRequestedOutput("OUT_FP32", binary_data=False),
    ]
    result = client.infer(
        "all_types",
        inputs,
        outputs=outputs,
        request_compression_algorithm=request_algorithm,
        response_compression_algorithm=response_algorithm,
    )
    np.testing.assert_array_equal(result.as_numpy("OUT_INT64"), data)
    np.testing.assert_array_equal(result.as_numpy("OUT_FP32"), [1, 2, 3])


@pytest.mark.parametrize(
    "accept,encoding",
    [
        ("gzip", "gzip"),
        ("deflate", "deflate"),
        ("deflate;q=0.5, gzip;q=0.8", "gzip"),
        ("identity", None),
        ("br", None),
    ],
)
def test_response_compression(server: ServerProcess, accept: str, encoding: str | None) -> None:
    request = json.dumps(one("IN_INT32", "INT32", [2], [1, 2])).encode()
    headers = {"Accept-Encoding": accept}
    status, got_headers, body = call(server, "/v2/models/all_types/infer", request, headers)
    assert status == 200
    assert got_headers.get("content-encoding") == encoding
    if encoding is not None:
        body = zlib.decompress(body, wbits=31 if encoding == "gzip" else 15)
    assert body == expected("INT32", [2], "[1,2]")


def test_compressed_binary_request_and_response(server: ServerProcess) -> None:
    data = np.arange(16, dtype=np.float32).tobytes()
    request = {
        "inputs": [binary_input("INPUT0", "FP32", [1, 16], 64)],
        "outputs": [binary_output("OUTPUT0")],
    }
    head = json.dumps(request).encode()
    headers = {
        "Inference-Header-Content-Length": str(len(head)),
        "Content-Encoding": "gzip",
        "Accept-Encoding": "gzip",
    }
    body = gzip.compress(head + data)
    status, got_headers, got = call(server, "/v2/models/identity_fp32/infer", body, headers)
    assert status == 200
    assert got_headers["content-encoding"] == "gzip"
    plain = gzip.decompress(got)
    length = int(got_headers["inference-header-content-length"])
    assert plain[length:] == data
    assert json.loads(plain[:length])["outputs"][0]["parameters"] == {"binary_data_size": 64}


# -- classification ----------------------------------------------------------------------------


def test_classification(server: ServerProcess) -> None:
    request: dict[str, Any] = {
        **one("IN_FP32", "FP32", [3], [0.1, 0.9, 0.5]),
        "outputs": [{"name": "OUT_FP32", "parameters": {"classification": 2}}],
    }
    status, _, body = infer_json(server, request)
    classes = '["0.900000:1","0.500000:2"]'
    assert (status, body) == (200, expected("BYTES", [2], classes, name="OUT_FP32"))
    request["outputs"][0]["parameters"]["binary_data"] = True
    status, headers, body = infer_json(server, request)
    assert status == 200 and headers["content-type"] == "application/octet-stream"
    assert body.endswith(strings(b"0.900000:1", b"0.500000:2"))
    request = {
        **one("IN_INT32", "INT32", [4], [1, 9, 3, 5]),
        "outputs": [{"name": "OUT_INT32", "parameters": {"classification": 0}}],
    }
    status, _, body = infer_json(server, request)  # 0: no classification
    assert (status, body) == (200, expected("INT32", [4], "[1,9,3,5]"))
    request["outputs"][0]["parameters"]["classification"] = 10  # more than there are: all
    status, _, body = infer_json(server, request)
    classes = '["9:1","5:3","3:2","1:0"]'
    assert (status, body) == (200, expected("BYTES", [4], classes, name="OUT_INT32"))


def _post_raw(port: int, body: bytes, headers: dict[str, str]) -> socket.socket:
    """Send a request on a new connection and leave the response unread."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    start = f"POST /v2/models/all_types/infer HTTP/1.1\r\nHost: x\r\n{head}"
    sock.sendall(f"{start}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return sock


def _read_response(sock: socket.socket) -> bytes:
    with sock, sock.makefile("rb") as stream:
        resp = http.client.HTTPResponse(sock)
        resp.fp = stream
        resp.begin()
        return resp.read()


def test_slow_reader_keeps_its_output(server: ServerProcess) -> None:
    """A response the client has not read yet is not overwritten by the next requests.

    Binary outputs go out straight from shared memory; the memory must stay
    reserved until the last byte has left the transport.
    """
    count = 2 << 20  # 8 MiB, far more than the socket buffers hold
    request = {"inputs": [binary_input("IN_FP32", "FP32", [count], 4 * count)], "outputs": [binary_output("OUT_FP32")]}
    head = json.dumps(request).encode()
    headers = {"Inference-Header-Content-Length": str(len(head))}
    slow = _post_raw(server.http_port, head + np.full(count, 1.0, np.float32).tobytes(), headers)
    time.sleep(0.3)  # the server is now blocked writing to `slow`
    for value in (2.0, 3.0):  # same sizes: the same shared memory, if it were free
        fast = _post_raw(server.http_port, head + np.full(count, value, np.float32).tobytes(), headers)
        assert np.all(np.frombuffer(_read_response(fast)[-4 * count :], np.float32) == value)
    body = _read_response(slow)
    assert np.all(np.frombuffer(body[-4 * count :], np.float32) == 1.0)
