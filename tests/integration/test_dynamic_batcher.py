"""Dynamic batcher and instance groups, black-box over HTTP and gRPC (Triton's L0_batcher in spirit).

Every model reports the batch it ran in (``tests/support/scheduling_models.py``),
so the assertions are on what the model saw, not on timing — except the one
allowed timing check (two instances run two requests in parallel).
Expected values and error messages were checked against real Triton 2.51.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import module_server
from tests.support.repo import add_model, identity_config
from tests.support.scheduling_models import add_batch_model, batch_config
from tests.support.server import ServerProcess

#: a backend that takes the batch as one array and reports whether that was a view (no copy)
CONTIGUOUS_PROBE = """
import numpy as np
from tritium.core.backend.api import batch_input


def TRITONBACKEND_ModelInstanceExecute(instance, requests):
    whole = batch_input(requests, "INPUT0")
    view = int(all(np.shares_memory(whole, r.inputs["INPUT0"]) for r in requests))
    start = 0
    for r in requests:
        rows = r.inputs["INPUT0"].shape[0]
        r.respond({"OUTPUT0": whole[start : start + rows] * 2, "VIEW": np.full((rows, 1), view, np.int32)})
        start += rows
"""
QUEUE_FULL = "[request id: <id_unknown>] Exceeds maximum queue size"
TIMED_OUT = "Request timeout expired"


def build(repo: Path) -> None:
    """The suite's model repository (also used to run the suite against real Triton)."""
    # a preferred size of 4 is sent at once; anything else waits the (long) queue delay
    add_batch_model(
        repo,
        "preferred4",
        batch_config(dynamic="preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 30000000"),
    )
    add_batch_model(repo, "delay", batch_config(dynamic="max_queue_delay_microseconds: 1500000"))
    add_batch_model(
        repo,
        "preferred2_4",
        batch_config(dynamic="preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 1500000"),
    )
    add_batch_model(
        repo,
        "max4",
        batch_config(max_batch_size=4, dynamic="max_queue_delay_microseconds: 1500000"),
    )
    add_batch_model(repo, "shapes", batch_config(dynamic="max_queue_delay_microseconds: 1000000"))
    add_batch_model(repo, "ragged", batch_config(dynamic="max_queue_delay_microseconds: 1000000", ragged=True))
    add_batch_model(
        repo,
        "priority",
        batch_config(max_batch_size=1, delay_ms=1500, dynamic="priority_levels: 2 default_priority_level: 2"),
    )
    add_batch_model(
        repo,
        "queue_full",
        batch_config(max_batch_size=1, delay_ms=1000, dynamic="default_queue_policy { max_queue_size: 1 }"),
    )
    add_batch_model(
        repo,
        "reject",
        batch_config(
            max_batch_size=1,
            delay_ms=1000,
            dynamic="default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 200000 "
            "allow_timeout_override: true }",
        ),
    )
    add_batch_model(
        repo,
        "delayed",
        batch_config(
            max_batch_size=1,
            delay_ms=1500,
            dynamic="default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 10000000 "
            "allow_timeout_override: true }",
        ),
    )
    add_batch_model(
        repo,
        "no_default_timeout",
        batch_config(
            max_batch_size=1,
            delay_ms=800,
            dynamic="default_queue_policy { allow_timeout_override: true }",
        ),
    )
    add_model(
        repo,
        "identity_batch",
        identity_config(
            dims="[ 4 ]",
            extra="dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 30000000 }",
        ),
    )
    add_model(
        repo,
        "contiguous",
        """
        backend: "contiguous_probe"
        max_batch_size: 8
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "VIEW" data_type: TYPE_INT32 dims: [ 1 ] } ]
        dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 30000000 }
        instance_group [ { count: 1 kind: KIND_CPU } ]
        """,
        files={"libtriton_contiguous_probe.py": CONTIGUOUS_PROBE},
    )
    for name, ordering in (("ordered", "true"), ("unordered", "false")):
        add_batch_model(
            repo,
            name,
            batch_config(max_batch_size=1, count=2, dynamic=f"preserve_ordering: {ordering}"),
        )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from module_server(tmp_path_factory.mktemp("dynamic_batcher"), build, [])


def _inputs(module: Any, rows: int = 1, cols: int = 1, value: float = 1.0) -> list[Any]:
    tensor = module.InferInput("INPUT0", [rows, cols], "FP32")
    tensor.set_data_from_numpy(np.full((rows, cols), value, np.float32))
    return [tensor]


def _concurrent(calls: list[Callable[[], Any]], stagger_s: float = 0.05) -> list[Any]:
    """Run each call in its own thread, started ``stagger_s`` apart (arrival order); results in call order."""
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except InferenceServerException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
        time.sleep(stagger_s)
    for t in threads:
        t.join(120)
    return results


def _http(server: ServerProcess, model: str, **kwargs: Any) -> Callable[[], dict[str, Any]]:
    def call() -> dict[str, Any]:
        client = httpclient.InferenceServerClient(server.http_url.replace("http://", ""))
        try:
            result = client.infer(model, _inputs(httpclient, **kwargs.pop("shape", {})), **kwargs)
            return {n: int(result.as_numpy(n)[0, 0]) for n in ("BATCH", "NREQ", "SEQNO", "PID")}
        finally:
            client.close()

    return call


def _grpc(server: ServerProcess, model: str, **kwargs: Any) -> Callable[[], dict[str, Any]]:
    def call() -> dict[str, Any]:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            result = client.infer(model, _inputs(grpcclient), **kwargs)
            return {n: int(result.as_numpy(n)[0, 0]) for n in ("BATCH", "NREQ", "SEQNO", "PID")}
        finally:
            client.close()

    return call


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_concurrent_requests_form_one_preferred_batch(server: ServerProcess, protocol: str) -> None:
    make = _http if protocol == "http" else _grpc
    results = _concurrent([make(server, "preferred4") for _ in range(4)])
    assert [r["NREQ"] for r in results] == [4, 4, 4, 4]
    assert [r["BATCH"] for r in results] == [4, 4, 4, 4]
    assert len({r["SEQNO"] for r in results}) == 1


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_batched_identity_returns_each_request_its_own_data(server: ServerProcess, protocol: str) -> None:
    # four requests become one batch laid out contiguously in shared memory; each gets its own rows back
    module = httpclient if protocol == "http" else grpcclient
    url = server.http_url.replace("http://", "") if protocol == "http" else server.grpc_url

    def call(k: int) -> Callable[[], Any]:
        def run() -> Any:
            client = module.InferenceServerClient(url)
            try:
                data = np.arange(4 * (k + 1), dtype=np.float32).reshape(k + 1, 4) + 100 * k
                tensor = module.InferInput("INPUT0", list(data.shape), "FP32")
                tensor.set_data_from_numpy(data)
                return data, client.infer("identity_batch", [tensor]).as_numpy("OUTPUT0")
            finally:
                client.close()

        return run

    # rows 1 + 3 = 4 (preferred): two batches of two requests each
    for sent, got in _concurrent([call(0), call(2), call(0), call(2)]):
        np.testing.assert_array_equal(sent, got)


def test_backend_gets_the_batch_as_one_array_without_copy(server: ServerProcess) -> None:
    url = server.http_url.replace("http://", "")

    def call(k: int) -> Callable[[], Any]:
        def run() -> Any:
            client = httpclient.InferenceServerClient(url)
            try:
                data = np.arange(3 * (k % 2 + 1), dtype=np.float32).reshape(-1, 3) + 10 * k
                tensor = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
                tensor.set_data_from_numpy(data)
                result = client.infer("contiguous", [tensor])
                return data, result.as_numpy("OUTPUT0"), result.as_numpy("VIEW")
            finally:
                client.close()

        return run

    # rows 1 + 2 + 1 = 4: one batch of three requests, gathered into one block of shared memory
    for sent, doubled, view in _concurrent([call(0), call(1), call(2)]):
        np.testing.assert_array_equal(doubled, sent * 2)
        assert view.ravel().tolist() == [1] * sent.shape[0]


def test_queue_delay_sends_what_arrived(server: ServerProcess) -> None:
    # no preferred size but max_batch_size (8): after the delay the three queued requests go together
    results = _concurrent([_http(server, "delay") for _ in range(3)])
    assert [r["NREQ"] for r in results] == [3, 3, 3]


def test_preferred_batch_sizes(server: ServerProcess) -> None:
    # preferred [2, 4]: the second arrival completes a batch of 2 at once; the third waits the delay alone
    results = _concurrent([_http(server, "preferred2_4") for _ in range(3)], stagger_s=0.15)
    assert sorted(r["NREQ"] for r in results) == [1, 2, 2]


def test_batch_never_exceeds_max_batch_size(server: ServerProcess) -> None:
    results = _concurrent([_http(server, "max4") for _ in range(6)])
    assert sorted(r["NREQ"] for r in results) == [2, 2, 4, 4, 4, 4]
    # a request of 3 rows and two of 1 row: 3 + 1 fills the batch, the last one goes alone
    rows = _concurrent([_http(server, "max4", shape={"rows": r}) for r in (3, 1, 1)], stagger_s=0.15)
    assert [r["BATCH"] for r in rows] == [4, 4, 1]


def test_different_shapes_are_not_batched_unless_ragged(server: ServerProcess) -> None:
    shapes = [{"cols": c} for c in (1, 2, 1, 2)]
    plain = _concurrent([_http(server, "shapes", shape=s) for s in shapes], stagger_s=0.15)
    assert [r["NREQ"] for r in plain] == [1, 1, 1, 1]  # as Triton: each shape change ends a batch
    ragged = _concurrent([_http(server, "ragged", shape=s) for s in shapes], stagger_s=0.15)
    assert [r["NREQ"] for r in ragged] == [4, 4, 4, 4]


def test_higher_priority_is_served_first(server: ServerProcess) -> None:
    # the first request occupies the instance; then two at the default level 2 and one at level 1
    calls = [
        _http(server, "priority"),
        _http(server, "priority"),
        _http(server, "priority", priority=2),
        _http(server, "priority", priority=1),
    ]
    first, low1, low2, high = _concurrent(calls, stagger_s=0.2)
    base = first["SEQNO"]
    assert high["SEQNO"] == base + 1
    assert sorted([low1["SEQNO"], low2["SEQNO"]]) == [base + 2, base + 3]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_full_queue_rejects(server: ServerProcess, protocol: str) -> None:
    make = _http if protocol == "http" else _grpc
    # one request executes (1 s), one waits in the queue (max_queue_size 1), the other two are refused
    results = _concurrent([make(server, "queue_full") for _ in range(4)], stagger_s=0.1)
    errors = [r for r in results if isinstance(r, InferenceServerException)]
    assert len(errors) == 2
    for exc in errors:
        assert exc.message() == QUEUE_FULL
        assert exc.status() == ("503" if protocol == "http" else "StatusCode.UNAVAILABLE")


def _stats_and_rejections(server: ServerProcess, model: str) -> tuple[int, int, int]:
    """(fail count, success count, REJECTED failures in /metrics) of a model."""
    import urllib.request

    client = httpclient.InferenceServerClient(server.http_url.replace("http://", ""))
    try:
        stats = client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]
    finally:
        client.close()
    with urllib.request.urlopen(server.metrics_url, timeout=30) as resp:
        text = resp.read().decode()
    line = f'nv_inference_request_failure{{model="{model}",reason="REJECTED",version="1"}} '
    rejected = next(int(float(row[len(line) :])) for row in text.splitlines() if row.startswith(line))
    return int(stats["fail"]["count"]), int(stats["success"]["count"]), rejected


def test_rejections_in_statistics(server: ServerProcess) -> None:
    # as Triton 2.51: a queue timeout is a failure with reason REJECTED; a full queue is not counted
    before = {m: _stats_and_rejections(server, m) for m in ("queue_full", "reject")}
    _concurrent([_http(server, "reject") for _ in range(2)], stagger_s=0.1)
    _concurrent([_http(server, "queue_full") for _ in range(4)], stagger_s=0.1)
    after = {m: _stats_and_rejections(server, m) for m in ("queue_full", "reject")}
    delta = {m: tuple(a - b for a, b in zip(after[m], before[m], strict=True)) for m in after}
    assert delta == {"queue_full": (0, 2, 0), "reject": (1, 1, 1)}


def test_queue_timeout_rejects(server: ServerProcess) -> None:
    results = _concurrent([_http(server, "reject") for _ in range(2)], stagger_s=0.1)
    errors = [r for r in results if isinstance(r, InferenceServerException)]
    assert [(e.status(), e.message()) for e in errors] == [("503", TIMED_OUT)]
    # the request's own timeout only shortens the default (as Triton): 10 s still times out after 200 ms
    for override in (50_000, 10_000_000):
        results = _concurrent([_http(server, "reject"), _http(server, "reject", timeout=override)], stagger_s=0.1)
        assert isinstance(results[1], InferenceServerException) and results[1].message() == TIMED_OUT


def test_request_timeout_needs_a_default_timeout(server: ServerProcess) -> None:
    # as Triton 2.51: with no default timeout, the request's timeout parameter is not applied
    results = _concurrent([_http(server, "no_default_timeout"), _http(server, "no_default_timeout", timeout=50_000)])
    assert all(isinstance(r, dict) for r in results)


def test_queue_timeout_delays(server: ServerProcess) -> None:
    # DELAY: a request whose own timeout (50 ms) expires in the queue goes behind the one that
    # arrived after it (whose 10 s default timeout does not expire); both succeed
    first, timed_out, later = _concurrent(
        [
            _http(server, "delayed"),
            _http(server, "delayed", timeout=50_000),
            _http(server, "delayed"),
        ],
        stagger_s=0.3,
    )
    assert timed_out["SEQNO"] > later["SEQNO"] > first["SEQNO"]


def test_preserve_ordering_holds_back_later_responses(server: ServerProcess) -> None:
    # two instances; the first request is slow (its instance sleeps 2 s), the second fast: with
    # preserve_ordering the fast response is held until the slow one has finished executing
    assert _fast_response_held(server, "ordered") is True
    assert _fast_response_held(server, "unordered") is False


def _timed_call(url: str, model: str, tag: str, seconds: float, seen: dict[str, Any]) -> Callable[[], None]:
    """A request that sleeps ``seconds`` in the model; records when its execute began and ended
    (the model's clock) and when its response reached the client (the same machine's clock)."""

    def run() -> None:
        client = httpclient.InferenceServerClient(url)
        try:
            result = client.infer(model, _inputs(httpclient), parameters={"sleep_ms": int(seconds * 1000)})
            received = time.time()
        finally:
            client.close()
        seen[tag] = (
            float(result.as_numpy("T0")[0, 0]),
            float(result.as_numpy("T1")[0, 0]),
            received,
        )

    return run


def _fast_response_held(server: ServerProcess, model: str) -> bool:
    """Whether the fast request's response came only after the slow one finished executing.

    Judged on a run where the slow request began executing first and the fast one began while it
    still ran (on a loaded machine the second client may come too early or too late; such a run
    says nothing about ordering and is repeated).
    """
    url = server.http_url.replace("http://", "")
    runs = []
    for _attempt in range(3):
        seen: dict[str, Any] = {}
        _concurrent(
            [
                _timed_call(url, model, "slow", 2.0, seen),
                _timed_call(url, model, "fast", 0.0, seen),
            ],
            0.5,
        )
        (slow_began, slow_ended, _), (fast_began, _fast_ended, fast_received) = (
            seen["slow"],
            seen["fast"],
        )
        runs.append(seen)
        if slow_began < fast_began < slow_ended:
            return fast_received >= slow_ended
    raise AssertionError(f"the two requests never overlapped: {runs}")
