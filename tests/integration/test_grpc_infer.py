"""gRPC endpoint, inference: every datatype round-trips, and every bad request gets Triton's answer.

Black-box: one tritium-server subprocess for the module (identity models), driven with
``tritonclient.grpc`` (which always sends ``raw_input_contents``) and with hand-built
``ModelInferRequest`` messages sent through the generated stub (typed ``contents`` and
malformed requests). Expected codes and messages are Triton 2.51's, as recorded in
/work/ref/REPORT.md or read from its source where the recording has no case.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from tests.support.clients import module_server
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

# KServe datatype -> config type, numpy dtype, sample values (extremes, NaN/Inf where they exist)
DATATYPES: dict[str, tuple[str, object, list[object]]] = {
    "BOOL": ("TYPE_BOOL", np.bool_, [True, False, True]),
    "UINT8": ("TYPE_UINT8", np.uint8, [0, 1, 255]),
    "UINT16": ("TYPE_UINT16", np.uint16, [0, 1, 65535]),
    "UINT32": ("TYPE_UINT32", np.uint32, [0, 1, 2**32 - 1]),
    "UINT64": ("TYPE_UINT64", np.uint64, [0, 1, 2**64 - 1]),
    "INT8": ("TYPE_INT8", np.int8, [-128, 0, 127]),
    "INT16": ("TYPE_INT16", np.int16, [-32768, 0, 32767]),
    "INT32": ("TYPE_INT32", np.int32, [-(2**31), 0, 2**31 - 1]),
    "INT64": ("TYPE_INT64", np.int64, [-(2**63), 0, 2**63 - 1]),
    "FP16": ("TYPE_FP16", np.float16, [0.5, -1.5, 65504.0, float("inf")]),
    "FP32": ("TYPE_FP32", np.float32, [0.5, -1.5, float("nan"), float("-inf"), 3.4e38]),
    "FP64": ("TYPE_FP64", np.float64, [0.1, -2.5, 1e300, float("nan")]),
    # tritonclient takes BF16 as float32 values; these are exact in bfloat16
    "BF16": ("TYPE_BF16", np.float32, [1.5, -2.0, 0.0078125, 0.0]),
    "BYTES": ("TYPE_STRING", np.object_, [b"hello", "w\u00f6rld".encode(), b"", b"a\x00b\x00", b"\xff\xfe\x80"]),
}

# typed contents field carrying each datatype (FP16 and BF16 have none)
TYPED_FIELD = {
    "BOOL": "bool_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}

LABELS = ["cat", "dog", "bird", "fish", "cow"]

NOTE = (
    " NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be "
    "prepended to each input shape. If you want to specify the full shape including the batch dim in your "
    "input dims config, try setting max_batch_size to zero. See the model configuration docs for more info "
    "on max_batch_size."
)


def model_name(datatype: str) -> str:
    return f"id_{datatype.lower()}"


def build_repository(root: Path) -> None:
    add_model(root, "identity_fp32", identity_config())
    add_model(root, "identity_nobatch", identity_config(dims="[ 2, 3 ]", max_batch_size=0))
    add_model(root, "identity_bytes", identity_config(dtype="TYPE_STRING", dims="[ -1 ]", max_batch_size=0))
    for datatype, (config_type, _, _) in DATATYPES.items():
        add_model(root, model_name(datatype), identity_config(dtype=config_type, dims="[ -1 ]", max_batch_size=0))
    labels = {"labels.txt": "\n".join(LABELS) + "\n"}
    add_model(
        root,
        "classify",
        """
        backend: "identity"
        max_batch_size: 8
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 5 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 5 ] label_filename: "labels.txt" } ]
        """,
        files=labels,
    )
    add_model(
        root,
        "classify_nobatch",
        """
        backend: "identity"
        max_batch_size: 0
        input [
          { name: "INPUT0" data_type: TYPE_FP32 dims: [ 5 ] },
          { name: "INPUT1" data_type: TYPE_INT32 dims: [ 5 ] }
        ]
        output [
          { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 5 ] label_filename: "labels.txt" },
          { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 5 ] }
        ]
        """,
        files=labels,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("grpc_infer")
    yield from module_server(root, build_repository, ["--allow-http=false"], grpc_only=True)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[grpcclient.InferenceServerClient]:
    c = grpcclient.InferenceServerClient(server.grpc_url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def stub(server: ServerProcess) -> Iterator[service_pb2_grpc.GRPCInferenceServiceStub]:
    channel = grpc.insecure_channel(server.grpc_url)
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


# -- helpers ------------------------------------------------------------------------------------
FP32_16 = np.arange(16, dtype=np.float32) + 0.5


def fp32_request(
    model: str = "identity_fp32", shape: tuple[int, ...] = (1, 16), **fields: object
) -> pb.ModelInferRequest:
    """A raw FP32 request for ``model`` with INPUT0 of ``shape`` (data 0.5, 1.5, ...)."""
    request = pb.ModelInferRequest(model_name=model, **fields)
    request.inputs.add(name="INPUT0", datatype="FP32", shape=list(shape))
    count = int(np.prod(shape)) if shape else 1
    request.raw_input_contents.append((np.arange(max(count, 0), dtype=np.float32) + 0.5).tobytes())
    return request


def assert_good_request_works(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    response = stub.ModelInfer(fp32_request(id="after-error"), timeout=30)
    assert response.id == "after-error"
    assert list(response.outputs[0].shape) == [1, 16]
    assert response.raw_output_contents[0] == FP32_16.tobytes()


def raw_bytes(datatype: str, values: list[object]) -> bytes:
    """The wire bytes of ``values`` as ``datatype``."""
    if datatype == "BYTES":
        return serialize_byte_tensor(np.array(values, dtype=np.object_)).item()
    if datatype == "BF16":
        return (np.array(values, dtype=np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
    return np.array(values, dtype=DATATYPES[datatype][1]).tobytes()


# -- round trips ----------------------------------------------------------------------------------
@pytest.mark.parametrize("datatype", list(DATATYPES))
def test_raw_round_trip_every_datatype(client: grpcclient.InferenceServerClient, datatype: str) -> None:
    _, np_type, values = DATATYPES[datatype]
    array = np.array(values, dtype=np_type)
    tensor = grpcclient.InferInput("INPUT0", list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    result = client.infer(model_name(datatype), [tensor])
    response = result.get_response()
    assert response.model_name == model_name(datatype)
    assert response.model_version == "1"
    assert [(o.name, o.datatype, list(o.shape)) for o in response.outputs] == [("OUTPUT0", datatype, [len(values)])]
    assert len(response.raw_output_contents) == 1
    assert response.raw_output_contents[0] == raw_bytes(datatype, values)
    out = result.as_numpy("OUTPUT0")
    if datatype == "BYTES":
        assert out.tolist() == values
    else:
        np.testing.assert_array_equal(out, array)


@pytest.mark.parametrize("datatype", list(TYPED_FIELD))
def test_typed_contents_round_trip(stub: service_pb2_grpc.GRPCInferenceServiceStub, datatype: str) -> None:
    values = DATATYPES[datatype][2]
    if datatype in ("FP32", "FP64"):
        values = [v for v in values if v == v]  # NaN != NaN; raw tests cover it
    request = pb.ModelInferRequest(model_name=model_name(datatype), id=f"typed-{datatype}")
    tensor = request.inputs.add(name="INPUT0", datatype=datatype, shape=[len(values)])
    getattr(tensor.contents, TYPED_FIELD[datatype]).extend(values)
    response = stub.ModelInfer(request, timeout=30)
    assert response.id == f"typed-{datatype}"
    assert [(o.name, o.datatype, list(o.shape)) for o in response.outputs] == [("OUTPUT0", datatype, [len(values)])]
    assert list(response.raw_output_contents) == [raw_bytes(datatype, values)]


@pytest.mark.parametrize("datatype", ["FP16", "BF16"])
def test_typed_contents_have_no_field_for_16_bit_floats(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, datatype: str
) -> None:
    request = pb.ModelInferRequest(model_name=model_name(datatype))
    tensor = request.inputs.add(name="INPUT0", datatype=datatype, shape=[2])
    tensor.contents.fp32_contents.extend([1.0, 2.0])
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(request, timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == (
        f"unexpected explicit tensor data for input tensor 'INPUT0' for model '{model_name(datatype)}' "
        f"of type 'FP32', expected datatype '{datatype}'"
    )


@pytest.mark.parametrize(
    ("datatype", "field", "given", "expected"),
    [
        ("UINT8", "uint_contents", [257, 255], [1, 255]),
        ("UINT16", "uint_contents", [65537, 7], [1, 7]),
        ("INT8", "int_contents", [-129, 128], [127, -128]),
        ("INT16", "int_contents", [32768, -1], [-32768, -1]),
    ],
)
def test_typed_contents_narrow_types_keep_the_low_bytes(
    stub: service_pb2_grpc.GRPCInferenceServiceStub, datatype: str, field: str, given: list[int], expected: list[int]
) -> None:
    request = pb.ModelInferRequest(model_name=model_name(datatype))
    getattr(request.inputs.add(name="INPUT0", datatype=datatype, shape=[2]).contents, field).extend(given)
    response = stub.ModelInfer(request, timeout=30)
    assert response.raw_output_contents[0] == raw_bytes(datatype, expected)


@pytest.mark.parametrize("datatype", ["FP32", "BYTES", "BOOL"])
def test_empty_tensor_raw(client: grpcclient.InferenceServerClient, datatype: str) -> None:
    array = np.array([], dtype=DATATYPES[datatype][1])
    tensor = grpcclient.InferInput("INPUT0", [0], datatype)
    tensor.set_data_from_numpy(array)
    result = client.infer(model_name(datatype), [tensor])
    response = result.get_response()
    assert [(o.name, o.datatype, list(o.shape)) for o in response.outputs] == [("OUTPUT0", datatype, [0])]
    assert list(response.raw_output_contents) == [b""]


@pytest.mark.parametrize("datatype", ["FP32", "BYTES"])
def test_empty_tensor_typed(stub: service_pb2_grpc.GRPCInferenceServiceStub, datatype: str) -> None:
    request = pb.ModelInferRequest(model_name=model_name(datatype))
    request.inputs.add(name="INPUT0", datatype=datatype, shape=[0]).contents.SetInParent()
    response = stub.ModelInfer(request, timeout=30)
    assert [(o.datatype, list(o.shape)) for o in response.outputs] == [(datatype, [0])]
    assert list(response.raw_output_contents) == [b""]


def test_request_id_echo_and_explicit_output(client: grpcclient.InferenceServerClient) -> None:
    tensor = grpcclient.InferInput("INPUT0", [2, 16], "FP32")
    data = np.stack([FP32_16, -FP32_16])
    tensor.set_data_from_numpy(data)
    result = client.infer(
        "identity_fp32", [tensor], request_id="grpc-req-\u00e9", outputs=[grpcclient.InferRequestedOutput("OUTPUT0")]
    )
    response = result.get_response()
    assert response.id == "grpc-req-\u00e9"
    assert (response.model_name, response.model_version) == ("identity_fp32", "1")
    assert list(response.outputs[0].shape) == [2, 16]
    assert response.raw_output_contents[0] == data.tobytes()
    assert not response.parameters


def test_version_given_explicitly(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    response = stub.ModelInfer(fp32_request(model_version="1"), timeout=30)
    assert response.model_version == "1"


def test_request_parameters_are_accepted(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = fp32_request(id="p")
    request.parameters["foo"].string_param = "bar"
    request.parameters["n"].int64_param = 3
    request.parameters["flag"].bool_param = True
    request.parameters["x"].double_param = 0.25
    request.parameters["priority"].uint64_param = 1
    request.outputs.add(name="OUTPUT0").parameters["binary_data"].bool_param = True
    response = stub.ModelInfer(request, timeout=30)
    assert response.id == "p"
    assert response.raw_output_contents[0] == FP32_16.tobytes()


def test_more_raw_contents_than_inputs_is_accepted(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = fp32_request()
    request.raw_input_contents.append(b"ignored")
    response = stub.ModelInfer(request, timeout=30)
    assert response.raw_output_contents[0] == FP32_16.tobytes()


def test_large_tensor_round_trip(client: grpcclient.InferenceServerClient) -> None:
    data = np.random.default_rng(0).random(3 << 20, dtype=np.float32)  # 12 MiB, above gRPC's 4 MiB default
    tensor = grpcclient.InferInput("INPUT0", [data.size], "FP32")
    tensor.set_data_from_numpy(data)
    result = client.infer("id_fp32", [tensor])
    assert result.get_response().raw_output_contents[0] == data.tobytes()


# -- classification ----------------------------------------------------------------------------------
def test_classification_batched_with_labels(client: grpcclient.InferenceServerClient) -> None:
    data = np.array([[1.1, 0.5, 0.3, 0.9, 0.0], [0.0, 0.9, 0.5, 0.3, 1.1]], dtype=np.float32)
    tensor = grpcclient.InferInput("INPUT0", [2, 5], "FP32")
    tensor.set_data_from_numpy(data)
    result = client.infer("classify", [tensor], outputs=[grpcclient.InferRequestedOutput("OUTPUT0", class_count=3)])
    response = result.get_response()
    assert [(o.name, o.datatype, list(o.shape)) for o in response.outputs] == [("OUTPUT0", "BYTES", [2, 3])]
    assert result.as_numpy("OUTPUT0").tolist() == [
        [b"1.100000:0:cat", b"0.900000:3:fish", b"0.500000:1:dog"],
        [b"1.100000:4:cow", b"0.900000:1:dog", b"0.500000:2:bird"],
    ]


def test_classification_not_batched_int32_without_labels(stub: service_pb2_grpc.GRPCInferenceServiceStub) -> None:
    request = pb.ModelInferRequest(model_name="classify_nobatch")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[5]).contents.fp32_contents.extend([0.0] * 5)
    request.inputs.add(name="INPUT1", datatype="INT32", shape=[5]).contents.int_contents.extend([9, 5, 1, 3, 7])
    request.outputs.add(name="OUTPUT1").parameters["classification"].int64_param = 2
    response = stub.ModelInfer(request, timeout=30)
    assert [(o.name, o.datatype, list(o.shape)) for o in response.outputs] == [("OUTPUT1", "BYTES", [2])]
    assert response.raw_output_contents[0] == b"\x03\x00\x00\x009:0\x03\x00\x00\x007:4"


# -- bad requests: Triton's code and message, and the server keeps serving ----------------------------
def _with(request: pb.ModelInferRequest, edit: Callable[[pb.ModelInferRequest], object]) -> pb.ModelInferRequest:
    edit(request)
    return request


def _bytes_request(
    shape: list[int], raw: bytes | None = None, items: list[bytes] | None = None
) -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name="identity_bytes")
    tensor = request.inputs.add(name="INPUT0", datatype="BYTES", shape=shape)
    if items is not None:
        tensor.contents.bytes_contents.extend(items)
    if raw is not None:
        request.raw_input_contents.append(raw)
    return request


def _typed_fp32(count: int, field: str = "fp32_contents", model: str = "identity_fp32") -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name=model)
    tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16])
    getattr(tensor.contents, field).extend(range(count))
    return request


def _two_inputs_one_raw() -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name="classify_nobatch")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[5])
    request.inputs.add(name="INPUT1", datatype="INT32", shape=[5])
    request.raw_input_contents.append(bytes(20))
    return request


def case(name: str, build: Callable[[], pb.ModelInferRequest], code: grpc.StatusCode, message: str) -> object:
    return pytest.param(build, code, message, id=name)


INVALID = grpc.StatusCode.INVALID_ARGUMENT
BAD_REQUESTS = [
    case(
        "unknown model",
        lambda: fp32_request("nope"),
        grpc.StatusCode.NOT_FOUND,
        "Request for unknown model: 'nope' is not found",
    ),
    case(
        "empty model name",
        lambda: fp32_request(""),
        grpc.StatusCode.NOT_FOUND,
        "Request for unknown model: '' is not found",
    ),
    case(
        "unknown version",
        lambda: fp32_request(model_version="3"),
        grpc.StatusCode.NOT_FOUND,
        "Request for unknown model: 'identity_fp32' version 3 is not found",
    ),
    case(
        "non-numeric version",
        lambda: fp32_request(model_version="abc"),
        INVALID,
        "failed to get model version from specified version string 'abc' (details: stol), "
        "version should be an integral value > 0",
    ),
    case(
        "negative version",
        lambda: fp32_request(model_version="-1"),
        INVALID,
        "invalid model version specified '-1' , version should be an integral value > 0",
    ),
    case(
        "unknown model wins over bad contents",
        lambda: _typed_fp32(16, "int_contents", model="nope"),
        grpc.StatusCode.NOT_FOUND,
        "Request for unknown model: 'nope' is not found",
    ),
    case(
        "wrong shape",
        lambda: fp32_request(shape=(1, 15)),
        INVALID,
        "[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model 'identity_fp32'. "
        "Expected [-1,16], got [1,15]." + NOTE,
    ),
    case(
        "wrong shape, request id set",
        lambda: fp32_request(shape=(1, 15), id="req-7"),
        INVALID,
        "[request id: req-7] unexpected shape for input 'INPUT0' for model 'identity_fp32'. "
        "Expected [-1,16], got [1,15]." + NOTE,
    ),
    case(
        "wrong shape, model without batching",
        lambda: fp32_request("identity_nobatch", shape=(3, 2)),
        INVALID,
        "[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model 'identity_nobatch'. "
        "Expected [2,3], got [3,2]. ",
    ),
    case(
        "wrong datatype",
        lambda: _with(fp32_request(), lambda r: setattr(r.inputs[0], "datatype", "INT32")),
        INVALID,
        "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'INT32', but model 'identity_fp32' expects 'FP32'",
    ),
    case(
        "unknown datatype",
        lambda: _with(fp32_request(), lambda r: setattr(r.inputs[0], "datatype", "FOO")),
        INVALID,
        "[request id: <id_unknown>] inference input 'INPUT0' data-type is '<invalid>', but model 'identity_fp32' "
        "expects 'FP32'",
    ),
    case(
        "missing input",
        lambda: pb.ModelInferRequest(model_name="identity_fp32"),
        INVALID,
        "[request id: <id_unknown>] expected 1 inputs but got 0 inputs for model 'identity_fp32'. Got input(s) [], "
        "but missing required input(s) ['INPUT0']. Please provide all required input(s).",
    ),
    # deliberate difference: Triton prints the empty list as "]"
    case(
        "extra unknown input",
        lambda: _with(
            fp32_request(),
            lambda r: (
                r.inputs.add(name="BOGUS", datatype="FP32", shape=[1, 16]),
                r.raw_input_contents.append(bytes(64)),
            ),
        ),
        INVALID,
        "[request id: <id_unknown>] expected 1 inputs but got 2 inputs for model 'identity_fp32'. Got input(s) "
        "['BOGUS','INPUT0'], but missing required input(s) []. Please provide all required input(s).",
    ),
    case(
        "wrong input name",
        lambda: _with(fp32_request(), lambda r: setattr(r.inputs[0], "name", "BOGUS")),
        INVALID,
        "unexpected inference input 'BOGUS' for model 'identity_fp32'",
    ),
    case(
        "duplicate input",
        lambda: _with(
            fp32_request(),
            lambda r: (
                r.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16]),
                r.raw_input_contents.append(bytes(64)),
            ),
        ),
        INVALID,
        "[request id: <id_unknown>] input 'INPUT0' already exists in request",
    ),
    case(
        "unknown requested output",
        lambda: _with(fp32_request(), lambda r: r.outputs.add(name="BOGUS_OUT")),
        INVALID,
        "unexpected inference output 'BOGUS_OUT' for model 'identity_fp32'",
    ),
    case(
        "typed contents count != shape",
        lambda: _typed_fp32(15),
        INVALID,
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'identity_fp32'. "
        "Expected 64, got 60",
    ),
    case(
        "typed contents of the wrong kind",
        lambda: _typed_fp32(16, "int_contents"),
        INVALID,
        "unexpected explicit tensor data for input tensor 'INPUT0' for model 'identity_fp32' of type 'INT32', "
        "expected datatype 'FP32'",
    ),
    case(
        "two typed contents fields",
        lambda: _with(_typed_fp32(16), lambda r: r.inputs[0].contents.fp64_contents.extend([1.0])),
        INVALID,
        "unexpected explicit tensor data for input tensor 'INPUT0' for model 'identity_fp32', "
        "binary data was already supplied.",
    ),
    case(
        "raw size != shape",
        lambda: _with(fp32_request(), lambda r: r.raw_input_contents.__setitem__(0, bytes(60))),
        INVALID,
        "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'identity_fp32'. "
        "Expected 64, got 60",
    ),
    case(
        "no data at all",
        lambda: _with(fp32_request(), lambda r: r.ClearField("raw_input_contents")),
        INVALID,
        "unable to find data for input tensor 'INPUT0' for model 'identity_fp32' in request.",
    ),
    case(
        "fewer raw contents than inputs",
        _two_inputs_one_raw,
        INVALID,
        "unable to find data for input tensor 'INPUT1' for model 'classify_nobatch' in request.",
    ),
    case(
        "contents and raw_input_contents",
        lambda: _with(fp32_request(), lambda r: r.inputs[0].contents.fp32_contents.extend([0.0] * 16)),
        INVALID,
        "contents field must not be specified when using raw_input_contents for 'INPUT0' for model 'identity_fp32'",
    ),
    case(
        "BYTES length prefix beyond the buffer",
        lambda: _bytes_request([1], raw=struct.pack("<I", 100) + b"abc"),
        INVALID,
        "incomplete string data for inference input 'INPUT0', expecting string of length 100 but only 3 bytes available",
    ),
    case(
        "BYTES buffer shorter than a length prefix",
        lambda: _bytes_request([1], raw=b"\x01\x00"),
        INVALID,
        "[request id: <id_unknown>] incomplete string length indicator for inference input 'INPUT0' for model "
        "'identity_bytes', expecting 4 bytes but only 2 bytes available. Please make sure the string length "
        "indicator is in one buffer.",
    ),
    case(
        "BYTES 2 elements for shape [3]",
        lambda: _bytes_request([3], raw=struct.pack("<I", 1) + b"a" + struct.pack("<I", 0)),
        INVALID,
        "[request id: <id_unknown>] expected 3 string elements for inference input 'INPUT0' for model "
        "'identity_bytes', got 2",
    ),
    case(
        "BYTES contents 3 elements for shape [2]",
        lambda: _bytes_request([2], items=[b"a", b"b", b"c"]),
        INVALID,
        "[request id: <id_unknown>] unexpected number of string elements 3 for inference input 'INPUT0' for model "
        "'identity_bytes', expecting 2",
    ),
    case(
        "batch above max_batch_size",
        lambda: fp32_request(shape=(9, 16)),
        INVALID,
        "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'identity_fp32'",
    ),
    case(
        "batch dimension missing",
        lambda: fp32_request(shape=(16,)),
        INVALID,
        "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'identity_fp32'",
    ),
    case(
        "classification as string_param",
        lambda: _with(
            fp32_request(),
            lambda r: setattr(r.outputs.add(name="OUTPUT0").parameters["classification"], "string_param", "3"),
        ),
        INVALID,
        "invalid value type for 'classification' parameter, expected int64_param",
    ),
    case(
        "classification as bool_param",
        lambda: _with(
            fp32_request(),
            lambda r: setattr(r.outputs.add(name="OUTPUT0").parameters["classification"], "bool_param", True),
        ),
        INVALID,
        "invalid value type for 'classification' parameter, expected int64_param",
    ),
    case(
        "classification 0",
        lambda: _with(
            fp32_request(),
            lambda r: setattr(r.outputs.add(name="OUTPUT0").parameters["classification"], "int64_param", 0),
        ),
        INVALID,
        "invalid value for 'classification' parameter, expected >= 0",
    ),
    case(
        "classification of an unknown output",
        lambda: _with(
            fp32_request("classify", shape=(1, 5)),
            lambda r: setattr(r.outputs.add(name="NOPE").parameters["classification"], "int64_param", 1),
        ),
        INVALID,
        "unexpected inference output 'NOPE' for model 'classify'",
    ),
    case(
        "priority as string",
        lambda: _with(fp32_request(), lambda r: setattr(r.parameters["priority"], "string_param", "high")),
        INVALID,
        "invalid value type for 'priority' parameter, expected int64_param or uint64_param.",
    ),
    case(
        "reserved parameter key",
        lambda: _with(fp32_request(), lambda r: setattr(r.parameters["triton_foo"], "bool_param", True)),
        INVALID,
        "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting "
        "with 'triton_' are allowed: triton_enable_empty_final_response",
    ),
    case(
        "parameter without a value",
        lambda: _with(fp32_request(), lambda r: r.parameters["empty"].SetInParent()),
        INVALID,
        "invalid value type for 'empty' parameter, expected int64_param, bool_param, or string_param.",
    ),
    case(
        "input in an unregistered shared-memory region",
        lambda: _with(
            fp32_request(), lambda r: setattr(r.inputs[0].parameters["shared_memory_region"], "string_param", "shm0")
        ),
        grpc.StatusCode.NOT_FOUND,
        "Unable to find shared memory region: 'shm0'",
    ),
]


@pytest.mark.parametrize(("build", "code", "message"), BAD_REQUESTS)
def test_bad_request(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
    build: Callable[[], pb.ModelInferRequest],
    code: grpc.StatusCode,
    message: str,
) -> None:
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(build(), timeout=30)
    assert (info.value.code(), info.value.details()) == (code, message)
    assert_good_request_works(stub)


def test_bad_request_through_tritonclient(client: grpcclient.InferenceServerClient) -> None:
    tensor = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(FP32_16.reshape(1, 16))
    with pytest.raises(InferenceServerException) as info:
        client.infer("nope", [tensor])
    assert info.value.status() == "StatusCode.NOT_FOUND"
    assert info.value.message() == "Request for unknown model: 'nope' is not found"


@pytest.mark.parametrize("size", [100, 300_000])  # the small and the large (copy-free) parsing paths
def test_a_malformed_request_message_is_invalid_argument(server: ServerProcess, size: int) -> None:
    channel = grpc.insecure_channel(server.grpc_url)
    try:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        with pytest.raises(grpc.RpcError) as info:
            call(b"\x3a\xff\xff\xff\xff\x0f" + b"\x00" * size, timeout=30)  # a raw input claiming 4 GiB
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details().startswith("malformed ModelInferRequest")
    finally:
        channel.close()


def test_large_tensors_round_trip_on_the_copy_free_path(client: grpcclient.InferenceServerClient) -> None:
    array = np.random.default_rng(1).random(600_000).astype(np.float32)  # 2.4 MB each way
    tensor = grpcclient.InferInput("INPUT0", [array.size], "FP32")
    tensor.set_data_from_numpy(array)
    result = client.infer(model_name("FP32"), [tensor], request_id="big")
    assert np.array_equal(result.as_numpy("OUTPUT0"), array)
    assert result.get_response().id == "big"
