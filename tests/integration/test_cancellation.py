"""Request cancellation reaches the model: ``is_cancelled()`` of pb_utils and of the C API.

Each model writes what it saw to a file named by the request (its side channel): ``<tag>.started``
once it runs, ``<tag>`` with what ``is_cancelled()`` answered when it stopped looking. A client
cancels (a gRPC stream, a unary gRPC call, a gRPC deadline, an HTTP connection closed) only
after ``<tag>.started`` exists, so the model is running when it happens. Checked against Triton
2.51 with the same python models: it reports the three gRPC cases to the model (request and
response sender alike) and not the HTTP one, which tritium does; a request cancelled while
handed to a busy instance runs with ``is_cancelled()`` true in both.
"""

from __future__ import annotations

import json
import queue
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import module_server
from tests.support.native import TEST_BACKENDS, build_backend, compiler
from tests.support.repo import add_model
from tests.support.server import ServerProcess, transport_plugins

#: seconds a model looks for its cancellation before it gives up (never reached when it works)
LOOK_S = 60
#: seconds a test waits for the model's report
WAIT_S = 90

PROBE = f"""
import json, os, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        self.out = params["out_dir"]["string_value"]

    def note(self, name, value):
        path = os.path.join(self.out, name)
        with open(path + ".tmp", "w") as f:
            json.dump(value, f)
        os.rename(path + ".tmp", path)

    def execute(self, requests):
        responses = []
        for request in requests:
            tags = pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy().reshape(-1)
            tag = tags[0].decode()
            self.note(tag + ".started", True)
            seen = False
            end = time.monotonic() + {LOOK_S}
            while time.monotonic() < end and not os.path.exists(os.path.join(self.out, tag + ".release")):
                if request.is_cancelled():
                    seen = True
                    break
                time.sleep(0.01)
            self.note(tag, {{"request": seen}})
            out = np.array([int(seen)], np.int32).reshape(tags.shape)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        return responses
"""

DECOUPLED = f"""
import json, os, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        self.out = params["out_dir"]["string_value"]

    def note(self, name, value):
        path = os.path.join(self.out, name)
        with open(path + ".tmp", "w") as f:
            json.dump(value, f)
        os.rename(path + ".tmp", path)

    def execute(self, requests):
        for request in requests:
            tag = pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy()[0].decode()
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([0], np.int32))]))
            self.note(tag + ".started", True)
            seen = {{"request": False, "sender": False}}
            end = time.monotonic() + {LOOK_S}
            while time.monotonic() < end:
                if request.is_cancelled() or sender.is_cancelled():
                    time.sleep(0.05)  # both are set at once: read both again
                    seen = {{"request": request.is_cancelled(), "sender": sender.is_cancelled()}}
                    break
                time.sleep(0.01)
            self.note(tag, seen)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

THREADED = f"""
import json, os, threading, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        self.out = params["out_dir"]["string_value"]

    def note(self, name, value):
        path = os.path.join(self.out, name)
        with open(path + ".tmp", "w") as f:
            json.dump(value, f)
        os.rename(path + ".tmp", path)

    def execute(self, requests):
        for request in requests:
            tag = pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy()[0].decode()
            threading.Thread(target=self.stream, args=(request, tag)).start()
        return None  # the responses come from the thread, after execute returned

    def stream(self, request, tag):
        sender = request.get_response_sender()
        sent = 0
        end = time.monotonic() + {LOOK_S}
        while time.monotonic() < end and not sender.is_cancelled():
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([sent], np.int32))]))
            sent += 1
            if sent == 1:
                self.note(tag + ".started", True)
            time.sleep(0.01)
        self.note(tag, {{"request": request.is_cancelled(), "sender": sender.is_cancelled()}})
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""


def _config(name: str, backend: str, out: Path, extra: str = "", batch: int = 0) -> str:
    return f"""
        name: "{name}"
        backend: "{backend}"
        max_batch_size: {batch}
        input [ {{ name: "TAG" data_type: TYPE_STRING dims: [ 1 ] }} ]
        output [ {{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
        instance_group [ {{ kind: KIND_CPU count: 1 }} ]
        parameters {{ key: "out_dir" value: {{ string_value: "{out}" }} }}
        {extra}
    """


@pytest.fixture(scope="module", params=["native", "aio"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp(f"cancel_{request.param}")
    out = root / "seen"
    out.mkdir()
    native = _have_compiler()

    def build(repo: Path) -> None:
        add_model(repo, "probe", _config("probe", "python", out), files={"1/model.py": PROBE})
        add_model(
            repo,
            "probe_batched",
            _config("probe_batched", "python", out, "dynamic_batching { }", batch=2),
            files={"1/model.py": PROBE},
        )
        add_model(
            repo,
            "probe_sequence",
            _config("probe_sequence", "python", out, "sequence_batching { }", batch=1),
            files={"1/model.py": PROBE},
        )
        add_model(
            repo,
            "probe_decoupled",
            _config("probe_decoupled", "python", out, "model_transaction_policy { decoupled: true }"),
            files={"1/model.py": DECOUPLED},
        )
        add_model(
            repo,
            "probe_threaded",
            _config("probe_threaded", "python", out, "model_transaction_policy { decoupled: true }"),
            files={"1/model.py": THREADED},
        )
        add_model(
            repo,
            "probe_ensemble",
            """
            platform: "ensemble"
            max_batch_size: 0
            input [ { name: "TAG" data_type: TYPE_STRING dims: [ 1 ] } ]
            output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
            ensemble_scheduling { step [ { model_name: "probe" model_version: -1
                input_map { key: "TAG" value: "TAG" } output_map { key: "OUT" value: "OUT" } } ] }
            """,
        )
        if native:
            add_model(repo, "c_probe", _config("c_probe", "cancel_probe", out))
            build_backend(TEST_BACKENDS / "cancel_probe.c", repo / "c_probe" / "libtriton_cancel_probe.so")

    for server in module_server(root, build, [], env=transport_plugins(root, request.param)):
        yield server, out, native


def _have_compiler() -> bool:
    try:
        compiler()
    except pytest.skip.Exception:
        return False
    return True


def _inputs(tag: str, batched: bool = False) -> list[grpcclient.InferInput]:
    shape = [1, 1] if batched else [1]
    tensor = grpcclient.InferInput("TAG", shape, "BYTES")
    tensor.set_data_from_numpy(np.array([tag.encode()], dtype=np.object_).reshape(shape))
    return [tensor]


def _wait_file(path: Path, timeout: float = WAIT_S) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists():
            return json.loads(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"{path.name} did not appear within {timeout} s")


def _metric(server: ServerProcess, name: str, **labels: str) -> float:
    text = urllib.request.urlopen(server.metrics_url, timeout=30).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in /metrics")


def _wait_metric(server: ServerProcess, value: float, name: str, **labels: str) -> None:
    end = time.monotonic() + WAIT_S
    while _metric(server, name, **labels) != value:
        assert time.monotonic() < end, f"{name} {labels} never became {value}"
        time.sleep(0.05)


@pytest.mark.parametrize("model", ["probe", "c_probe", "probe_ensemble"])
def test_grpc_unary_cancel_reaches_the_model(served: Any, model: str) -> None:
    server, out, native = served
    if model == "c_probe" and not native:
        pytest.skip("no C compiler for the native backend")
    tag = f"unary-{model}"
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: list[Any] = []
    call = client.async_infer(model, _inputs(tag), callback=lambda result, error: results.append(error))
    _wait_file(out / f"{tag}.started")
    call.cancel()
    assert _wait_file(out / tag) == ({"request": True, "factory": True} if model == "c_probe" else {"request": True})
    client.close()


def test_grpc_deadline_reaches_the_model(served: Any) -> None:
    server, out, _ = served
    client = grpcclient.InferenceServerClient(server.grpc_url)
    with pytest.raises(InferenceServerException, match="Deadline Exceeded"):
        client.infer("probe", _inputs("deadline"), client_timeout=3.0)
    assert _wait_file(out / "deadline") == {"request": True}
    client.close()


def test_grpc_stream_cancel_reaches_the_model(served: Any) -> None:
    server, out, _ = served
    client = grpcclient.InferenceServerClient(server.grpc_url)
    responses: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    client.async_stream_infer("probe", _inputs("stream"))
    _wait_file(out / "stream.started")
    client.stop_stream(cancel_requests=True)
    assert _wait_file(out / "stream") == {"request": True}
    client.close()


def test_grpc_stream_cancel_reaches_a_decoupled_model_and_its_sender(served: Any) -> None:
    server, out, _ = served
    client = grpcclient.InferenceServerClient(server.grpc_url)
    responses: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    client.async_stream_infer("probe_decoupled", _inputs("decoupled"))
    first, error = responses.get(timeout=WAIT_S)  # the model runs: its first response came
    assert error is None and first.as_numpy("OUT").tolist() == [0]
    _wait_file(out / "decoupled.started")
    client.stop_stream(cancel_requests=True)
    assert _wait_file(out / "decoupled") == {"request": True, "sender": True}
    client.close()


def test_grpc_stream_cancel_reaches_a_model_streaming_after_execute_returned(served: Any) -> None:
    """The usual LLM shape: execute hands the request to a thread and returns; the thread streams
    until the client cancels."""
    server, out, _ = served
    client = grpcclient.InferenceServerClient(server.grpc_url)
    responses: queue.Queue[Any] = queue.Queue()
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    client.async_stream_infer("probe_threaded", _inputs("threaded"))
    _wait_file(out / "threaded.started")
    client.stop_stream(cancel_requests=True)
    assert _wait_file(out / "threaded") == {"request": True, "sender": True}
    client.close()


@pytest.mark.parametrize("model", ["probe", "c_probe", "probe_ensemble"])
def test_http_client_that_disconnects_reaches_the_model(served: Any, model: str) -> None:
    """Beyond Triton 2.51, which does not report it: the client closes its connection mid-request."""
    server, out, native = served
    if model == "c_probe" and not native:
        pytest.skip("no C compiler for the native backend")
    tag = f"http-{model}"
    body = json.dumps({"inputs": [{"name": "TAG", "datatype": "BYTES", "shape": [1], "data": [tag]}]}).encode()
    head = (
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as sock:
        sock.sendall(head + body)
        _wait_file(out / f"{tag}.started")
    assert _wait_file(out / tag) == ({"request": True, "factory": True} if model == "c_probe" else {"request": True})


def test_http_client_that_half_closes_is_cancelled_and_still_answered(served: Any) -> None:
    """A client that shuts its sending side down mid-request (as Go's net/http sees it: gone)
    cancels the request, and still reads the answer the model gives then."""
    server, out, _ = served
    body = json.dumps({"inputs": [{"name": "TAG", "datatype": "BYTES", "shape": [1], "data": ["half"]}]}).encode()
    head = (
        f"POST /v2/models/probe/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=WAIT_S) as sock:
        sock.sendall(head + body)
        _wait_file(out / "half.started")
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    status, _, answer = received.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 200")
    assert json.loads(answer)["outputs"][0]["data"] == [1]
    assert _wait_file(out / "half") == {"request": True}


def test_http_generate_stream_client_that_disconnects_reaches_the_model(served: Any) -> None:
    """Server-sent events of a decoupled model (Triton's generate extension): the client reads the
    first event, then closes its connection."""
    server, out, _ = served
    body = json.dumps({"TAG": "sse"}).encode()
    head = (
        f"POST /v2/models/probe_threaded/generate_stream HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as sock:
        sock.sendall(head + body)
        received = b""
        while b"data: " not in received:
            chunk = sock.recv(4096)
            assert chunk, "the stream ended before its first event"
            received += chunk
        assert received.startswith(b"HTTP/1.1 200")
        _wait_file(out / "sse.started")
    assert _wait_file(out / "sse") == {"request": True, "sender": True}


def test_http_client_that_stays_is_not_cancelled(served: Any) -> None:
    server, out, _ = served
    (out / "stays.release").write_text("")  # the model answers at once, not cancelled
    body = json.dumps({"inputs": [{"name": "TAG", "datatype": "BYTES", "shape": [1], "data": ["stays"]}]}).encode()
    request = urllib.request.Request(f"http://{server.http_url}/v2/models/probe/infer", data=body, method="POST")
    answer = json.loads(urllib.request.urlopen(request, timeout=WAIT_S).read())
    assert answer["outputs"][0]["data"] == [0]
    assert _wait_file(out / "stays") == {"request": False}


def test_request_cancelled_while_queued_is_dropped_unrun(served: Any) -> None:
    """The dynamic batcher drops a cancelled request from its queue: the model never runs it
    (Triton 2.51 runs it, with ``is_cancelled()`` true); it counts as a CANCELED failure."""
    server, out, _ = served
    client = grpcclient.InferenceServerClient(server.grpc_url)
    first = client.async_infer("probe_batched", _inputs("q-first", True), callback=lambda result, error: None)
    _wait_file(out / "q-first.started")
    second = client.async_infer("probe_batched", _inputs("q-second", True), callback=lambda result, error: None)
    _wait_metric(server, 2, "nv_inference_pending_request_count", model="probe_batched")  # one runs, one waits
    second.cancel()
    _wait_metric(server, 1, "nv_inference_pending_request_count", model="probe_batched")
    (out / "q-first.release").write_text("")
    assert _wait_file(out / "q-first") == {"request": False}
    _wait_metric(server, 1, "nv_inference_request_success", model="probe_batched")
    assert _metric(server, "nv_inference_request_failure", model="probe_batched", reason="CANCELED") == 1
    assert not (out / "q-second.started").exists()
    del first
    client.close()


def test_request_cancelled_while_its_sequence_waits_for_a_slot_sees_it_when_it_runs(served: Any) -> None:
    """The sequence batcher keeps a sequence's request until the sequence has a slot: cancelled
    there, the request runs once it gets one and sees ``is_cancelled()`` at once."""
    server, out, _ = served
    client = grpcclient.InferenceServerClient(server.grpc_url)

    def start(tag: str, sequence: int) -> Any:
        return client.async_infer(
            "probe_sequence",
            _inputs(tag, True),
            callback=lambda result, error: None,
            sequence_id=sequence,
            sequence_start=True,
            sequence_end=True,
        )

    start("s-first", 1)
    _wait_file(out / "s-first.started")
    second = start("s-second", 2)  # the one slot is taken: it waits
    _wait_metric(server, 2, "nv_inference_pending_request_count", model="probe_sequence")
    second.cancel()
    (out / "s-first.release").write_text("")
    assert _wait_file(out / "s-first") == {"request": False}
    assert _wait_file(out / "s-second") == {"request": True}
    client.close()


def test_request_cancelled_while_handed_to_a_busy_instance_runs_cancelled(served: Any) -> None:
    """The default scheduler hands the next request to the busy instance ahead of time; cancelled
    there, it runs and sees ``is_cancelled()`` at once (as Triton 2.51 runs it)."""
    server, out, _ = served
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.async_infer("probe", _inputs("h-first"), callback=lambda result, error: None)
    _wait_file(out / "h-first.started")
    second = client.async_infer("probe", _inputs("h-second"), callback=lambda result, error: None)
    _wait_metric(server, 2, "nv_inference_pending_request_count", model="probe")  # both handed to the instance
    second.cancel()
    (out / "h-first.release").write_text("")
    assert _wait_file(out / "h-first") == {"request": False}
    assert _wait_file(out / "h-second") == {"request": True}
    client.close()
