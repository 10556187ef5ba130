"""``sequence_batching { iterative_sequence: true }``: requests a model reschedules
(``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE``), as Triton 2.51 schedules them.

Black-box: one tritium-server subprocess with python models that count a state down from ``IN``
and reschedule until it reaches 0. What Triton 2.51 answers (probed): a decoupled model's gRPC
stream gets the responses 2, 1, 0 for IN=3 (the last one final) and ``generate_stream`` three
events; a model that is not decoupled answers once, from its last run; a request without a
sequence id gets its own correlation id (a counter from 1) and the START flag, its reruns flags 0;
a request released for good ends its sequence; every run counts as an inference. Rescheduling in
a model without ``iterative_sequence``: Triton logs ``Request is released with
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured to handle such a flag.``
and never answers; tritium answers that error. The tests but those of that error pass against
Triton 2.51 too.
"""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import http_call, module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

CONFIG = """
    backend: "python"
    max_batch_size: 0
    {policy}
    {scheduling}
    input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
    output [
      {{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }},
      {{ name: "FLAGS" data_type: TYPE_INT32 dims: [ 1 ] }},
      {{ name: "CORR" data_type: TYPE_INT64 dims: [ 1 ] }},
      {{ name: "RUNS" data_type: TYPE_INT32 dims: [ 1 ] }}
    ]
    instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
ITERATIVE = "sequence_batching { iterative_sequence: true }"
DECOUPLED = "model_transaction_policy { decoupled: true }"

# counts IN down, one step a run; OUT is what is left, FLAGS the run's sequence flags, CORR its
# correlation id, RUNS the runs so far; reschedules until nothing is left
MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    DECOUPLED = {decoupled}

    class TritonPythonModel:
        def initialize(self, args):
            self.left, self.runs = {{}}, {{}}

        def execute(self, requests):
            responses = []
            for request in requests:
                corr = request.correlation_id()
                if corr not in self.left:
                    self.left[corr] = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().reshape(-1)[0])
                    self.runs[corr] = 0
                self.left[corr] -= 1
                self.runs[corr] += 1
                left = self.left[corr]
                response = pb_utils.InferenceResponse([
                    pb_utils.Tensor("OUT", np.array([left], np.int32)),
                    pb_utils.Tensor("FLAGS", np.array([request.flags()], np.int32)),
                    pb_utils.Tensor("CORR", np.array([int(corr)], np.int64)),
                    pb_utils.Tensor("RUNS", np.array([self.runs[corr]], np.int32)),
                ])
                if left > 0:
                    request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                else:
                    del self.left[corr], self.runs[corr]
                if DECOUPLED:
                    final = 0 if left > 0 else pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                    request.get_response_sender().send(response, flags=final)
                else:
                    responses.append(None if left > 0 else response)
            return None if DECOUPLED else responses
"""

# reschedules and returns a response as well (Triton's python backend refuses that)
BOTH_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            for request in requests:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], np.int32))]) for _ in requests]
"""


RAISING_MODEL = """
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            raise pb_utils.TritonModelException("no way")
"""


# max_batch_size 2: OUT is what is left, N the size of the batch the run was in; each execute
# takes 0.2 s, so requests in flight meet in batches
BATCHING_CONFIG = """
    backend: "python"
    max_batch_size: 2
    model_transaction_policy { decoupled: true }
    sequence_batching { iterative_sequence: true }
    input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
    output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]
    instance_group [ { count: 1 kind: KIND_CPU } ]
"""
BATCHING_MODEL = """
    import time
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            self.left = {}

        def execute(self, requests):
            time.sleep(0.2)
            for request in requests:
                corr = request.correlation_id()
                if corr == 0:  # a null request in an idle slot: its response is dropped
                    request.get_response_sender().send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                    continue
                if request.flags() & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
                    self.left[corr] = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0, 0])
                self.left[corr] -= 1
                left = self.left[corr]
                response = pb_utils.InferenceResponse([
                    pb_utils.Tensor("OUT", np.array([[left]], np.int32)),
                    pb_utils.Tensor("N", np.array([[len(requests)]], np.int32)),
                ])
                if left > 0:
                    request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                    request.get_response_sender().send(response)
                else:
                    request.get_response_sender().send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return None
"""


def build(repo: Path) -> None:
    add_model(repo, "iter_batching", BATCHING_CONFIG, files={"1/model.py": BATCHING_MODEL})
    for name, policy, scheduling, decoupled in (
        ("iter_decoupled", DECOUPLED, ITERATIVE, True),
        ("iter_plain", "", ITERATIVE, False),
        ("plain", "", "", False),  # no iterative_sequence: rescheduling is an error
        ("decoupled", DECOUPLED, "", True),
        ("sequence_plain", "", "sequence_batching { }", False),
        ("iter_both", "", ITERATIVE, False),
        ("iter_raises", DECOUPLED, ITERATIVE, True),
        ("iter_async", DECOUPLED, ITERATIVE, True),  # async def execute: released after execute returned
    ):
        model = BOTH_MODEL if name == "iter_both" else MODEL.format(decoupled=decoupled)
        model = RAISING_MODEL if name == "iter_raises" else model
        if name == "iter_async":
            model = model.replace("        def execute(", "        async def execute(")
        add_model(repo, name, CONFIG.format(policy=policy, scheduling=scheduling), files={"1/model.py": model})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from module_server(tmp_path_factory.mktemp("iterative_sequence"), build, [])


def _grpc_stream(server: ServerProcess, model: str, value: int, count: int, **kwargs: Any) -> list[Any]:
    """Send one request on a gRPC stream; the first ``count`` results (or errors) it gets."""
    seen: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: seen.put(error if error is not None else result))
        inp = grpcclient.InferInput("IN", [1], "INT32")
        inp.set_data_from_numpy(np.array([value], np.int32))
        client.async_stream_infer(model, [inp], enable_empty_final_response=True, **kwargs)
        return [seen.get(timeout=60) for _ in range(count)]
    finally:
        client.stop_stream()
        client.close()


def _row(result: Any) -> tuple[int, int, int, bool]:
    """(OUT, FLAGS, RUNS, final) of one streamed result."""
    final = result.get_response().parameters["triton_final_response"].bool_param
    return (
        int(result.as_numpy("OUT")[0]),
        int(result.as_numpy("FLAGS")[0]),
        int(result.as_numpy("RUNS")[0]),
        final,
    )


def test_decoupled_grpc_stream_gets_every_run(server: ServerProcess) -> None:
    results = _grpc_stream(server, "iter_decoupled", 3, 3)
    assert not any(isinstance(r, Exception) for r in results), results
    # the first run is the new sequence's START; its reruns have their flags cleared
    assert [_row(r) for r in results] == [(2, 1, 1, False), (1, 0, 2, False), (0, 0, 3, True)]
    corr = {int(r.as_numpy("CORR")[0]) for r in results}
    assert len(corr) == 1 and corr.pop() > 0  # one sequence id, given by the server
    # the next request without a sequence id gets the next id
    again = _grpc_stream(server, "iter_decoupled", 1, 1)
    assert _row(again[0]) == (0, 1, 1, True)
    assert int(again[0].as_numpy("CORR")[0]) == int(results[0].as_numpy("CORR")[0]) + 1


def test_async_decoupled_model_released_after_execute_returned(server: ServerProcess) -> None:
    results = _grpc_stream(server, "iter_async", 3, 3)
    assert not any(isinstance(r, Exception) for r in results), results
    assert [_row(r) for r in results] == [(2, 1, 1, False), (1, 0, 2, False), (0, 0, 3, True)]
    stats = httpclient.InferenceServerClient(server.http_url).get_inference_statistics("iter_async")["model_stats"][0]
    assert (int(stats["inference_count"]), int(stats["execution_count"])) == (3, 3)


def test_decoupled_grpc_stream_with_a_sequence_id(server: ServerProcess) -> None:
    results = _grpc_stream(server, "iter_decoupled", 2, 2, sequence_id=77, sequence_start=True)
    assert [(_row(r), int(r.as_numpy("CORR")[0])) for r in results] == [((1, 1, 1, False), 77), ((0, 0, 2, True), 77)]
    # the request was released for good: it ended its sequence (Triton's generative sequencer)
    [error] = _grpc_stream(server, "iter_decoupled", 2, 1, sequence_id=77)
    assert isinstance(error, InferenceServerException)
    assert "must specify the START flag on the first request of the sequence" in error.message()


def test_decoupled_generate_stream_gets_an_event_a_run(server: ServerProcess) -> None:
    status, _, body = http_call(server, "POST", "/v2/models/iter_decoupled/generate_stream", b'{"IN": 3}')
    assert status == 200
    events = [json.loads(line[len(b"data: ") :]) for line in body.split(b"\n\n") if line]
    assert [(e["OUT"], e["FLAGS"], e["RUNS"]) for e in events] == [(2, 1, 1), (1, 0, 2), (0, 0, 3)]


def test_plain_model_answers_once_from_its_last_run(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        inp = httpclient.InferInput("IN", [1], "INT32")
        inp.set_data_from_numpy(np.array([3], np.int32))
        result = client.infer("iter_plain", [inp])
        assert [int(result.as_numpy(n)[0]) for n in ("OUT", "FLAGS", "RUNS")] == [0, 0, 3]
        stats = client.get_inference_statistics("iter_plain")["model_stats"][0]
        # as Triton 2.51 (probed): every run counts as a successful inference and an execution
        counts = (stats["inference_count"], stats["execution_count"], stats["inference_stats"]["success"]["count"])
        assert tuple(int(c) for c in counts) == (3, 3, 3)
    finally:
        client.close()


@pytest.mark.parametrize("model", ["plain", "sequence_plain"])
def test_rescheduling_without_iterative_sequence_is_an_error(server: ServerProcess, model: str) -> None:
    # Triton 2.51 logs this error and never answers the request; tritium answers it
    params = {"sequence_id": 5, "sequence_start": True} if model == "sequence_plain" else {}
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        inp = httpclient.InferInput("IN", [1], "INT32")
        inp.set_data_from_numpy(np.array([3], np.int32))
        with pytest.raises(InferenceServerException) as info:
            client.infer(model, [inp], **params)
        assert "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE" in info.value.message()
    finally:
        client.close()


def test_rescheduling_in_a_decoupled_model_without_iterative_sequence(server: ServerProcess) -> None:
    # Triton 2.51: the first response, then nothing (it logs the error)
    first, second = _grpc_stream(server, "decoupled", 3, 2)
    assert _row(first) == (2, 0, 1, False)  # its response went out before the request was released
    assert isinstance(second, InferenceServerException)
    assert "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE" in second.message()


def test_a_rescheduled_request_returns_none(server: ServerProcess) -> None:
    status, _, body = http_call(
        server,
        "POST",
        "/v2/models/iter_both/infer",
        b'{"inputs":[{"name":"IN","datatype":"INT32","shape":[1],"data":[1]}]}',
    )
    assert status == 500
    assert (
        "Expected a None object in the execute function return list for reschduled request" in json.loads(body)["error"]
    )


def test_an_execute_error_ends_the_stream(server: ServerProcess) -> None:
    [error] = _grpc_stream(server, "iter_raises", 1, 1)
    assert isinstance(error, InferenceServerException)
    assert "no way" in error.message()
    assert _grpc_stream(server, "iter_raises", 1, 1)[0].message() == error.message()  # the next one too


def test_requests_in_flight_are_batched_and_complete_independently(server: ServerProcess) -> None:
    seen: dict[int, queue.Queue[Any]] = {2: queue.Queue(), 4: queue.Queue()}
    clients = []
    try:
        for value, answers in seen.items():
            client = grpcclient.InferenceServerClient(server.grpc_url)
            clients.append(client)
            client.start_stream(callback=lambda result, error, q=answers: q.put(error if error is not None else result))
            inp = grpcclient.InferInput("IN", [1, 1], "INT32")
            inp.set_data_from_numpy(np.array([[value]], np.int32))
            client.async_stream_infer("iter_batching", [inp])
        rows = {}
        for value, answers in seen.items():
            results = [answers.get(timeout=60) for _ in range(value)]
            assert not any(isinstance(r, Exception) for r in results), results
            rows[value] = [(int(r.as_numpy("OUT")[0, 0]), int(r.as_numpy("N")[0, 0])) for r in results]
    finally:
        for client in clients:
            client.stop_stream()
            client.close()
    assert [out for out, _ in rows[2]] == [1, 0]
    assert [out for out, _ in rows[4]] == [3, 2, 1, 0]
    # the shorter sequence's runs shared batches with the longer one's
    assert 2 in [n for _, n in rows[2]]
