"""Model warmup (``model_warmup``): zero data, random data and ``input_data_file`` samples run before READY.

The counting model and the expected answers are those recorded from real Triton 2.51 with the
same repository: 5 warmup executions (a batch_size 2 sample is two requests, count 2 runs twice),
so the first real request is the 6th; a failing sample fails the load with Triton's reason.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.support.clients import http_call
from tests.support.repo import add_model

COUNTING_PY = """
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.calls = []

    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            self.calls.append(a.copy())
            if a.shape[0] == 1 and float(a.reshape(-1)[0]) == 7.0:
                time.sleep(3)
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", np.stack([c.reshape(-1) for c in self.calls]).astype(np.float32)[None]),
                pb_utils.Tensor("CALLS", np.array([[len(self.calls)]], dtype=np.int32)),
            ]))
        return out
"""

CONFIG = """
backend: "python"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, 4 ] }, { name: "CALLS" data_type: TYPE_INT32 dims: [ 1 ] } ]
model_warmup [
  { name: "zeros" batch_size: 2 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } },
  { name: "random" batch_size: 1 count: 2 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] random_data: true } } },
  { name: "file" batch_size: 1 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "%s" } } }
]
"""

FAILING_PY = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        raise pb_utils.TritonModelException("warmup refused")
"""

FAILING_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]
"""


def build(repo: Path) -> None:
    for name, data_file in (
        ("warm_ok", "in0"),
        ("warm_nofile", "missing"),
        ("warm_escape", "../config.pbtxt"),
        ("warm_slow", "seven"),
    ):
        add_model(repo, name, CONFIG % data_file, files={"1/model.py": COUNTING_PY})
        (repo / name / "warmup").mkdir()
        np.arange(4, dtype=np.float32).tofile(repo / name / "warmup" / "in0")
        np.full(4, 7, dtype=np.float32).tofile(repo / name / "warmup" / "seven")
    add_model(repo, "warm_fail", FAILING_CONFIG, files={"1/model.py": FAILING_PY})


def post(server: Any, path: str) -> tuple[int, Any]:
    status, _, body = http_call(server, "POST", path)
    return status, (json.loads(body) if body else None)


def test_warmup(tmp_path: Path, start_server: Any) -> None:
    repo = tmp_path / "repo"
    build(repo)
    server = start_server([repo], ["--model-control-mode=explicit"])
    assert post(server, "/v2/repository/models/warm_ok/load") == (200, None)
    request = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
    status, _, body = http_call(server, "POST", "/v2/models/warm_ok/infer", json.dumps(request).encode())
    outputs = {o["name"]: o for o in json.loads(body)["outputs"]}
    assert status == 200 and outputs["CALLS"]["data"] == [6]  # as Triton: 5 warmup executions first
    seen = np.array(outputs["OUTPUT0"]["data"], dtype=np.float32).reshape(6, 4)
    assert seen[:2].tolist() == [[0.0] * 4, [0.0] * 4]  # zero_data, batch_size 2
    assert seen[4].tolist() == [0.0, 1.0, 2.0, 3.0]  # input_data_file
    assert seen[5].tolist() == [1.0, 2.0, 3.0, 4.0]  # the real request


def test_failing_warmup_fails_the_load(tmp_path: Path, start_server: Any) -> None:
    repo = tmp_path / "repo"
    build(repo)
    server = start_server([repo], ["--model-control-mode=explicit"])
    status, body = post(server, "/v2/repository/models/warm_fail/load")
    assert status == 400
    assert body["error"].startswith(
        "load failed for model 'warm_fail': version 1 is at UNAVAILABLE state: "
        "Invalid argument: failed to run warmup sample 'w': "
    )
    assert "warmup refused" in body["error"] and body["error"].endswith("; ;\n")
    status, body = post(server, "/v2/repository/models/warm_nofile/load")
    assert (status, body) == (
        400,
        {  # clients see the model's folder by role, not where it is (security.md)
            "error": "load failed for model 'warm_nofile': version 1 is at UNAVAILABLE state: "
            "Internal: failed to open text file for read <model-repository>/warm_nofile/warmup/missing: "
            "No such file or directory;\n"
        },
    )
    # the log's line names the folder as the answer does (the options table says where it is)
    assert (
        "failed to load 'warm_nofile' version 1: Internal: failed to open text file for read "
        "<model-repository>/warm_nofile/warmup/missing: No such file or directory"
    ) in server.log()
    assert str(repo) in server.log() and str(repo / "warm_nofile") not in server.log()
    status, body = post(server, "/v2/repository/models/warm_escape/load")
    assert status == 400 and "invalid input_data_file '../config.pbtxt'" in body["error"]
    index = {e["name"]: e for e in post(server, "/v2/repository/index")[1]}
    assert index["warm_fail"]["state"] == "UNAVAILABLE"
    assert index["warm_fail"]["reason"].startswith("Invalid argument: failed to run warmup sample 'w': ")


def test_model_is_not_ready_until_its_warmup_ran(tmp_path: Path, start_server: Any) -> None:
    repo = tmp_path / "repo"
    build(repo)
    server = start_server([repo], ["--model-control-mode=explicit"])
    result: list[Any] = []
    loader = threading.Thread(target=lambda: result.append(post(server, "/v2/repository/models/warm_slow/load")))
    loader.start()
    loading_seen = 0
    while loader.is_alive():
        ready = http_call(server, "GET", "/v2/models/warm_slow/ready")[0]
        (entry,) = [e for e in post(server, "/v2/repository/index")[1] if e["name"] == "warm_slow"]
        if entry.get("state") == "LOADING":  # still loading after the readiness answer: it said not ready
            loading_seen += 1
            assert ready == 400
        time.sleep(0.1)
    loader.join()
    assert result == [(200, None)]
    assert loading_seen > 0  # the warmup sample "file" sleeps 3 s in the model
    assert http_call(server, "GET", "/v2/models/warm_slow/ready")[0] == 200
