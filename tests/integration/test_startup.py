"""Start-up: a taken port fails before any model loads, Triton's model and options tables, the CLI's refusals.

Black-box: ``tritium-server`` as a subprocess on free loopback ports; the
tables are read back from its log and compared with the repository index.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.clients import grpc_call, http_call
from tests.support.ensembles import add_ensemble, step
from tests.support.grpc_transport import transport_line
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess


def build(root: Path) -> Path:
    """m (identity, loads), broken (unknown backend), noversions (no version folder), ens (over m)."""
    add_model(root, "m", identity_config(dims="[ 4 ]"))
    add_model(root, "broken", identity_config(dims="[ 4 ]").replace('"identity"', '"no_such_backend"'))
    add_model(root, "noversions", identity_config(dims="[ 4 ]"), versions=())
    add_ensemble(root, "ens", [step("m", {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})])
    return root


def table_rows(log: str, header: str) -> list[tuple[str, ...]]:
    """Rows of the logged table whose header row starts with ``| <header>``; continuation lines joined."""
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} "))
    rows: list[list[str]] = []
    for line in lines[start + 2 :]:
        if line.startswith("+"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] or not rows:
            rows.append(cells)
        else:
            rows[-1] = [f"{a}\n{b}".strip("\n") if b else a for a, b in zip(rows[-1], cells)]
    return [tuple(r) for r in rows]


def index(server: ServerProcess) -> list[dict[str, str]]:
    status, _, body = http_call(server, "POST", "/v2/repository/index")
    assert status == 200
    return json.loads(body)


def test_taken_port_fails_before_loading(tmp_path: Path) -> None:
    build(tmp_path / "models")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for flag in ("--http-port", "--grpc-port", "--metrics-port"):
            server = ServerProcess([tmp_path / "models"], ["--exit-on-error=false"], log_path=tmp_path / f"{flag}.log")
            server.args += [f"{flag}={port}"] + [f"--{p}-address=127.0.0.1" for p in ("http", "grpc", "metrics")]
            server.start(wait_ready=False)
            assert server.wait_exit(60) == 1
            server.stop()
            log = server.log()
            name = flag[2:].split("-")[0]
            assert f"the {name} endpoint's port {port} on 127.0.0.1 is already in use; no model was loaded" in log
            assert "loading:" not in log


@pytest.fixture(scope="module")
def explicit(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("startup")
    server = ServerProcess(
        [build(root / "models")], ["--model-control-mode=explicit", "--load-model=m"], log_path=root / "server.log"
    )
    server.start()
    yield server
    server.stop()


def test_model_table_matches_the_index(explicit: ServerProcess) -> None:
    rows = table_rows(explicit.log(), "Model")
    assert rows == [
        ("broken", "-", "UNAVAILABLE: not loaded"),
        ("ens", "-", "UNAVAILABLE: not loaded"),
        ("m", "1", "READY"),
        ("noversions", "-", "UNAVAILABLE: not loaded"),
    ]
    assert [
        (e["name"], e.get("version", "-"), e["state"] + (f": {e['reason']}" if "reason" in e else ""))
        for e in index(explicit)
    ] == rows


def test_options_table(explicit: ServerProcess) -> None:
    options = dict(table_rows(explicit.log(), "Option"))
    assert options["server_id"] == "tritium"
    assert options["model_control_mode"] == "MODE_EXPLICIT"
    assert options["startup_models_0"] == "m"
    assert options["model_repository_path[0]"] == explicit.repositories[0]
    assert options["endpoints"].split("\n") == [
        f"http 127.0.0.1:{explicit.http_port}",
        f"grpc 127.0.0.1:{explicit.grpc_port}",
        # the default transport: native where it is built (scripts/test.sh makes sure it is where
        # libgrpc++-dev is), else grpc.aio and why
        f"transport: {transport_line()}",
        f"metrics 127.0.0.1:{explicit.metrics_port}",
    ]
    assert f"gRPC transport: {transport_line()}\n" in explicit.log()


def test_index_states_of_the_odd_cases(explicit: ServerProcess) -> None:
    from tritium.proto import grpc_service_pb2 as pb

    assert http_call(explicit, "POST", "/v2/repository/models/noversions/load")[0] == 400
    assert http_call(explicit, "POST", "/v2/repository/models/broken/load")[0] == 400
    entries = {e["name"]: e for e in index(explicit)}
    assert entries["ens"] == {"name": "ens", "state": "UNAVAILABLE", "reason": "not loaded"}
    assert entries["noversions"] == {
        "name": "noversions",
        "state": "UNAVAILABLE",
        "reason": "at least one version must be available under the version policy of model 'noversions'",
    }
    assert entries["broken"]["state"] == "UNAVAILABLE" and entries["broken"]["version"] == "1"
    assert "no_such_backend" in entries["broken"]["reason"]
    code, response = grpc_call(explicit, "RepositoryIndex", pb.RepositoryIndexRequest())
    assert (
        pb.RepositoryIndexResponse.ModelIndex(name="ens", state="UNAVAILABLE", reason="not loaded") in response.models
    )
    # loaded, then unloaded: Triton's "unloaded"
    assert http_call(explicit, "POST", "/v2/repository/models/ens/load")[0] == 200
    assert http_call(explicit, "POST", "/v2/repository/models/ens/unload")[0] == 200
    entries = {e["name"]: e for e in index(explicit)}
    assert entries["ens"] == {"name": "ens", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}


def test_every_model_logs_loading_ensembles_too(start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "models"
    add_model(root, "m", identity_config(dims="[ 4 ]"))
    add_ensemble(root, "ens", [step("m", {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})])
    server = start_server([root])
    log = server.log()
    assert re.search(r"\] loading: m:1$", log, re.M) and re.search(r"\] loading: ens:1$", log, re.M)
    assert table_rows(log, "Model") == [("ens", "1", "READY"), ("m", "1", "READY")]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tritium", *args], capture_output=True, text=True, timeout=60)


def test_refused_flag_is_one_line_and_a_pointer() -> None:
    done = run_cli("--model-repository=/nowhere", "--host-policy=gpu_0,numa-node=0")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "tritium-server: error: --host-policy is a tritonserver flag for host policies, which tritium "
        "does not support yet",
        "Run 'tritium-server --help' for the flags.",
    ]
    assert run_cli("--no-such-flag").stderr.splitlines() == [
        "tritium-server: error: unrecognized arguments: --no-such-flag",
        "Run 'tritium-server --help' for the flags.",
    ]


def test_typod_flag_gets_the_closest_known_flag() -> None:
    assert run_cli("--model-repostory=/nowhere").stderr.splitlines() == [
        "tritium-server: error: unrecognized arguments: --model-repostory=/nowhere (did you mean --model-repository?)",
        "Run 'tritium-server --help' for the flags.",
    ]
    done = run_cli("--model-repository=/nowhere", "--log-verbos", "1", "--http-prt=8000")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        "tritium-server: error: unrecognized arguments: --log-verbos 1 --http-prt=8000 "
        "(did you mean --log-verbose for --log-verbos, --http-port for --http-prt?)"
    )
    # a refused tritonserver flag is never suggested: it would only be refused next
    assert run_cli("--host-polcy=gpu_0,numa-node=0").stderr.splitlines()[0] == (
        "tritium-server: error: unrecognized arguments: --host-polcy=gpu_0,numa-node=0"
    )


def test_help_says_each_default_once() -> None:
    text = run_cli("--help").stdout
    entries = re.split(r"\n  (?=-)", text)  # one chunk per flag
    assert len(entries) > 30
    for entry in entries:
        assert len(re.findall(r"default", entry)) <= 1, entry
    flat = re.sub(r"\s+", " ", text)
    assert "(default 512 MiB)" in flat and "536870912" not in flat


SLOW_INIT = """
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(6)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "INPUT0")]) for r in requests]
"""


def test_a_long_load_says_it_is_still_loading(start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.support.ensembles import add_python

    add_python(tmp_path / "models", "slow", SLOW_INIT)
    log = start_server([tmp_path / "models"], ["--allow-grpc=false", "--allow-metrics=false"]).log()
    still = re.findall(r"\] still loading 'slow' version 1, (\d+) s$", log, re.M)
    assert still and int(still[0]) >= 5, log
    assert log.index("still loading 'slow'") < log.index("successfully loaded 'slow' version 1")
