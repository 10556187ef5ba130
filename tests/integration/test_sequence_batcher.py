"""Sequence batcher, black-box over HTTP and gRPC (Triton's L0_sequence_batcher in spirit).

The ``seq_sum`` model (``tests/support/scheduling_models.py``) keeps a running
sum per sequence — in the model (explicit state, keyed by the CORRID control
input) or in the server (implicit state) — and reports the control inputs it
saw and its process id. Error messages were checked against real Triton 2.51.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.clients import module_server
from tests.support.scheduling_models import add_seq_model, seq_config
from tests.support.server import ServerProcess

STRATEGIES = ["seq_direct", "seq_oldest", "seq_implicit_direct", "seq_implicit_oldest"]
OLDEST = "oldest { max_candidate_sequences: 2 }"


def build(repo: Path) -> None:
    """The suite's model repository (also used to run the suite against real Triton)."""
    add_seq_model(repo, "seq_direct", seq_config())
    add_seq_model(repo, "seq_oldest", seq_config(OLDEST))
    add_seq_model(repo, "seq_implicit_direct", seq_config(implicit=True))
    add_seq_model(repo, "seq_implicit_oldest", seq_config(OLDEST, implicit=True))
    add_seq_model(repo, "seq_string_id", seq_config(corrid_type="TYPE_STRING", count=1))
    add_seq_model(repo, "seq_idle", seq_config(idle_us=300_000, count=1))
    add_seq_model(repo, "seq_one_slot", seq_config(count=1, max_batch_size=0))
    add_seq_model(repo, "seq_slots", seq_config(count=1))
    add_seq_model(repo, "seq_crash", seq_config(count=1))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from module_server(tmp_path_factory.mktemp("sequence_batcher"), build, [])


class _Client:
    """One protocol's client with the sequence parameters as keyword arguments."""

    def __init__(self, server: Any, protocol: str) -> None:
        self.module = httpclient if protocol == "http" else grpcclient
        url = server.http_url.replace("http://", "") if protocol == "http" else server.grpc_url
        self.client = self.module.InferenceServerClient(url)

    def step(self, model: str, value: float, batched: bool = True, **kwargs: Any) -> dict[str, Any]:
        shape = [1, 1] if batched else [1]
        tensor = self.module.InferInput("INPUT", shape, "FP32")
        tensor.set_data_from_numpy(np.full(shape, value, np.float32))
        result = self.client.infer(model, [tensor], **kwargs)
        return {
            "sum": float(result.as_numpy("OUTPUT").reshape(-1)[0]),
            "ctl": result.as_numpy("CTL").reshape(-1).tolist(),
            "corr": result.as_numpy("CORR_OUT").reshape(-1)[0],
            "pid": int(result.as_numpy("PID").reshape(-1)[0]),
            "slot": int(result.as_numpy("SLOT").reshape(-1)[0]),
        }

    def error(self, model: str, value: float = 1.0, **kwargs: Any) -> tuple[str, str]:
        with pytest.raises(InferenceServerException) as info:
            self.step(model, value, **kwargs)
        return str(info.value.status()), info.value.message()

    def close(self) -> None:
        self.client.close()


def _run_sequence(server: Any, protocol: str, model: str, corr: Any, values: list[float], out: dict[Any, Any]) -> None:
    client = _Client(server, protocol)
    try:
        results = []
        for i, value in enumerate(values):
            results.append(
                client.step(
                    model,
                    value,
                    sequence_id=corr,
                    sequence_start=i == 0,
                    sequence_end=i == len(values) - 1,
                )
            )
        out[corr] = results
    except Exception as exc:  # noqa: BLE001 - reported by the test
        out[corr] = exc
    finally:
        client.close()


@pytest.mark.parametrize("model", STRATEGIES)
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_interleaved_sequences(server: ServerProcess, model: str, protocol: str) -> None:
    sequences = {1001 + k: [float(k + 1) * (i + 1) for i in range(6)] for k in range(4)}
    out: dict[Any, Any] = {}
    threads = [
        threading.Thread(target=_run_sequence, args=(server, protocol, model, corr, values, out))
        for corr, values in sequences.items()
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    pids = set()
    for corr, values in sequences.items():
        results = out[corr]
        assert not isinstance(results, Exception), results
        assert [r["sum"] for r in results] == list(np.cumsum(values))
        assert [r["ctl"] for r in results] == [[1, 0, 1]] + [[0, 0, 1]] * 4 + [[0, 1, 1]]
        assert {int(r["corr"]) for r in results} == {corr}
        sequence_pids = {r["pid"] for r in results}
        assert len(sequence_pids) == 1  # a sequence never crosses instances
        pids |= sequence_pids
    assert len(pids) == 2  # four sequences over two instances of two slots: both are used


@pytest.mark.parametrize("strategy", ["direct", "oldest"])
def test_implicit_state_equals_explicit_state(server: ServerProcess, strategy: str) -> None:
    client = _Client(server, "http")
    try:
        values = [0.5, 2.0, -1.25, 4.0]
        sums = {}
        for model in (f"seq_{strategy}", f"seq_implicit_{strategy}"):
            sums[model] = [
                client.step(
                    model,
                    v,
                    sequence_id=77,
                    sequence_start=i == 0,
                    sequence_end=i == len(values) - 1,
                )["sum"]
                for i, v in enumerate(values)
            ]
        assert sums[f"seq_{strategy}"] == sums[f"seq_implicit_{strategy}"] == [0.5, 2.5, 1.25, 5.25]
    finally:
        client.close()


def test_string_sequence_id(server: ServerProcess) -> None:
    for protocol in ("http", "grpc"):
        client = _Client(server, protocol)
        try:
            first = client.step("seq_string_id", 2.0, sequence_id="utterance-7", sequence_start=True)
            last = client.step("seq_string_id", 3.0, sequence_id="utterance-7", sequence_end=True)
            assert (first["sum"], last["sum"]) == (2.0, 5.0)
            assert first["corr"] == last["corr"] == b"utterance-7"
        finally:
            client.close()


def test_start_and_end_in_one_request(server: ServerProcess) -> None:
    client = _Client(server, "http")
    try:
        result = client.step("seq_direct", 9.0, sequence_id=5, sequence_start=True, sequence_end=True)
        assert (result["sum"], result["ctl"]) == (9.0, [1, 1, 1])
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sequence_errors(server: ServerProcess, protocol: str) -> None:
    client = _Client(server, protocol)
    bad = "400" if protocol == "http" else "StatusCode.INVALID_ARGUMENT"
    try:
        assert client.error("seq_direct") == (
            bad,
            "inference request to model 'seq_direct' must specify a non-zero or non-empty correlation ID",
        )
        no_start = (
            "inference request for sequence {} to model 'seq_direct' must specify the START flag on the first "
            "request of the sequence"
        )
        assert client.error("seq_direct", sequence_id=4242) == (bad, no_start.format(4242))
        client.step("seq_direct", 1.0, sequence_id=4243, sequence_start=True, sequence_end=True)
        assert client.error("seq_direct", sequence_id=4243) == (bad, no_start.format(4243))
        # the server keeps serving
        assert client.step("seq_direct", 1.0, sequence_id=4243, sequence_start=True, sequence_end=True)["sum"] == 1.0
    finally:
        client.close()


def test_idle_sequence_expires(server: ServerProcess) -> None:
    client = _Client(server, "http")
    try:
        assert client.step("seq_idle", 1.0, sequence_id=8, sequence_start=True)["sum"] == 1.0
        assert client.step("seq_idle", 1.0, sequence_id=8)["sum"] == 2.0
        time.sleep(1.5)  # max_sequence_idle_microseconds: 300000
        assert client.error("seq_idle", sequence_id=8) == (
            "400",
            (
                "inference request for sequence 8 to model 'seq_idle' must specify the START flag on the first "
                "request of the sequence"
            ),
        )
    finally:
        client.close()


def test_a_sequence_whose_instance_died_says_so(server: ServerProcess) -> None:
    client = _Client(server, "http")
    try:
        pid = client.step("seq_crash", 1.0, sequence_id=77, sequence_start=True)["pid"]
        assert client.step("seq_crash", 2.0, sequence_id=77)["sum"] == 3.0
        os.kill(pid, signal.SIGKILL)  # the instance's worker dies between two requests of the sequence
        deadline = time.monotonic() + 60  # until its instance runs in a new worker
        while set(server.instance_pids("seq_crash").values()) in (set(), {pid}) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.error("seq_crash", sequence_id=77) == (
            "400",
            "inference request for sequence 77 to model 'seq_crash' must specify the START flag on the first "
            "request of the sequence: sequence 77 was ended because the model instance serving it failed; its "
            "state is lost, start it again",
        )
        # started again, it runs in the new worker from a fresh state; an unknown sequence keeps Triton's words
        restarted = client.step("seq_crash", 5.0, sequence_id=77, sequence_start=True)
        assert restarted["sum"] == 5.0 and restarted["pid"] != pid
        assert client.error("seq_crash", sequence_id=78)[1].endswith("on the first request of the sequence")
    finally:
        client.close()


def test_new_sequence_waits_for_a_free_slot(server: ServerProcess) -> None:
    # one instance, one slot: a second sequence runs once the first one ends
    first = _Client(server, "http")
    out: dict[Any, Any] = {}
    try:
        assert first.step("seq_one_slot", 1.0, batched=False, sequence_id=1, sequence_start=True)["sum"] == 1.0

        def second() -> None:
            client = _Client(server, "http")
            try:
                out["second"] = client.step(
                    "seq_one_slot",
                    5.0,
                    batched=False,
                    sequence_id=2,
                    sequence_start=True,
                    sequence_end=True,
                )
            finally:
                client.close()

        thread = threading.Thread(target=second)
        thread.start()
        thread.join(1.0)
        assert "second" not in out  # backlogged behind sequence 1
        assert first.step("seq_one_slot", 2.0, batched=False, sequence_id=1, sequence_end=True)["sum"] == 3.0
        thread.join(60)
        assert out["second"]["sum"] == 5.0 and out["second"]["ctl"] == [1, 1, 1]
    finally:
        first.close()


def test_direct_requests_keep_their_slot(server: ServerProcess) -> None:
    # one instance with two slots: sequence 1 takes slot 0, sequence 2 slot 1; once 1 ended, a request of
    # 2 still runs as batch index 1, behind a null request in slot 0 (which the model sees with READY false)
    client = _Client(server, "http")
    try:
        assert client.step("seq_slots", 1.0, sequence_id=1, sequence_start=True)["slot"] == 0
        assert client.step("seq_slots", 1.0, sequence_id=2, sequence_start=True)["slot"] == 1
        assert client.step("seq_slots", 1.0, sequence_id=1, sequence_end=True)["slot"] == 0
        result = client.step("seq_slots", 2.0, sequence_id=2, sequence_end=True)
        assert (result["slot"], result["sum"]) == (1, 3.0)
        # both slots free again: a new sequence starts in slot 0
        assert client.step("seq_slots", 1.0, sequence_id=3, sequence_start=True, sequence_end=True)["slot"] == 0
    finally:
        client.close()
