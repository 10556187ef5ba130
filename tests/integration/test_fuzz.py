"""L0_http_fuzz: property-based fuzzing of the HTTP and gRPC endpoints with hypothesis.

Generated inference bodies (JSON made of the protocol's own keys and of
anything else), binary-extension headers, repository and shared-memory bodies,
and gRPC messages (well-formed ``ModelInferRequest`` messages with odd
contents, and raw bytes) go to one server. The invariant, for every input:
no 5xx (gRPC: never UNKNOWN or INTERNAL) for client input, an error is a JSON
``{"error": ...}`` body; and after all of it the server is alive and serving,
with no traceback in its log and its memory bounded. Examples are
derandomized (the same inputs on every run) and bounded so that the module
takes well under two minutes.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.support.clients import module_server  # noqa: E402
from tests.support.repo import add_model, identity_config  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

LIMIT = 1 << 20

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "echo", identity_config("TYPE_UINT8", "[ -1 ]", max_batch_size=0))
        add_model(repo, "strings", identity_config("TYPE_STRING", "[ -1 ]", max_batch_size=0))
        add_model(repo, "f32", identity_config("TYPE_FP32", "[ 4 ]"))

    args = [f"--max-request-bytes={LIMIT}", "--model-control-mode=explicit", "--load-model=*"]
    yield from module_server(tmp_path_factory.mktemp("fuzz"), build, args)


@pytest.fixture(scope="module")
def conn(server: ServerProcess) -> Iterator[Any]:
    holder = {"conn": http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)}
    yield holder
    holder["conn"].close()


def request(server: ServerProcess, holder: dict[str, Any], path: str, body: bytes, headers: dict[str, str]) -> None:
    """POST ``body``; assert the invariant on the answer (reconnects when the server closed the connection)."""
    for attempt in range(2):
        conn = holder["conn"]
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            break
        except (http.client.HTTPException, ConnectionError):
            conn.close()
            holder["conn"] = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
            if attempt:
                raise
    assert response.status < 500, (path, body[:300], headers, response.status, data[:300])
    if response.status >= 400 and data:
        assert set(json.loads(data)) == {"error"}, data[:300]
    if response.getheader("connection", "").lower() == "close":
        conn.close()
        holder["conn"] = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)


# -- strategies ---------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)
DATATYPES = ["BOOL", "UINT8", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16", "NOPE", ""]
KEYS = [
    "binary_data_size",
    "binary_data",
    "shared_memory_region",
    "shared_memory_offset",
    "shared_memory_byte_size",
    "classification",
    "binary_data_output",
    "sequence_id",
    "priority",
    "timeout",
    "triton_x",
    "x",
]
parameters = st.dictionaries(st.sampled_from(KEYS), st.one_of(scalars, json_values), max_size=4)
shapes = st.one_of(st.lists(st.integers(min_value=-2, max_value=70), max_size=3), json_values)
tensor = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.sampled_from(["INPUT0", "OUTPUT0"]), scalars),
        "datatype": st.one_of(st.sampled_from(DATATYPES), scalars),
        "shape": shapes,
        "data": st.one_of(
            st.lists(st.one_of(st.integers(-300, 300), st.floats(), st.text(max_size=4), st.booleans()), max_size=70),
            json_values,
        ),
        "parameters": st.one_of(parameters, json_values),
    },
)
infer_documents = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "id": st.one_of(st.text(max_size=10), scalars),
            "inputs": st.one_of(st.lists(tensor, max_size=3), json_values),
            "outputs": st.one_of(st.lists(tensor, max_size=2), json_values),
            "parameters": st.one_of(parameters, json_values),
        },
    ),
    json_values,
)


def as_json(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


# -- HTTP ----------------------------------------------------------------------------------------


@FUZZ
@given(doc=infer_documents, model=st.sampled_from(["echo", "strings", "f32", "missing"]))
def test_fuzz_http_infer_json(server: ServerProcess, conn: dict[str, Any], doc: Any, model: str) -> None:
    request(server, conn, f"/v2/models/{model}/infer", as_json(doc), {})


@FUZZ
@given(
    doc=infer_documents,
    binary=st.binary(max_size=300),
    header=st.one_of(
        st.none(),
        st.integers(-5, 400).map(str),
        st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
    ),
    encoding=st.sampled_from([None, "gzip", "deflate", "identity", "br", ""]),
)
def test_fuzz_http_binary_extension(
    server: ServerProcess, conn: dict[str, Any], doc: Any, binary: bytes, header: str | None, encoding: str | None
) -> None:
    head = as_json(doc)
    headers = {"Inference-Header-Content-Length": str(len(head)) if header is None else header}
    if encoding is not None:
        headers["Content-Encoding"] = encoding
    request(server, conn, "/v2/models/echo/infer", head + binary, headers)


@FUZZ
@given(
    path=st.sampled_from(
        [
            "/v2/repository/index",
            "/v2/repository/models/echo/unload",
            "/v2/repository/models/nothere/unload",
            "/v2/systemsharedmemory/region/fuzz/register",
            "/v2/systemsharedmemory/region/fuzz/unregister",
            "/v2/systemsharedmemory/unregister",
            "/v2/cudasharedmemory/region/fuzz/register",
            "/v2/systemsharedmemory/status",
            "/v2/models/echo/ready",
        ]
    ),
    doc=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {},
            optional={
                "ready": scalars,
                "parameters": st.one_of(json_values, st.dictionaries(st.text(max_size=10), scalars)),
                "key": st.one_of(st.text(max_size=12), scalars),
                "offset": scalars,
                "byte_size": scalars,
                "raw_handle": json_values,
                "device_id": scalars,
            },
        ),
    ),
    raw=st.one_of(st.none(), st.binary(max_size=64)),
)
def test_fuzz_http_repository_and_shared_memory_bodies(
    server: ServerProcess, conn: dict[str, Any], path: str, doc: Any, raw: bytes | None
) -> None:
    request(server, conn, path, raw if raw is not None else as_json(doc), {})


# -- gRPC ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def channel(server: ServerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.grpc_url) as ch:
        yield ch


METHODS = [
    "ModelInfer",
    "ModelMetadata",
    "ModelConfig",
    "ModelReady",
    "ModelStatistics",
    "RepositoryIndex",
    "RepositoryModelUnload",
    "SystemSharedMemoryRegister",
    "SystemSharedMemoryStatus",
    "CudaSharedMemoryRegister",
    "ServerMetadata",
]


def grpc_call(channel: grpc.Channel, method: str, payload: bytes) -> None:
    call = channel.unary_unary(f"/inference.GRPCInferenceService/{method}")
    try:
        call(payload, timeout=60)
    except grpc.RpcError as exc:
        assert exc.code() not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), (
            method,
            payload[:200],
            exc.code(),
            exc.details(),
        )


@FUZZ
@given(method=st.sampled_from(METHODS), payload=st.binary(max_size=200))
def test_fuzz_grpc_raw_bytes(channel: grpc.Channel, method: str, payload: bytes) -> None:
    grpc_call(channel, method, payload)


@FUZZ
@given(
    model=st.sampled_from(["echo", "strings", "f32", "missing", ""]),
    inputs=st.lists(
        st.tuples(
            st.sampled_from(["INPUT0", "X", ""]),
            st.sampled_from(DATATYPES),
            st.lists(st.integers(-3, 40), max_size=3),
            st.binary(max_size=64),
        ),
        max_size=3,
    ),
    raw=st.booleans(),
    params=st.dictionaries(
        st.sampled_from(KEYS), st.one_of(st.integers(-5, 2**63 - 1), st.booleans(), st.text(max_size=5)), max_size=3
    ),
    outputs=st.lists(st.sampled_from(["OUTPUT0", "nope", ""]), max_size=2),
)
def test_fuzz_grpc_infer_messages(
    channel: grpc.Channel, model: str, inputs: list[Any], raw: bool, params: dict[str, Any], outputs: list[str]
) -> None:
    from tritium.proto import grpc_service_pb2 as pb

    message = pb.ModelInferRequest(model_name=model)
    for key, value in params.items():
        field = "bool_param" if isinstance(value, bool) else "int64_param" if isinstance(value, int) else "string_param"
        setattr(message.parameters[key], field, value)
    for name, datatype, shape, data in inputs:
        tensor = message.inputs.add(name=name, datatype=datatype, shape=shape)
        if raw:
            message.raw_input_contents.append(data)
        else:
            tensor.contents.bytes_contents.append(data)
            tensor.contents.int_contents.extend(list(data[:8]))
    for name in outputs:
        message.outputs.add(name=name)
    grpc_call(channel, "ModelInfer", message.SerializeToString())


# -- afterwards ------------------------------------------------------------------------------------


def test_the_server_survived_the_fuzzing(server: ServerProcess) -> None:
    import numpy as np
    import tritonclient.http as httpclient

    assert server.proc is not None and server.proc.poll() is None
    client = httpclient.InferenceServerClient(server.http_url)
    client.load_model("echo")  # the fuzzing may have unloaded it
    tensor = httpclient.InferInput("INPUT0", [3], "UINT8")
    tensor.set_data_from_numpy(np.array([1, 2, 3], np.uint8))
    assert client.infer("echo", [tensor]).as_numpy("OUTPUT0").tolist() == [1, 2, 3]
    log = server.log()
    assert "Traceback" not in log, log[-3000:]
    rss = next(
        line for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines() if line.startswith("VmHWM")
    )
    assert int(rss.split()[1]) < 1 << 20, rss  # peak under 1 GiB (kB)
