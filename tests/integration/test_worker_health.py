"""Worker health while busy: a worker frozen mid-execute is found and restarted; a long model is not killed.

The supervisor health-checks executing workers through their heartbeat
thread (core/worker/heartbeat.py). A worker stopped with SIGSTOP while it
executes (the issue's probe) is killed after ``--worker-ping-timeout-secs``:
its request fails with a clear error, its model is not ready meanwhile, and
the instance comes back. A model that legitimately runs longer than the
timeout keeps answering the heartbeat and finishes.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.http as httpclient

from tests.integration.test_python_robustness import SLEEPY, SLEEPY_CONFIG, seconds, stub_of, wait_ready
from tests.support.clients import HTTP_ONLY, module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

PING_TIMEOUT_S = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    def build(repo: Path) -> None:
        add_model(repo, "sleepy", SLEEPY_CONFIG % "0", files={"1/model.py": SLEEPY})

    args = ["--worker-ping-interval-secs=0.5", f"--worker-ping-timeout-secs={PING_TIMEOUT_S}", *HTTP_ONLY]
    yield from module_server(tmp_path_factory.mktemp("worker_health"), build, args)


def test_a_model_that_runs_longer_than_the_ping_timeout_is_not_killed(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    stub = stub_of(server, "sleepy")
    result = client.infer("sleepy", seconds(3 * PING_TIMEOUT_S))
    assert result.as_numpy("SLEPT").tolist() == [float(3 * PING_TIMEOUT_S)]
    assert stub_of(server, "sleepy") == stub


def test_a_worker_frozen_while_executing_is_killed_and_restarted(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    wait_ready(client, "sleepy")
    stub = stub_of(server, "sleepy")
    failures: list[str] = []
    readiness: list[bool] = []

    def call() -> None:
        try:
            httpclient.InferenceServerClient(server.http_url, network_timeout=60).infer("sleepy", seconds(30))
        except Exception as exc:  # noqa: BLE001 - checked below
            failures.append(str(exc))

    thread = threading.Thread(target=call)
    thread.start()
    time.sleep(1.0)
    os.kill(stub, signal.SIGSTOP)  # a worker of the server this module started: frozen mid-execute
    try:
        while thread.is_alive():
            readiness.append(client.is_model_ready("sleepy"))
            thread.join(0.05)
    finally:
        try:
            os.kill(stub, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert failures == [
        f"[500] model instance 'sleepy_0': worker process stopped answering health checks for {PING_TIMEOUT_S} s "
        "while executing and was killed"
    ]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not readiness or not readiness[-1] or False not in readiness):
        readiness.append(client.is_model_ready("sleepy"))  # not ready until the new worker is up
        time.sleep(0.02)
    assert False in readiness and readiness[-1]
    assert client.infer("sleepy", seconds(0)).as_numpy("SLEPT").tolist() == [0.0]
    assert stub_of(server, "sleepy") != stub
    assert "stopped answering health checks" in server.log()
