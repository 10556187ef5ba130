"""The sequence batcher's remaining options: ``direct { max_queue_delay_microseconds
minimum_slot_utilization }`` and ``oldest { preserve_ordering }`` (``iterative_sequence``: test_iterative_sequence.py).

Black-box: one tritium-server subprocess, python models that report how many requests each
execute got, tritonclient over HTTP and gRPC streaming. The rules are Triton 2.51's
(``DirectSequenceBatch::BatcherThread``: a batch goes once ready slots / slots reaches the
utilization, or its oldest request waited the delay; ``oldest``: a per-instance dynamic
batcher with ``preserve_ordering``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support.clients import module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

DIRECT = """
    backend: "python"
    max_batch_size: 2
    sequence_batching {{
      direct {{ max_queue_delay_microseconds: {delay} minimum_slot_utilization: {utilization} }}
      max_sequence_idle_microseconds: 60000000
    }}
    input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
    output [ {{ name: "N" data_type: TYPE_INT32 dims: [ 1 ] }} ]
    instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

# N: how many requests the execute that ran this one got
COUNTING_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            n = np.array([[len(requests)]], dtype=np.int32)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("N", n)]) for _ in requests]
"""

OLDEST = """
    backend: "python"
    max_batch_size: 2
    model_transaction_policy {{ decoupled: true }}
    sequence_batching {{
      oldest {{ max_candidate_sequences: 2 preferred_batch_size: [ 2 ] max_queue_delay_microseconds: 30000000
               preserve_ordering: {ordering} }}
      max_sequence_idle_microseconds: 60000000
    }}
    input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
    output [ {{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
    instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

OLDEST_PREFERRED = """
    backend: "python"
    max_batch_size: 4
    sequence_batching {
      oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 600000000 }
      max_sequence_idle_microseconds: 60000000
    }
    input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
    output [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]
    instance_group [ { count: 1 kind: KIND_CPU } ]
"""

# answers the batch's last request first, the first one half a second later (from a thread)
REVERSING_MODEL = """
    import threading, time
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            pending = [(r.get_response_sender(), pb_utils.get_input_tensor_by_name(r, "IN").as_numpy().copy())
                       for r in requests]
            threading.Thread(target=self.answer, args=(pending,)).start()
            return None

        def answer(self, pending):
            for i, (sender, value) in enumerate(reversed(pending)):
                if i:
                    time.sleep(0.5)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", value)]),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""


def build(repo: Path) -> None:
    # a batch waits (up to 30 s) until both slots are ready
    add_model(
        repo, "direct_full", DIRECT.format(delay=30_000_000, utilization=1.0), files={"1/model.py": COUNTING_MODEL}
    )
    # the same, waiting 0.2 s at most
    add_model(repo, "direct_short", DIRECT.format(delay=200_000, utilization=1.0), files={"1/model.py": COUNTING_MODEL})
    # no utilization: a batch goes at once, whatever the delay
    add_model(
        repo, "direct_any", DIRECT.format(delay=30_000_000, utilization=0.0), files={"1/model.py": COUNTING_MODEL}
    )
    for name, ordering in (("oldest_ordered", "true"), ("oldest_unordered", "false")):
        add_model(repo, name, OLDEST.format(ordering=ordering), files={"1/model.py": REVERSING_MODEL})
    # a batch of 2 (a preferred size) goes at once; the 600 s delay only holds smaller ones
    add_model(repo, "oldest_preferred", OLDEST_PREFERRED, files={"1/model.py": COUNTING_MODEL})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from module_server(tmp_path_factory.mktemp("sequence_options"), build, ["--exit-on-error=false"])


def _http_step(server: ServerProcess, model: str, corr: int) -> int:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        inp = httpclient.InferInput("IN", [1, 1], "INT32")
        inp.set_data_from_numpy(np.array([[corr]], np.int32))
        result = client.infer(model, [inp], sequence_id=corr, sequence_start=True, sequence_end=True)
        return int(result.as_numpy("N")[0, 0])
    finally:
        client.close()


def test_direct_waits_for_the_slots_to_fill(server: ServerProcess) -> None:
    """With utilization 1.0 the first sequence's request waits for the second slot's."""
    answers: queue.Queue[int] = queue.Queue()
    first = threading.Thread(target=lambda: answers.put(_http_step(server, "direct_full", 11)))
    first.start()
    second = _http_step(server, "direct_full", 12)
    first.join(120)
    assert (answers.get_nowait(), second) == (2, 2)


def test_direct_delay_lets_a_lone_request_go(server: ServerProcess) -> None:
    assert _http_step(server, "direct_short", 21) == 1  # ran once its 0.2 s were up


def test_direct_without_utilization_goes_at_once(server: ServerProcess) -> None:
    # one request after the other: each goes alone, the 30 s delay notwithstanding
    assert [_http_step(server, "direct_any", corr) for corr in (31, 32)] == [1, 1]


def _stream_order(server: ServerProcess, model: str) -> list[int]:
    """The START requests of two sequences on one gRPC stream; the order their responses came in.

    (Without END: Triton 2.51's oldest batcher does not batch requests that are START and END
    at once. The sequences stay open; each model is used by one test.)"""
    seen: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: seen.put(error if error is not None else result))
        for corr in (41, 42):
            inp = grpcclient.InferInput("IN", [1, 1], "INT32")
            inp.set_data_from_numpy(np.array([[corr]], np.int32))
            client.async_stream_infer(model, [inp], sequence_id=corr, sequence_start=True)
        order = []
        for _ in range(2):
            item = seen.get(timeout=120)
            assert not isinstance(item, Exception), item
            order.append(int(item.as_numpy("OUT")[0, 0]))
        return order
    finally:
        client.stop_stream()
        client.close()


def test_oldest_preserve_ordering(server: ServerProcess) -> None:
    # the model answers the second request first; preserve_ordering holds it until the first's came
    assert _stream_order(server, "oldest_unordered") == [42, 41]
    assert _stream_order(server, "oldest_ordered") == [41, 42]


def test_oldest_sends_a_preferred_batch_size_without_waiting(server: ServerProcess) -> None:
    """Two sequences' START requests make a batch of 2, a preferred size: it goes at once, long
    before the 600 s queue delay that the largest preferred size (4) would otherwise wait for."""
    seen: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: seen.put(error if error is not None else result))
        for corr in (51, 52):
            inp = grpcclient.InferInput("IN", [1, 1], "INT32")
            inp.set_data_from_numpy(np.array([[corr]], np.int32))
            client.async_stream_infer("oldest_preferred", [inp], sequence_id=corr, sequence_start=True)
        counts = []
        for _ in range(2):
            item = seen.get(timeout=120)
            assert not isinstance(item, Exception), item
            counts.append(int(item.as_numpy("N")[0, 0]))
        assert counts == [2, 2]
    finally:
        client.stop_stream()
        client.close()
