"""HTTP/REST endpoint: every bad inference request of the Triton 2.51 reference, exact answers.

Each case sends one malformed request over plain HTTP, checks the status and
the ``{"error": ...}`` body byte for byte (Triton's words), then checks that
a good request to the same model still succeeds. One server for the module.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.clients import HTTP_ONLY, http_call, module_server
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

SIXTEEN = [float(i) for i in range(16)]
FP32_BYTES = np.arange(16, dtype=np.float32).tobytes()
NO_ID = "[request id: <id_unknown>] "
NOTE = (
    " NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension "
    "to be prepended to each input shape. If you want to specify the full shape including the "
    "batch dim in your input dims config, try setting max_batch_size to zero. See the model "
    "configuration docs for more info on max_batch_size."
)
ONE_OF = (
    "Input must set only one of the following fields: 'data', 'binary_data_size' in "
    "'parameters', 'shared_memory_region' in 'parameters'. But"
)
NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned-integer"
EMPTY_BODY = (
    "the inference request body is empty: expected the request's JSON (or, for one raw binary input, "
    "the 'Inference-Header-Content-Length: 0' header)"
)
SHAPE_MISMATCH = "Unable to parse 'data': Shape does not match true shape of 'data' field"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "identity_fp32", identity_config("TYPE_FP32", "[ 16 ]", max_batch_size=8))
        add_model(repo, "identity_nobatch", identity_config("TYPE_INT32", "[ 2, 3 ]", max_batch_size=0))
        add_model(repo, "identity_bytes", identity_config("TYPE_STRING", "[ -1 ]", max_batch_size=0))

    yield from module_server(tmp_path_factory.mktemp("http_errors"), build, HTTP_ONLY)


call = http_call


def as_json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def error(message: str) -> bytes:
    return json.dumps({"error": message}, ensure_ascii=False, separators=(",", ":")).encode()


def tensor(datatype: str, shape: Any, data: Any, name: str = "INPUT0") -> dict[str, Any]:
    return {"name": name, "shape": shape, "datatype": datatype, "data": data}


def request(*inputs: dict[str, Any], **fields: Any) -> bytes:
    return as_json({**fields, "inputs": list(inputs)})


def fp32(shape: Any, data: Any, **fields: Any) -> bytes:
    return request(tensor("FP32", shape, data), **fields)


def binary(header: dict[str, Any], payload: bytes) -> tuple[bytes, dict[str, str]]:
    head = as_json(header)
    return head + payload, {
        "Inference-Header-Content-Length": str(len(head)),
        "Content-Type": "application/octet-stream",
    }


def binary_input(datatype: str, shape: list[int], size: Any) -> dict[str, Any]:
    params = {"binary_data_size": size}
    return {"name": "INPUT0", "shape": shape, "datatype": datatype, "parameters": params}


def strings(*items: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(s)) + s for s in items)


def bytes_binary(shape: list[int], payload: bytes) -> tuple[bytes, dict[str, str]]:
    return binary({"inputs": [binary_input("BYTES", shape, len(payload))]}, payload)


GOOD = {
    "identity_fp32": fp32([1, 16], SIXTEEN),
    "identity_nobatch": request(tensor("INT32", [2, 3], [1, 2, 3, 4, 5, 6])),
    "identity_bytes": request(tensor("BYTES", [2], ["a", "bc"])),
}
BINARY_FP32 = {"inputs": [binary_input("FP32", [1, 16], 64)]}
RAW = as_json(BINARY_FP32) + FP32_BYTES  # a binary request, sent with other header values


def bad(
    case_id: str,
    status: int,
    message: str,
    body: bytes | tuple[bytes, dict[str, str]],
    *,
    model: str = "identity_fp32",
    url: str = "",
    headers: dict[str, str] | None = None,
) -> Any:
    if isinstance(body, tuple):
        body, headers = body
    return pytest.param(model, url, body, headers or {}, status, message, id=case_id)


CASES = [
    # models and versions
    bad("unknown model", 404, "Request for unknown model: 'nope' is not found", GOOD["identity_fp32"], model="nope"),
    bad(
        "unknown version",
        404,
        "Request for unknown model: 'identity_fp32' version 3 is not found",
        GOOD["identity_fp32"],
        url="/versions/3",
    ),
    bad(
        "version 0",
        404,
        "Request for unknown model: 'identity_fp32' version 0 is not found",
        GOOD["identity_fp32"],
        url="/versions/0",
    ),
    bad(
        "version beyond int64",
        400,
        "failed to get model version from specified version string '99999999999999999999' "
        "(details: stol), version should be an integral value > 0",
        GOOD["identity_fp32"],
        url="/versions/99999999999999999999",
    ),
    # shapes, datatypes, inputs and outputs (the core's checks)
    bad(
        "wrong shape",
        400,
        f"{NO_ID}unexpected shape for input 'INPUT0' for model 'identity_fp32'. Expected [-1,16], got [1,15]." + NOTE,
        fp32([1, 15], SIXTEEN[:15]),
    ),
    bad(
        "wrong shape with id",
        400,
        "[request id: req-7] unexpected shape for input 'INPUT0' for model 'identity_fp32'. "
        "Expected [-1,16], got [1,15]." + NOTE,
        fp32([1, 15], SIXTEEN[:15], id="req-7"),
    ),
    bad(
        "missing batch dimension",
        400,
        f"{NO_ID}inference request batch-size must be <= 8 for 'identity_fp32'",
        fp32([16], SIXTEEN),
    ),
    bad(
        "batch above max_batch_size",
        400,
        f"{NO_ID}inference request batch-size must be <= 8 for 'identity_fp32'",
        fp32([9, 16], SIXTEEN * 9),
    ),
    bad(
        "batch above max_batch_size with id",
        400,
        "[request id: req-8] inference request batch-size must be <= 8 for 'identity_fp32'",
        fp32([9, 16], SIXTEEN * 9, id="req-8"),
    ),
    bad(
        "wrong shape without batching",
        400,
        f"{NO_ID}unexpected shape for input 'INPUT0' for model 'identity_nobatch'. Expected [2,3], got [3,2]. ",
        request(tensor("INT32", [3, 2], [1, 2, 3, 4, 5, 6])),
        model="identity_nobatch",
    ),
    bad(
        "wrong rank without batching",
        400,
        f"{NO_ID}unexpected shape for input 'INPUT0' for model 'identity_nobatch'. Expected [2,3], got [6]. ",
        request(tensor("INT32", [6], [1, 2, 3, 4, 5, 6])),
        model="identity_nobatch",
    ),
    bad(
        "wrong datatype",
        400,
        f"{NO_ID}inference input 'INPUT0' data-type is 'INT32', but model 'identity_fp32' expects 'FP32'",
        request(tensor("INT32", [1, 16], list(range(16)))),
    ),
    bad("unknown datatype", 400, "invalid datatype for input INPUT0", request(tensor("FOO", [1, 16], SIXTEEN))),
    bad("lower-case datatype", 400, "invalid datatype for input INPUT0", request(tensor("fp32", [1, 16], SIXTEEN))),
    bad(
        "no inputs",
        400,
        f"{NO_ID}expected 1 inputs but got 0 inputs for model 'identity_fp32'. Got input(s) [], "
        "but missing required input(s) ['INPUT0']. Please provide all required input(s).",
        request(),
    ),
    bad(
        "unknown input name",
        400,
        "unexpected inference input 'INPUTX' for model 'identity_nobatch'",
        request(tensor("INT32", [2, 3], [1, 2, 3, 4, 5, 6], "INPUTX")),
        model="identity_nobatch",
    ),
    # Triton prints "missing required input(s) ]" here (a malformed list); tritium prints "[]".
    bad(
        "extra unknown input",
        400,
        f"{NO_ID}expected 1 inputs but got 2 inputs for model 'identity_fp32'. Got input(s) "
        "['BOGUS','INPUT0'], but missing required input(s) []. Please provide all required input(s).",
        request(tensor("FP32", [1, 16], SIXTEEN), tensor("FP32", [1, 16], SIXTEEN, "BOGUS")),
    ),
    bad(
        "duplicate input",
        400,
        f"{NO_ID}input 'INPUT0' already exists in request",
        request(tensor("FP32", [1, 16], SIXTEEN), tensor("FP32", [1, 16], SIXTEEN)),
    ),
    bad(
        "unknown requested output",
        400,
        "unexpected inference output 'BOGUS_OUT' for model 'identity_fp32'",
        fp32([1, 16], SIXTEEN, outputs=[{"name": "BOGUS_OUT"}]),
    ),
    # malformed JSON (HTTP 400; Triton 2.51 answers 500: docs/compatibility.md)
    bad(
        "missing 'inputs'",
        400,
        "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'",
        as_json({"id": "x"}),
    ),
    bad(
        "input without name",
        400,
        "Unable to parse 'name': attempt to access non-existing object member 'name'",
        as_json({"inputs": [{"shape": [1, 16], "datatype": "FP32", "data": SIXTEEN}]}),
    ),
    bad(
        "input without shape",
        400,
        "Unable to parse 'shape': attempt to access non-existing object member 'shape'",
        as_json({"inputs": [{"name": "INPUT0", "datatype": "FP32", "data": SIXTEEN}]}),
    ),
    bad(
        "input without datatype",
        400,
        "Unable to parse 'datatype': attempt to access non-existing object member 'datatype'",
        as_json({"inputs": [{"name": "INPUT0", "shape": [1, 16], "data": SIXTEEN}]}),
    ),
    bad(
        "input without data",
        400,
        ONE_OF + " no field is set",
        as_json({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32"}]}),
    ),
    bad(
        "'inputs' is an object",
        400,
        "Unable to parse 'inputs': attempt to access JSON non-array as array",
        as_json({"inputs": tensor("FP32", [1, 16], SIXTEEN)}),
    ),
    bad(
        "shape is a string",
        400,
        "Unable to parse 'shape': attempt to access JSON non-array as array",
        request(tensor("FP32", "1,16", SIXTEEN)),
    ),
    bad("negative dimension", 400, f"Unable to parse 'shape': {NOT_UINT}", fp32([-1, 16], SIXTEEN)),
    bad("malformed JSON", 400, "failed to parse the request JSON buffer: Invalid value. at 12", b'{"inputs": ['),
    bad("not JSON at all", 400, "failed to parse the request JSON buffer: Invalid value. at 0", b"hello"),
    bad(
        "missing comma in an array",
        400,
        "failed to parse the request JSON buffer: Missing a comma or ']' after an array element. at 14",
        b'{"inputs": [1 2]}',
    ),
    bad(
        "JSON body is an array",
        400,
        "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'",
        b"[1, 2]",
    ),
    bad(
        "numeric id",
        400,
        "Unable to parse 'id': attempt to access JSON non-string as string",
        fp32([1, 16], SIXTEEN, id=5),
    ),
    bad(
        "binary_data is a string",
        400,
        "Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean",
        fp32([1, 16], SIXTEEN, outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": "true"}}]),
    ),
    bad(
        "binary_data_output is a string",
        400,
        "Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean",
        fp32([1, 16], SIXTEEN, parameters={"binary_data_output": "true"}),
    ),
    bad(
        "requested output without name",
        400,
        "Unable to parse 'name': attempt to access non-existing object member 'name'",
        fp32([1, 16], SIXTEEN, outputs=[{"parameters": {}}]),
    ),
    bad(
        "negative classification",
        400,
        f"Unable to set 'classification': {NOT_UINT}",
        fp32([1, 16], SIXTEEN, outputs=[{"name": "OUTPUT0", "parameters": {"classification": -1}}]),
    ),
    bad(
        "classification as a string",
        400,
        f"Unable to set 'classification': {NOT_UINT}",
        fp32([1, 16], SIXTEEN, outputs=[{"name": "OUTPUT0", "parameters": {"classification": "3"}}]),
    ),
    bad(
        "reserved parameter name",
        400,
        "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.",
        fp32([1, 16], SIXTEEN, parameters={"triton_x": 1}),
    ),
    bad(
        "parameter of a list type",
        400,
        "parameter 'p' has invalid type. It should be either 'int', 'bool', or 'string'.",
        fp32([1, 16], SIXTEEN, parameters={"p": [1]}),
    ),
    bad(
        "unregistered shared-memory region",
        404,
        "Unable to find shared memory region: 'r'",
        as_json(
            {
                "inputs": [
                    {
                        "name": "INPUT0",
                        "shape": [1, 16],
                        "datatype": "FP32",
                        "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 64},
                    }
                ]
            }
        ),
    ),
    # JSON data
    # an empty body: Triton 2.51 takes it for a raw input of 0 bytes (200 with an empty output for a
    # model whose one input has a variable shape); tritium refuses it (docs/compatibility.md)
    bad("empty body", 400, EMPTY_BODY, b"", headers={"Content-Type": "application/json"}),
    bad("empty body, variable-shape input", 400, EMPTY_BODY, b"", model="identity_bytes"),
    bad(
        "empty body declared raw (Inference-Header-Content-Length: 0)",
        400,
        f"{NO_ID}input byte size mismatch for input 'raw_input' for model 'identity_fp32'. Expected 64, got 0",
        b"",
        headers={"Inference-Header-Content-Length": "0"},
    ),
    bad("JSON data has fewer elements than the shape", 400, SHAPE_MISMATCH, fp32([1, 16], SIXTEEN[:15])),
    bad("JSON data has more elements than the shape", 400, SHAPE_MISMATCH, fp32([1, 16], SIXTEEN + [1.0])),
    bad(
        "JSON BYTES data count differs from the shape",
        400,
        f"{NO_ID}unexpected number of string elements 3 for inference input 'INPUT0' for model "
        "'identity_bytes', expecting 2",
        request(tensor("BYTES", [2], ["a", "b", "c"])),
        model="identity_bytes",
    ),
    bad(
        "JSON number in BYTES data",
        400,
        "Unable to parse JSON bytes array: attempt to access JSON non-string as string",
        request(tensor("BYTES", [1], [5])),
        model="identity_bytes",
    ),
    bad(
        "JSON string in FP32 data",
        400,
        "Unable to parse 'data': attempt to access JSON non-number as double",
        fp32([1, 16], ["x"] + SIXTEEN[1:]),
    ),
    bad(
        "JSON null in FP32 data",
        400,
        "Unable to parse 'data': attempt to access JSON non-number as double",
        fp32([1, 16], [None] + SIXTEEN[1:]),
    ),
    bad(
        "JSON bool in INT32 data",
        400,
        "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer",
        request(tensor("INT32", [2, 3], [True, 2, 3, 4, 5, 6])),
        model="identity_nobatch",
    ),
    bad(
        "JSON float in INT32 data",
        400,
        "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer",
        request(tensor("INT32", [2, 3], [1.0, 2, 3, 4, 5, 6])),
        model="identity_nobatch",
    ),
    bad(
        "JSON data is a scalar",
        400,
        "Unable to parse 'data': attempt to access JSON non-array as array",
        fp32([1, 16], 1.0),
    ),
    # the binary tensor extension
    bad(
        "Inference-Header-Content-Length beyond the body",
        400,
        f"inference header size should be in range (0, {len(RAW)}), got: {len(RAW) + 10}",
        RAW,
        headers={"Inference-Header-Content-Length": str(len(RAW) + 10)},
    ),
    bad(
        "negative Inference-Header-Content-Length",
        400,
        f"inference header size should be in range (0, {len(RAW)}), got: -1",
        RAW,
        headers={"Inference-Header-Content-Length": "-1"},
    ),
    bad(
        "Inference-Header-Content-Length cuts the JSON",
        400,
        "failed to parse the request JSON buffer: Missing a comma or '}' after an object member. "
        f"at {len(as_json(BINARY_FP32)) - 5}",
        RAW,
        headers={"Inference-Header-Content-Length": str(len(as_json(BINARY_FP32)) - 5)},
    ),
    bad(
        "Inference-Header-Content-Length 0: a raw body of the wrong size",
        400,
        f"{NO_ID}input byte size mismatch for input 'raw_input' for model 'identity_fp32'. Expected 64, got {len(RAW)}",
        RAW,
        headers={"Inference-Header-Content-Length": "0"},
    ),
    bad(
        "non-numeric Inference-Header-Content-Length: a raw body",
        400,
        f"{NO_ID}input byte size mismatch for input 'raw_input' for model 'identity_fp32'. Expected 64, got {len(RAW)}",
        RAW,
        headers={"Inference-Header-Content-Length": "abc"},
    ),
    bad(
        "binary_data_size beyond the body",
        400,
        "unexpected size for input 'INPUT0', expecting 24 additional bytes for model 'identity_fp32'",
        binary(BINARY_FP32, FP32_BYTES[:40]),
    ),
    bad(
        "binary_data_size without binary data",
        400,
        "unexpected size for input 'INPUT0', expecting 64 additional bytes for model 'identity_fp32'",
        binary(BINARY_FP32, b""),
    ),
    bad(
        "binary_data_size in a pure JSON request",
        400,
        "unexpected size for input 'INPUT0', expecting 64 additional bytes for model 'identity_fp32'",
        as_json(BINARY_FP32),
    ),
    bad(
        "bytes after the binary data",
        400,
        "unexpected additional input data for model 'identity_fp32'",
        binary(BINARY_FP32, FP32_BYTES + b"12345678"),
    ),
    bad(
        "binary_data_size not the tensor size",
        400,
        f"{NO_ID}input byte size mismatch for input 'INPUT0' for model 'identity_fp32'. Expected 64, got 60",
        binary({"inputs": [binary_input("FP32", [1, 16], 60)]}, FP32_BYTES[:60]),
    ),
    bad(
        "both data and binary_data_size",
        400,
        ONE_OF + " set 'data' 'binary_data_size'",
        binary({"inputs": [{**binary_input("FP32", [1, 16], 64), "data": SIXTEEN}]}, FP32_BYTES),
    ),
    bad(
        "unknown datatype with binary data",
        400,
        f"{NO_ID}inference input 'INPUT0' data-type is '<invalid>', but model 'identity_fp32' expects 'FP32'",
        binary({"inputs": [binary_input("FOO", [1, 16], 64)]}, FP32_BYTES),
    ),
    bad(
        "binary_data_size is negative",
        400,
        f"Unable to parse 'binary_data_size': {NOT_UINT}",
        binary({"inputs": [binary_input("FP32", [1, 16], -4)]}, FP32_BYTES),
    ),
    bad(
        "BYTES length prefix beyond its buffer",
        400,
        "incomplete string data for inference input 'INPUT0', expecting string of length 100 but "
        "only 3 bytes available",
        bytes_binary([1], struct.pack("<I", 100) + b"abc"),
        model="identity_bytes",
    ),
    bad(
        "BYTES buffer shorter than a length prefix",
        400,
        f"{NO_ID}incomplete string length indicator for inference input 'INPUT0' for model "
        "'identity_bytes', expecting 4 bytes but only 2 bytes available. Please make sure the "
        "string length indicator is in one buffer.",
        bytes_binary([1], b"\x03\x00"),
        model="identity_bytes",
    ),
    bad(
        "BYTES: fewer elements than the shape",
        400,
        f"{NO_ID}expected 3 string elements for inference input 'INPUT0' for model 'identity_bytes', got 2",
        bytes_binary([3], strings(b"a", b"b")),
        model="identity_bytes",
    ),
    bad(
        "BYTES: more elements than the shape",
        400,
        f"{NO_ID}unexpected number of string elements 3 for inference input 'INPUT0' for model "
        "'identity_bytes', expecting 2",
        bytes_binary([2], strings(b"a", b"b", b"c")),
        model="identity_bytes",
    ),
]


@pytest.mark.parametrize("model,url,body,headers,status,message", CASES)
def test_bad_request_then_good_request(
    server: ServerProcess,
    model: str,
    url: str,
    body: bytes,
    headers: dict[str, str],
    status: int,
    message: str,
) -> None:
    got = call(server, "POST", f"/v2/models/{model}{url}/infer", body, headers)
    assert (got[0], got[2]) == (status, error(message))
    assert got[1]["content-type"] == "application/json"
    good_model = model if model in GOOD else "identity_fp32"
    ok_status, _, ok_body = call(server, "POST", f"/v2/models/{good_model}/infer", GOOD[good_model])
    assert ok_status == 200, ok_body


@pytest.mark.parametrize("version", ["abc", "-1", ""])
def test_malformed_version_is_an_unknown_url(server: ServerProcess, version: str) -> None:
    url = f"/v2/models/identity_fp32/versions/{version}/infer"
    status, headers, body = call(server, "POST", url, GOOD["identity_fp32"])
    assert (status, body) == (404, b'{"error":"Not Found"}')
    assert headers["content-type"] == "application/json"


def test_duplicate_requested_output_answers_once(server: ServerProcess) -> None:
    outputs = [{"name": "OUTPUT0"}, {"name": "OUTPUT0", "parameters": {"binary_data": True}}]
    status, headers, body = call(
        server, "POST", "/v2/models/identity_fp32/infer", fp32([1, 16], SIXTEEN, outputs=outputs)
    )
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["outputs"] == [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 16], "data": SIXTEEN}]


def test_unsupported_content_encoding(server: ServerProcess) -> None:
    url, body = "/v2/models/identity_fp32/infer", GOOD["identity_fp32"]
    status, headers, body = call(server, "POST", url, body, {"Content-Encoding": "br"})
    assert (status, body) == (415, error("Unsupported compression type"))  # Triton: 501
    assert headers["accept-encoding"] == "gzip, deflate"


def test_corrupt_compressed_body(server: ServerProcess) -> None:
    url, body = "/v2/models/identity_fp32/infer", b"\x1f\x8b\x08not gzip"
    status, _, body = call(server, "POST", url, body, {"Content-Encoding": "gzip"})
    assert status == 400
    assert json.loads(body)["error"].startswith("failed to decompress the 'gzip' request body: ")
