"""Native backends: ``libtriton_<name>.so`` built from C with the system compiler, served over HTTP and gRPC.

The examples (examples/native_backends) and the misbehaving test backends
(tests/integration/native_backends) are compiled here with the documented
one-line command; a test is skipped when the machine has no C compiler.
"""

from __future__ import annotations

import json
import queue
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
from tests.support.native import EXAMPLES, TEST_BACKENDS, build_backend, compiler
from tests.support.repo import add_model
from tests.support.server import ServerProcess

IDENTITY_CONFIG = """
backend: "c_identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "INPUT1" data_type: TYPE_STRING dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "OUTPUT1" data_type: TYPE_STRING dims: [ 2 ] } ]
"""
REPEAT_CONFIG = """
backend: "c_repeat"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] },
         { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] } ]
"""
ACCUMULATE_CONFIG = """
backend: "c_accumulate"
max_batch_size: 0
input [ { name: "INPUT" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "TOTAL" data_type: TYPE_INT64 dims: [ 1 ] } ]
"""
MISBEHAVE_CONFIG = """
backend: "%s"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
parameters { key: "execute_timeout_seconds" value: { string_value: "3" } }
"""
PROBE_CONFIG = """
backend: "probe"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 3 ] },
        { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
"""


COUNTDOWN_CONFIG = """
backend: "countdown"
max_batch_size: 0
%s
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "RUNS" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    compiler()
    root = tmp_path_factory.mktemp("native_backends")
    backends = root / "backends"
    # place 3: the backend directory
    build_backend(EXAMPLES / "identity" / "identity.c", backends / "c_identity" / "libtriton_c_identity.so")

    def build(repo: Path) -> None:
        add_model(repo, "identity", IDENTITY_CONFIG)
        # runtime: names another file in the same places
        add_model(repo, "renamed", IDENTITY_CONFIG + 'runtime: "my_identity.so"\n')
        build_backend(EXAMPLES / "identity" / "identity.c", repo / "renamed" / "my_identity.so")
        # place 2: the model's folder
        add_model(repo, "repeat", REPEAT_CONFIG)
        build_backend(EXAMPLES / "repeat" / "repeat.c", repo / "repeat" / "libtriton_c_repeat.so")
        # place 1: the version folder
        add_model(repo, "accumulate", ACCUMULATE_CONFIG)
        build_backend(EXAMPLES / "accumulate" / "accumulate.c", repo / "accumulate" / "1" / "libtriton_c_accumulate.so")
        add_model(repo, "probe", PROBE_CONFIG)
        add_model(
            repo,
            "probe_passive",
            PROBE_CONFIG
            + "instance_group [ { count: 1 kind: KIND_CPU }, { count: 2 kind: KIND_CPU passive: true } ]\n",
        )
        build_backend(TEST_BACKENDS / "probe.c", repo / "probe_passive" / "libtriton_probe.so")
        build_backend(TEST_BACKENDS / "probe.c", repo / "probe" / "libtriton_probe.so")
        # TRITONBACKEND_RequestRelease(RESCHEDULE): with and without iterative_sequence
        for name, scheduling in (
            ("countdown", "sequence_batching { iterative_sequence: true }"),
            ("countdown_plain", ""),
        ):
            add_model(repo, name, COUNTDOWN_CONFIG % scheduling)
            build_backend(TEST_BACKENDS / "countdown.c", repo / name / "libtriton_countdown.so")
        for name in ("misbehave", "noexec", "undefined", "initfail"):
            add_model(repo, name, MISBEHAVE_CONFIG % name)
            build_backend(TEST_BACKENDS / f"{name}.c", repo / name / f"libtriton_{name}.so")

    yield from module_server(
        root, build, [f"--backend-directory={backends}", "--exit-on-error=false", "--backend-config=probe,greeting=hi"]
    )


@pytest.fixture
def clients(server: ServerProcess) -> Iterator[dict[str, Any]]:
    """An HTTP and a gRPC client of the module's server (closed afterwards)."""
    made = {
        "http": httpclient.InferenceServerClient(server.http_url, network_timeout=120),
        "grpc": grpcclient.InferenceServerClient(server.grpc_url),
    }
    yield made
    for client in made.values():
        client.close()


def identity_inputs(module: Any, batch: int = 2) -> list[Any]:
    values = np.arange(batch * 4, dtype=np.float32).reshape(batch, 4) / 4
    words = np.array([[b"hello", b""], [b"\x00bin\xff", "µ".encode()]][:batch] * (batch // 2 or 1), dtype=np.object_)
    words = words[:batch]
    a = module.InferInput("INPUT0", [batch, 4], "FP32")
    a.set_data_from_numpy(values)
    b = module.InferInput("INPUT1", [batch, 2], "BYTES")
    b.set_data_from_numpy(words)
    return [a, b]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_c_identity_returns_its_inputs_exactly(clients: dict[str, Any], protocol: str) -> None:
    module = httpclient if protocol == "http" else grpcclient
    client = clients[protocol]
    result = client.infer("identity", identity_inputs(module))
    assert result.as_numpy("OUTPUT0").tolist() == [[0.0, 0.25, 0.5, 0.75], [1.0, 1.25, 1.5, 1.75]]
    assert result.as_numpy("OUTPUT1").tolist() == [[b"hello", b""], [b"\x00bin\xff", "µ".encode()]]
    # only the requested output comes back
    only = client.infer("identity", identity_inputs(module), outputs=[module.InferRequestedOutput("OUTPUT0")])
    assert only.as_numpy("OUTPUT1") is None
    assert only.as_numpy("OUTPUT0").shape == (2, 4)


def test_c_identity_config_and_metadata_are_the_models(clients: dict[str, Any]) -> None:
    client = clients["http"]
    assert client.get_model_config("identity")["backend"] == "c_identity"
    assert client.is_model_ready("identity")


def test_runtime_names_the_shared_library_to_load(clients: dict[str, Any]) -> None:
    assert clients["http"].get_model_config("renamed")["runtime"] == "my_identity.so"
    result = clients["http"].infer("renamed", identity_inputs(httpclient))
    assert result.as_numpy("OUTPUT0").tolist() == [[0.0, 0.25, 0.5, 0.75], [1.0, 1.25, 1.5, 1.75]]


def repeat_stream(client: Any, values: list[int]) -> list[tuple[list[int], list[int]]]:
    """Stream one request to ``repeat``; its (OUT, IDX) responses until the flags-only final one."""
    responses: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        tensor = grpcclient.InferInput("IN", [len(values)], "INT32")
        tensor.set_data_from_numpy(np.array(values, np.int32))
        client.async_stream_infer("repeat", [tensor], request_id="r1", enable_empty_final_response=True)
        got = []
        while True:
            result, error = responses.get(timeout=60)
            assert error is None
            if result.get_response().parameters["triton_final_response"].bool_param:
                assert result.as_numpy("OUT") is None
                return got
            got.append((result.as_numpy("OUT").tolist(), result.as_numpy("IDX").tolist()))
    finally:
        client.stop_stream()


def test_c_repeat_streams_one_response_per_element_over_grpc(clients: dict[str, Any]) -> None:
    assert repeat_stream(clients["grpc"], [7, -1, 42]) == [([7], [0]), ([-1], [1]), ([42], [2])]


def test_c_repeat_of_an_empty_tensor_sends_only_the_final_flag(clients: dict[str, Any]) -> None:
    assert repeat_stream(clients["grpc"], []) == []


def test_c_repeat_streams_several_requests_at_once_from_its_threads(clients: dict[str, Any]) -> None:
    responses: queue.Queue[Any] = queue.Queue()
    client = clients["grpc"]
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    sent = {"a": list(range(20)), "b": [10, 20], "c": [-5]}
    try:
        for request_id, values in sent.items():
            tensor = grpcclient.InferInput("IN", [len(values)], "INT32")
            tensor.set_data_from_numpy(np.array(values, np.int32))
            client.async_stream_infer("repeat", [tensor], request_id=request_id, enable_empty_final_response=True)
        got: dict[str, list[tuple[int, int]]] = {k: [] for k in sent}
        finals = 0
        while finals < len(sent):
            result, error = responses.get(timeout=60)
            assert error is None
            response = result.get_response()
            if response.parameters["triton_final_response"].bool_param:
                finals += 1
            else:
                got[response.id].append((int(result.as_numpy("OUT")[0]), int(result.as_numpy("IDX")[0])))
    finally:
        client.stop_stream()
    assert got == {k: [(v, i) for i, v in enumerate(values)] for k, values in sent.items()}


def test_c_repeat_over_unary_calls_gets_tritons_decoupled_errors(clients: dict[str, Any]) -> None:
    for protocol, module in (("http", httpclient), ("grpc", grpcclient)):
        tensor = module.InferInput("IN", [1], "INT32")
        tensor.set_data_from_numpy(np.array([1], np.int32))
        with pytest.raises(InferenceServerException) as info:
            clients[protocol].infer("repeat", [tensor])
        if protocol == "http":
            assert str(info.value) == "[501] HTTP end point doesn't support models with decoupled transaction policy"
        else:
            assert info.value.status() == "StatusCode.UNIMPLEMENTED"
            assert info.value.message() == "ModelInfer RPC doesn't support models with decoupled transaction policy"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_c_accumulate_keeps_state_per_instance(clients: dict[str, Any], protocol: str) -> None:
    module = httpclient if protocol == "http" else grpcclient
    client = clients[protocol]

    def add(values: list[int], start: bool = False) -> tuple[list[int], Any]:
        tensor = module.InferInput("INPUT", [len(values)], "INT64")
        tensor.set_data_from_numpy(np.array(values, np.int64))
        result = client.infer("accumulate", [tensor], sequence_id=5 if start else 0, sequence_start=start)
        return result.as_numpy("TOTAL").tolist(), result.get_response()

    assert add([0], start=True)[0] == [0]  # resets the total
    assert add([1, 2, 3])[0] == [6]
    total, response = add([10])
    assert total == [16]
    if protocol == "http":
        assert isinstance(response["parameters"]["requests"], int)
    else:
        assert response.parameters["requests"].int64_param >= 3


def test_an_error_returned_by_execute_has_tritons_shape(server: ServerProcess, clients: dict[str, Any]) -> None:
    for protocol, module in (("http", httpclient), ("grpc", grpcclient)):
        client = clients[protocol]
        tensor = module.InferInput("INPUT0", [1], "INT32")
        tensor.set_data_from_numpy(np.array([4], np.int32))
        with pytest.raises(InferenceServerException) as info:
            client.infer("misbehave", [tensor])
        if protocol == "http":
            assert str(info.value) == "[400] native says no"
        else:
            assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
            assert info.value.message() == "native says no"
    status, _, body = http_call(
        server,
        "POST",
        "/v2/models/misbehave/infer",
        json.dumps({"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "INT32", "data": [5]}]}).encode(),
    )
    assert (status, json.loads(body)) == (501, {"error": "not this one"})


def misbehave(client: Any, value: int) -> Any:
    tensor = httpclient.InferInput("INPUT0", [1], "INT32")
    tensor.set_data_from_numpy(np.array([value], np.int32))
    return client.infer("misbehave", [tensor])


def wait_ready(client: Any, model: str) -> None:
    deadline = time.monotonic() + 120
    while not client.is_model_ready(model) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.is_model_ready(model)


@pytest.mark.parametrize(
    "value, how",
    [
        (1, "was killed by signal SIGSEGV"),
        (2, "was killed by signal SIGABRT"),
        (3, "did not finish executing within the execute timeout of 3 s and was killed"),
    ],
)
def test_a_crashing_backend_takes_down_only_its_worker(clients: dict[str, Any], value: int, how: str) -> None:
    client = clients["http"]
    wait_ready(client, "misbehave")
    assert misbehave(client, 0).as_numpy("OUTPUT0").tolist() == [0]
    with pytest.raises(InferenceServerException) as info:
        misbehave(client, value)
    assert str(info.value) == f"[500] model instance 'misbehave_0': worker process {how}"
    # the other models keep serving while the instance restarts
    result = clients["grpc"].infer("identity", identity_inputs(grpcclient))
    assert result.as_numpy("OUTPUT0").tolist()[0] == [0.0, 0.25, 0.5, 0.75]
    assert client.is_server_live()
    wait_ready(client, "misbehave")
    assert misbehave(client, 0).as_numpy("OUTPUT0").tolist() == [0]


def test_libraries_that_cannot_serve_fail_their_load_with_tritons_messages(
    server: ServerProcess, clients: dict[str, Any]
) -> None:
    client = clients["http"]
    assert client.is_model_ready("identity")
    for name in ("noexec", "undefined", "initfail"):
        assert not client.is_model_ready(name)
    log = server.log()
    assert (
        "failed to load 'noexec' version 1: Not found: unable to find required entrypoint "
        "'TRITONBACKEND_ModelInstanceExecute' in shared library: "
    ) in log
    assert "failed to load 'undefined' version 1: Not found: unable to load shared library: " in log
    assert "libtriton_undefined.so: undefined symbol: TRITONBACKEND_NotAFunction" in log
    assert "failed to load 'initfail' version 1: Invalid argument: model initialize refused" in log


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_c_api_reports_the_model_request_and_server_exactly(
    server: ServerProcess, clients: dict[str, Any], protocol: str
) -> None:
    module = httpclient if protocol == "http" else grpcclient
    client = clients[protocol]
    config = client.get_model_config("probe")
    outputs = (
        config["output"]
        if protocol == "http"
        else [
            {"name": o.name, "data_type": grpcclient.model_config_pb2.DataType.Name(o.data_type), "dims": list(o.dims)}
            for o in config.config.output
        ]
    )
    assert [(o["name"], o["data_type"], [int(d) for d in o["dims"]]) for o in outputs] == [
        ("REPORT", "TYPE_STRING", [1])
    ]  # completed by the backend with TRITONBACKEND_ModelSetConfig
    numbers = module.InferInput("INPUT0", [3], "INT32")
    numbers.set_data_from_numpy(np.array([1, 2, 3], np.int32))
    text = module.InferInput("TEXT", [1], "BYTES")
    text.set_data_from_numpy(np.array([b"four"], np.object_))
    result = client.infer(
        "probe", [numbers, text], request_id="req-1", sequence_id=12, sequence_start=True, timeout=5000000
    )
    report = result.as_numpy("REPORT")[0].decode()
    assert report == (
        "backend_api=1.19 server_api=1.34 model=probe/1 repo=probe artifact=0 backend=probe greeting=hi "
        "types=FP32,BF16,<invalid>,8,0,3,0 memory=CPU_PINNED,GPU kinds=MODEL error=6/Already exists/dup "
        "gpu_alloc=Unsupported config_v2=Unsupported auto_complete=1 "
        "instance=probe_0 kind=CPU device=0 passive=0 cancelled=0 "
        "id=req-1 flags=1 corr=12 corr_str=- timeout_us=5000000 "
        "input=INPUT0:INT32:1:3:12:1 input=TEXT:BYTES:1:1:8:1 "
        "missing_input=unknown request input name NOPE requested=REPORT"
    )
    response = result.get_response()
    if protocol == "http":
        assert response["parameters"] == {"str": "text", "int": -7, "bool": True, "double": 0.5}
    else:
        params = response.parameters
        assert (
            params["str"].string_param,
            params["int"].int64_param,
            params["bool"].bool_param,
            params["double"].double_param,
        ) == ("text", -7, True, 0.5)
    assert "probe.c:42] probe answered" in server.log()  # TRITONSERVER_LogMessage


def test_a_string_correlation_id_is_only_available_as_a_string(clients: dict[str, Any]) -> None:
    numbers = httpclient.InferInput("INPUT0", [3], "INT32")
    numbers.set_data_from_numpy(np.array([1, 2, 3], np.int32))
    text = httpclient.InferInput("TEXT", [1], "BYTES")
    text.set_data_from_numpy(np.array([b""], np.object_))
    report = clients["http"].infer("probe", [numbers, text], sequence_id="seq-a", sequence_end=True)
    assert " id= flags=2 corr=0 corr_str=seq-a timeout_us=0 " in report.as_numpy("REPORT")[0].decode()


def test_a_native_backend_reschedules_an_iterative_request(clients: dict[str, Any]) -> None:
    """TRITONBACKEND_RequestRelease with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE runs it again."""
    inp = httpclient.InferInput("IN", [1], "INT32")
    inp.set_data_from_numpy(np.array([3], np.int32))
    assert clients["http"].infer("countdown", [inp]).as_numpy("RUNS").tolist() == [3]
    with pytest.raises(InferenceServerException) as info:  # no iterative_sequence: an error
        clients["http"].infer("countdown_plain", [inp])
    assert "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE" in info.value.message()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_passive_instances_get_no_requests(server: ServerProcess, clients: dict[str, Any], protocol: str) -> None:
    # instance_group.passive: the instances are initialized and told they are passive
    # (TRITONBACKEND_ModelInstanceIsPassive), and the scheduler never gives them a request
    log = server.log()
    assert "probe.c:43] probe instance probe_passive_0_0 passive=0" in log
    assert "probe.c:43] probe instance probe_passive_1_0 passive=1" in log
    assert "probe.c:43] probe instance probe_passive_1_1 passive=1" in log
    module = httpclient if protocol == "http" else grpcclient
    seen = set()
    for _ in range(6):
        numbers = module.InferInput("INPUT0", [3], "INT32")
        numbers.set_data_from_numpy(np.array([1, 2, 3], np.int32))
        text = module.InferInput("TEXT", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"x"], np.object_))
        report = clients[protocol].infer("probe_passive", [numbers, text]).as_numpy("REPORT")[0].decode()
        seen.add(report.split("instance=")[1].split(" cancelled=")[0])
    assert seen == {"probe_passive_0_0 kind=CPU device=0 passive=0"}
