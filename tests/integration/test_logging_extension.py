"""Triton's logging extension, black-box: settings over HTTP and gRPC, formats, log files, workers' lines.

Answers checked against Triton 2.51 (``GET /v2/logging``, its 400/501 errors); ``json``
is tritium's format (one object a line). A python model logs through
``pb_utils.Logger``; its lines reach the server's log file naming the model and the
instance, and a level switched off at run time stops them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import http_call
from tests.support.repo import add_model
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(300)

_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            pb_utils.Logger.log_info(f"info line {int(x[0])}")
            pb_utils.Logger.log_warn(f"warning line {int(x[0])}")
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return out
"""
_CONFIG = """
name: "talker"
backend: "python"
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


@pytest.fixture(scope="module")
def json_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    root = tmp_path_factory.mktemp("logging")
    add_model(root / "models", "talker", _CONFIG, files={"1/model.py": _MODEL})
    log_file = root / "tritium.log"
    args = [f"--log-file={log_file}", "--log-format=json"]
    with ServerProcess([root / "models"], args, log_path=root / "stdout.log") as proc:
        yield proc, log_file


def _post(server: ServerProcess, path: str, body: Any) -> tuple[int, Any]:
    status, _, data = http_call(server, "POST", path, body if isinstance(body, bytes) else json.dumps(body).encode())
    return status, json.loads(data)


def _infer(server: ServerProcess, value: int) -> None:
    body = {"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [value]}]}
    status, _, data = http_call(server, "POST", "/v2/models/talker/infer", json.dumps(body).encode())
    assert status == 200, data


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def _wait_for(path: Path, text: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = _lines(path)
        if any(text in line["message"] for line in lines):
            return lines
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {path}:\n{path.read_text()}")


def test_settings_and_json_lines(json_server: tuple[ServerProcess, Path]) -> None:
    server, log_file = json_server
    status, _, body = http_call(server, "GET", "/v2/logging")
    assert (status, json.loads(body)) == (
        200,
        {
            "log_file": str(log_file),
            "log_info": True,
            "log_warning": True,
            "log_error": True,
            "log_verbose_level": 0,
            "log_format": "json",
        },
    )
    lines = _lines(log_file)
    started = [line for line in lines if line["message"].startswith("Started HTTPService")]
    assert started and started[0]["level"] == "INFO" and started[0]["model"] is None
    assert set(started[0]) == {"time", "level", "pid", "source", "model", "instance", "request_id", "message"}
    assert started[0]["time"].endswith("Z") and "T" in started[0]["time"]
    _infer(server, 11)
    lines = _wait_for(log_file, "warning line 11")  # the later of the two lines the model writes
    (info,) = [line for line in lines if line["message"] == "info line 11"]
    assert info["level"] == "INFO" and info["model"] == "talker" and info["instance"]
    assert info["source"].startswith("model.py:")
    assert info["pid"] != started[0]["pid"]  # the worker's process
    (warn,) = [line for line in lines if line["message"] == "warning line 11"]
    assert warn["level"] == "WARNING"


def test_level_switched_at_run_time(json_server: tuple[ServerProcess, Path]) -> None:
    server, log_file = json_server
    try:
        status, answer = _post(server, "/v2/logging", {"log_info": False})
        assert status == 200 and answer["log_info"] is False
        _infer(server, 22)
        lines = _wait_for(log_file, "warning line 22")  # warnings still on
        assert not any(line["message"] == "info line 22" for line in lines)
        status, answer = _post(server, "/v2/logging", {"log_info": True, "log_format": "ISO8601"})
        assert answer["log_info"] is True and answer["log_format"] == "ISO8601"
        _infer(server, 33)
        deadline = time.monotonic() + 30
        while "info line 33" not in log_file.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        (line,) = [text for text in log_file.read_text().splitlines() if "info line 33" in text]
        # ISO8601: "2026-12-02T16:03:54Z I <pid> model.py:<n>] talker (<instance>): info line 33"
        stamp, letter, _pid, source = line.split(" ")[:4]
        assert stamp.endswith("Z") and letter == "I" and source.startswith("model.py:")
        assert line.endswith("info line 33") and "talker (" in line
    finally:
        _post(server, "/v2/logging", {"log_info": True, "log_format": "json"})


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"log_file": "/tmp/other.log"}, 501, "log file location can not be updated through network protocol"),
        ({"log_format": "xml"}, 400, "invalid argument for log_format, got: xml"),
        ({"log_info": "yes"}, 400, "expected a boolean for 'log_info', got: \"yes\""),
        ({"log_verbose_level": -1}, 400, "expected an unsigned integer for 'log_verbose_level', got: -1"),
        ({"log_verbose_level": "1"}, 400, "expected an unsigned integer for 'log_verbose_level', got: \"1\""),
        (b"nope", 400, None),
    ],
)
def test_bad_settings(json_server: tuple[ServerProcess, Path], body: Any, status: int, message: str | None) -> None:
    server, _ = json_server
    _, _, before = http_call(server, "GET", "/v2/logging")
    got_status, got = _post(server, "/v2/logging", body)
    assert got_status == status
    if message is not None:
        assert got == {"error": message}
    assert http_call(server, "GET", "/v2/logging")[2] == before


def test_grpc_log_settings(json_server: tuple[ServerProcess, Path]) -> None:
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    server, log_file = json_server
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        settings = client.get_log_settings(as_json=True)["settings"]
        assert settings["log_file"] == {"string_param": str(log_file)}
        assert settings["log_info"] == {"bool_param": True}
        assert settings["log_format"] == {"string_param": "json"}
        answer = client.update_log_settings({"log_verbose_level": 2}, as_json=True)["settings"]
        assert answer["log_verbose_level"] == {"uint32_param": 2}
        answer = client.update_log_settings({"log_verbose_level": 0}, as_json=True)["settings"]
        assert answer["log_verbose_level"] == {"uint32_param": 0}
        with pytest.raises(InferenceServerException, match="invalid argument for log_format, got: xml") as info:
            client.update_log_settings({"log_format": "xml"})
        assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
        with pytest.raises(InferenceServerException, match="log file location") as info:
            client.update_log_settings({"log_file": "x"})
        assert info.value.status() == "StatusCode.UNIMPLEMENTED"
    finally:
        client.close()


def test_verbose_lines_at_run_time(json_server: tuple[ServerProcess, Path]) -> None:
    server, log_file = json_server
    try:
        _post(server, "/v2/logging", {"log_verbose_level": 1})  # a change is logged at verbose level ...
        _post(server, "/v2/logging", {"log_warning": True})
        verbose = [line for line in _lines(log_file) if line["level"] == "VERBOSE"]
        assert [line["message"] for line in verbose][-1].startswith("log settings now: {")
        _post(server, "/v2/logging", {"log_verbose_level": 0})
        _post(server, "/v2/logging", {"log_warning": True})  # ... and not once it is off again
        assert len([line for line in _lines(log_file) if line["level"] == "VERBOSE"]) == len(verbose)
    finally:
        _post(server, "/v2/logging", {"log_verbose_level": 0})


def test_bad_log_flags(tmp_path: Path) -> None:
    for flags, code, message in [
        (["--log-format=xml"], 2, "invalid choice: 'xml'"),
        ([f"--log-file={tmp_path}/no/such/dir/x.log"], 1, "failed to open log file"),
    ]:
        proc = ServerProcess([tmp_path], flags, log_path=tmp_path / "bad.log")
        proc.start(wait_ready=False)
        try:
            assert proc.wait_exit() == code
        finally:
            proc.stop()
        assert message in proc.log()
