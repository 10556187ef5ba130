"""Triton's trace extension, black-box: settings over HTTP and gRPC, trace files, OTLP export.

Like Triton's qa/L0_trace: settings answered as Triton answers them (checked against
Triton 2.51), per-model overrides that fall back to the global settings when cleared,
trace files parsed and their timestamps in order, and spans received by a real OTLP/HTTP
receiver on loopback that decodes them with opentelemetry-proto.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.clients import http_call
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(300)

ORDER = [
    "REQUEST_START",
    "QUEUE_START",
    "COMPUTE_START",
    "COMPUTE_INPUT_END",
    "COMPUTE_OUTPUT_START",
    "COMPUTE_END",
    "REQUEST_END",
]


def _repo(root: Path) -> Path:
    repo = root / "models"
    for name in ("ident", "other"):
        add_model(repo, name, identity_config(dims="[ 4 ]", max_batch_size=0))
    return repo


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    root = tmp_path_factory.mktemp("trace")
    trace_file = root / "trace.json"
    args = [
        f"--trace-config=triton,file={trace_file}",
        "--trace-config=level=TIMESTAMPS",
        "--trace-config=rate=1",
        "--trace-config=log_frequency=1",
    ]
    with ServerProcess([_repo(root)], args, log_path=root / "server.log") as proc:
        yield proc, trace_file


def _post(server: ServerProcess, path: str, body: Any) -> tuple[int, Any]:
    status, _, data = http_call(
        server, "POST", path, json.dumps(body).encode() if not isinstance(body, bytes) else body
    )
    return status, json.loads(data)


def _get(server: ServerProcess, path: str) -> tuple[int, Any]:
    status, _, data = http_call(server, "GET", path)
    return status, json.loads(data)


def _infer_http(
    server: ServerProcess, model: str = "ident", request_id: str = "", headers: dict[str, str] | None = None
) -> None:
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}
    if request_id:
        body["id"] = request_id
    status, _, data = http_call(server, "POST", f"/v2/models/{model}/infer", json.dumps(body).encode(), headers)
    assert status == 200, data


def _wait_files(trace_file: Path, before: set[Path], count: int) -> list[Path]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        new = sorted(set(trace_file.parent.glob(trace_file.name + ".*")) - before)
        if len(new) >= count:
            return new
        time.sleep(0.05)
    raise AssertionError(f"no new trace file after {trace_file}")


def _traces(path: Path) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for record in json.loads(path.read_text()):
        entry = out.setdefault(record["id"], {"stamps": {}, "tensors": []})
        if "timestamps" in record:
            for stamp in record["timestamps"]:
                entry["stamps"][stamp["name"]] = stamp["ns"]
        elif "activity" in record:
            entry["tensors"].append(record)
        else:
            entry["info"] = record
    return out


def _reset(server: ServerProcess) -> None:
    for model in ("ident", "other"):
        _post(
            server,
            f"/v2/models/{model}/trace/setting",
            {"trace_level": None, "trace_rate": None, "trace_count": None, "log_frequency": None},
        )
    _post(
        server,
        "/v2/trace/setting",
        {"trace_level": None, "trace_rate": None, "trace_count": None, "log_frequency": None},
    )


def test_global_settings_as_triton(traced: tuple[ServerProcess, Path]) -> None:
    server, trace_file = traced
    assert _get(server, "/v2/trace/setting") == (
        200,
        {
            "trace_level": ["TIMESTAMPS"],
            "trace_rate": "1",
            "trace_count": "-1",
            "log_frequency": "1",
            "trace_file": str(trace_file),
            "trace_mode": "triton",
        },
    )


def test_http_trace_file_timestamps_in_order(traced: tuple[ServerProcess, Path]) -> None:
    server, trace_file = traced
    before = set(trace_file.parent.glob(trace_file.name + ".*"))
    _infer_http(server, request_id="req-7")
    (path,) = _wait_files(trace_file, before, 1)
    assert not trace_file.exists()  # log_frequency > 0: only the numbered files, as Triton 2.51
    (trace,) = _traces(path).values()
    assert trace["info"]["model_name"] == "ident"
    assert trace["info"]["model_version"] == 1
    assert trace["info"]["request_id"] == "req-7"
    stamps = trace["stamps"]
    assert set(stamps) == {
        "HTTP_RECV_START",
        "HTTP_RECV_END",
        "HTTP_SEND_START",
        "HTTP_SEND_END",
        "INFER_RESPONSE_COMPLETE",
        *ORDER,
    }
    values = [stamps[name] for name in ["HTTP_RECV_START", "HTTP_RECV_END", *ORDER, "HTTP_SEND_START", "HTTP_SEND_END"]]
    assert values == sorted(values)
    assert stamps["COMPUTE_END"] <= stamps["INFER_RESPONSE_COMPLETE"] <= stamps["REQUEST_END"]


def test_grpc_trace_and_settings(traced: tuple[ServerProcess, Path]) -> None:
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    server, trace_file = traced
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        settings = client.get_trace_settings(as_json=True)["settings"]
        assert settings["trace_level"]["value"] == ["TIMESTAMPS"]
        assert settings["trace_rate"]["value"] == ["1"]
        before = set(trace_file.parent.glob(trace_file.name + ".*"))
        inp = grpcclient.InferInput("INPUT0", [4], "FP32")
        inp.set_data_from_numpy(np.arange(4, dtype=np.float32))
        client.infer("ident", [inp])
        (path,) = _wait_files(trace_file, before, 1)
        (trace,) = _traces(path).values()
        stamps = trace["stamps"]
        assert "GRPC_RECV_START" in stamps and "GRPC_SEND_END" in stamps and "HTTP_RECV_START" not in stamps
        values = [stamps[n] for n in ["GRPC_RECV_START", "GRPC_RECV_END", *ORDER, "GRPC_SEND_START", "GRPC_SEND_END"]]
        assert values == sorted(values)
        answer = client.update_trace_settings("other", {"trace_rate": "5"}, as_json=True)["settings"]
        assert answer["trace_rate"]["value"] == ["5"]
        assert client.get_trace_settings("ident", as_json=True)["settings"]["trace_rate"]["value"] == ["1"]
        answer = client.update_trace_settings("other", {"trace_rate": None}, as_json=True)["settings"]
        assert answer["trace_rate"]["value"] == ["1"]
        with pytest.raises(InferenceServerException, match="sample rate must be non-zero") as info:
            client.update_trace_settings(settings={"trace_rate": "0"})
        assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
        with pytest.raises(InferenceServerException, match="trace file location can not be updated") as info:
            client.update_trace_settings(settings={"trace_file": "/tmp/x"})
        assert info.value.status() == "StatusCode.UNIMPLEMENTED"
        # as Triton 2.51 (probed): INVALID_ARGUMENT, for reading and for updating
        with pytest.raises(InferenceServerException, match="Request for unknown model : nosuch") as info:
            client.get_trace_settings("nosuch")
        assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
        with pytest.raises(InferenceServerException, match="Request for unknown model : nosuch") as info:
            client.update_trace_settings("nosuch", {"trace_rate": "5"})
        assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
    finally:
        client.close()
        _reset(server)


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"trace_rate": "0"}, 400, "Attempting to set invalid trace setting :sample rate must be non-zero"),
        ({"trace_rate": "abc"}, 400, "Unable to parse 'trace_rate', got: abc"),
        ({"trace_count": "-5"}, 400, "Unable to parse 'trace_count'. Expecting value >= -1, got:-5"),
        ({"trace_count": "x"}, 400, "Unable to parse 'trace_count', got: x"),
        ({"log_frequency": "-1"}, 400, "Unable to parse 'log_frequency', got: -1"),
        (
            {"trace_level": ["BAD"]},
            400,
            "Attempting to set invalid trace setting :unknown trace level 'BAD' (expected OFF, TIMESTAMPS, TENSORS)",
        ),
        ({"trace_level": "TIMESTAMPS"}, 400, "expected an array of strings for 'trace_level'"),
        ({"trace_rate": 5}, 400, "expected a string for 'trace_rate', got: 5"),
        ({"trace_file": "/tmp/elsewhere.json"}, 501, "trace file location can not be updated through network protocol"),
        ({"trace_mode": "opentelemetry"}, 501, "trace mode can not be updated through network protocol"),
        (b"not json", 400, None),
    ],
)
def test_bad_settings(traced: tuple[ServerProcess, Path], body: Any, status: int, message: str | None) -> None:
    server, _ = traced
    before = _get(server, "/v2/trace/setting")
    for path in ("/v2/trace/setting", "/v2/models/ident/trace/setting"):
        got_status, got = _post(server, path, body)
        assert got_status == status
        if message is not None:
            assert got == {"error": message}
    assert _get(server, "/v2/trace/setting") == before  # nothing changed


def test_model_override_and_clear(traced: tuple[ServerProcess, Path]) -> None:
    server, _ = traced
    try:
        status, answer = _post(
            server, "/v2/models/ident/trace/setting", {"trace_rate": "3", "trace_level": ["TIMESTAMPS", "TENSORS"]}
        )
        assert status == 200
        assert answer["trace_rate"] == "3" and answer["trace_level"] == ["TIMESTAMPS", "TENSORS"]
        assert _get(server, "/v2/models/ident/versions/1/trace/setting")[1] == answer
        assert _get(server, "/v2/models/other/trace/setting")[1]["trace_rate"] == "1"
        assert _get(server, "/v2/trace/setting")[1]["trace_rate"] == "1"
        _post(server, "/v2/trace/setting", {"log_frequency": "7"})  # a global change reaches the model ...
        assert _get(server, "/v2/models/ident/trace/setting")[1]["log_frequency"] == "7"
        status, answer = _post(server, "/v2/models/ident/trace/setting", {"trace_rate": None})  # ... and clearing
        assert answer["trace_rate"] == "1" and answer["trace_level"] == ["TIMESTAMPS", "TENSORS"]
        status, answer = _post(server, "/v2/models/ident/trace/setting", {"trace_level": None})
        assert answer == _get(server, "/v2/trace/setting")[1]
        # as Triton 2.51 (probed): 400 with its words, for reading and for updating
        assert _post(server, "/v2/models/nosuch/trace/setting", {"trace_rate": "2"}) == (
            400,
            {"error": "Request for unknown model : nosuch"},
        )
        assert _get(server, "/v2/models/nosuch/trace/setting") == (400, {"error": "Request for unknown model : nosuch"})
    finally:
        _reset(server)


def test_trace_count_rate_and_tensors(traced: tuple[ServerProcess, Path]) -> None:
    server, trace_file = traced
    try:
        _post(server, "/v2/trace/setting", {"trace_level": ["OFF"]})
        _post(
            server,
            "/v2/models/other/trace/setting",
            {"trace_level": ["TENSORS"], "trace_count": "2", "trace_rate": "2"},
        )
        before = set(trace_file.parent.glob(trace_file.name + ".*"))
        for _ in range(6):  # rate 2: requests 1, 3 and 5 are sampled; count 2: only 1 and 3 traced
            _infer_http(server, "other")
        _infer_http(server, "ident")  # level OFF globally: not traced
        paths = _wait_files(trace_file, before, 2)
        assert len(paths) == 2
        assert _get(server, "/v2/models/other/trace/setting")[1]["trace_count"] == "0"
        for path in paths:
            (trace,) = _traces(path).values()
            assert trace["info"]["model_name"] == "other"
            tensors = {t["activity"]: t["tensor"] for t in trace["tensors"]}
            assert tensors["TENSOR_QUEUE_INPUT"] == {
                "name": "INPUT0",
                "data": "1.0,2.0,3.0,4.0",
                "shape": "4",
                "dtype": "FP32",
            }
            assert tensors["TENSOR_BACKEND_OUTPUT"] == {
                "name": "OUTPUT0",
                "data": "1.0,2.0,3.0,4.0",
                "shape": "4",
                "dtype": "FP32",
            }
            assert not trace["stamps"]  # TENSORS only: no timestamps
        assert set(trace_file.parent.glob(trace_file.name + ".*")) - before == set(paths)
    finally:
        _reset(server)


def test_tracing_off_by_default(tmp_path: Path) -> None:
    with ServerProcess(
        [_repo(tmp_path)], ["--allow-grpc=false", "--allow-metrics=false"], log_path=tmp_path / "s.log"
    ) as proc:
        assert _get(proc, "/v2/trace/setting")[1] == {
            "trace_level": ["OFF"],
            "trace_rate": "1000",
            "trace_count": "-1",
            "log_frequency": "0",
            "trace_file": "",
            "trace_mode": "triton",
        }
        _infer_http(proc)
        for path in ("/v2/trace/setting", "/v2/models/ident/trace/setting"):  # Triton: no file, no tracing
            assert _post(proc, path, {"trace_level": ["TIMESTAMPS"]}) == (
                400,
                {"error": "Attempting to set invalid trace setting :trace file name is not given"},
            )
        assert _post(proc, "/v2/trace/setting", {"trace_rate": "5"})[1]["trace_rate"] == "5"


# -- OpenTelemetry -----------------------------------------------------------------------------


class _Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP receiver: decodes every ExportTraceServiceRequest it gets."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ReceiverHandler)
        self.spans: list[Any] = []
        self.resources: list[dict[str, str]] = []
        self.got = threading.Condition()


class _ReceiverHandler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:  # noqa: N802
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
        with self.server.got:
            for resource_spans in request.resource_spans:
                attrs = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        self.server.spans.append(span)
                        self.server.resources.append(attrs)
            self.server.got.notify_all()
        answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


def test_opentelemetry_spans_with_client_traceparent(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    pytest.importorskip("opentelemetry.proto")
    receiver = _Receiver()
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{receiver.server_address[1]}/v1/traces"
    args = [
        "--trace-config=mode=opentelemetry",
        "--trace-config=level=TIMESTAMPS",
        "--trace-config=rate=1",
        f"--trace-config=opentelemetry,url={url}",
        "--trace-config=opentelemetry,resource=test.run=otlp",
        "--trace-config=opentelemetry,bsp_schedule_delay=50",
        "--allow-grpc=false",
        "--allow-metrics=false",
    ]
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    try:
        with ServerProcess([_repo(tmp_path)], args, log_path=tmp_path / "s.log") as proc:
            assert _get(proc, "/v2/trace/setting")[1]["trace_mode"] == "opentelemetry"
            _infer_http(proc, request_id="otel-1", headers={"traceparent": f"00-{trace_id}-{parent_id}-01"})
            with receiver.got:
                receiver.got.wait_for(lambda: len(receiver.spans) >= 3, timeout=60)
        spans = {span.name: span for span in receiver.spans}
        assert set(spans) == {"InferRequest", "ident", "compute"}
        root, model, compute = spans["InferRequest"], spans["ident"], spans["compute"]
        for span in spans.values():
            assert span.trace_id.hex() == trace_id  # the client's trace
        assert root.parent_span_id.hex() == parent_id
        assert model.parent_span_id == root.span_id and compute.parent_span_id == model.span_id
        assert [e.name for e in root.events] == ["HTTP_RECV_START", "HTTP_RECV_END", "HTTP_SEND_START", "HTTP_SEND_END"]
        assert [e.name for e in model.events] == [
            "REQUEST_START",
            "QUEUE_START",
            "INFER_RESPONSE_COMPLETE",
            "REQUEST_END",
        ]
        assert [e.name for e in compute.events] == [
            "COMPUTE_START",
            "COMPUTE_INPUT_END",
            "COMPUTE_OUTPUT_START",
            "COMPUTE_END",
        ]
        assert root.start_time_unix_nano <= model.start_time_unix_nano <= compute.start_time_unix_nano
        assert compute.end_time_unix_nano <= model.end_time_unix_nano <= root.end_time_unix_nano
        attrs = {kv.key: kv.value for kv in model.attributes}
        assert attrs["triton.model_name"].string_value == "ident" and attrs["triton.model_version"].int_value == 1
        assert receiver.resources[0]["test.run"] == "otlp"
        assert abs(root.start_time_unix_nano - time.time_ns()) < 600 * 10**9  # Unix time, not the monotonic clock
    finally:
        receiver.shutdown()
        receiver.server_close()


def test_bad_trace_config_flags(tmp_path: Path) -> None:
    for flag, message in [
        ("--trace-config=level=LOUD", "unknown trace level 'LOUD'"),
        ("--trace-config=rate=0", "sample rate must be non-zero"),
        ("--trace-config=nonsense", "--trace-config option format"),
    ]:
        proc = ServerProcess([tmp_path], [flag], log_path=tmp_path / "bad.log")
        proc.start(wait_ready=False)
        try:
            assert proc.wait_exit() == 2
        finally:
            proc.stop()
        assert message in proc.log()


def test_log_frequency_zero_writes_the_trace_file_at_shutdown(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.json"
    args = [
        f"--trace-config=triton,file={trace_file}",
        "--trace-config=level=TIMESTAMPS",
        "--trace-config=rate=1",
        "--allow-grpc=false",
        "--allow-metrics=false",
    ]
    with ServerProcess([_repo(tmp_path)], args, log_path=tmp_path / "s.log") as proc:
        assert not trace_file.exists()  # as Triton 2.51: written at shutdown, not made at start
        _infer_http(proc, request_id="a")
        _infer_http(proc, "other", request_id="b")
    traces = _traces(trace_file)
    assert sorted(t["info"]["request_id"] for t in traces.values()) == ["a", "b"]
    assert sorted(traces) == [1, 2]
    assert not list(tmp_path.glob("trace.json.*"))


def test_log_frequency_writes_only_numbered_files(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.json"
    # Triton's own spelling of the setting (its docs: ``triton,log-frequency=<n>``)
    args = [
        f"--trace-config=triton,file={trace_file}",
        "--trace-config=level=TIMESTAMPS",
        "--trace-config=rate=1",
        "--trace-config=triton,log-frequency=2",
        "--allow-grpc=false",
        "--allow-metrics=false",
    ]
    with ServerProcess([_repo(tmp_path)], args, log_path=tmp_path / "s.log") as proc:
        assert _get(proc, "/v2/trace/setting")[1]["log_frequency"] == "2"
        for request_id in ("a", "b", "c"):
            _infer_http(proc, request_id=request_id)
        _wait_files(trace_file, set(), 1)
    # as Triton 2.51: every 2 traces a new numbered file, the rest at shutdown; never <file> itself
    assert sorted(p.name for p in tmp_path.glob("trace.json*")) == ["trace.json.0", "trace.json.1"]
    assert sorted(t["info"]["request_id"] for t in _traces(tmp_path / "trace.json.0").values()) == ["a", "b"]
    assert [t["info"]["request_id"] for t in _traces(tmp_path / "trace.json.1").values()] == ["c"]
