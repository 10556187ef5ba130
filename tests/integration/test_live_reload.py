"""Live reload under load: a new version or a changed config replaces the serving one with zero failed requests.

Client threads (HTTP and gRPC) send requests without pause while the model is reloaded
several times (config overrides that change the instance count, a new version folder);
every request must succeed, and at least 2000 requests must be sent across the reloads.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support.clients import http_call
from tests.support.repo import add_model, identity_config

MIN_REQUESTS = 2000
RELOADS = 6


def config(count: int) -> str:
    return json.dumps(
        {
            "backend": "identity",
            "max_batch_size": 8,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]}],
            "instance_group": [{"count": count, "kind": "KIND_CPU"}],
        }
    )


def test_reloads_under_load_fail_no_request(tmp_path: Path, start_server: Any) -> None:
    repo = tmp_path / "repo"
    add_model(repo, "live", identity_config(dims="[ 4 ]"))
    server = start_server([repo], ["--model-control-mode=explicit", "--load-model=live"])
    data = np.arange(4, dtype=np.float32).reshape(1, 4)
    stop = threading.Event()
    counts = {"ok": 0}
    failures: list[str] = []
    lock = threading.Lock()

    def loop(module: Any, url: str) -> None:
        client = module.InferenceServerClient(url)
        inp = module.InferInput("INPUT0", [1, 4], "FP32")
        inp.set_data_from_numpy(data)
        while not stop.is_set():
            try:
                out = client.infer("live", [inp]).as_numpy("OUTPUT0")
                assert out.tolist() == data.tolist()
                with lock:
                    counts["ok"] += 1
            except Exception as exc:  # every failure is recorded and fails the test
                with lock:
                    failures.append(f"{module.__name__}: {exc}")

    targets = [(httpclient, server.http_url), (grpcclient, server.grpc_url)] * 2
    threads = [threading.Thread(target=loop, args=target) for target in targets]
    for t in threads:
        t.start()
    reloads = 0
    try:
        for i in range(RELOADS):
            if i == RELOADS // 2:
                (repo / "live" / "2").mkdir()  # a new version: served from the load on
                body = b""
            else:
                body = json.dumps({"parameters": {"config": config(1 + i % 2)}}).encode()
            status, _, reply = http_call(server, "POST", "/v2/repository/models/live/load", body)
            assert (status, reply) == (200, b"")
            reloads += 1
        stop.wait(1.0)
        while True:  # keep the load on until enough requests went through
            with lock:
                if counts["ok"] + len(failures) >= MIN_REQUESTS:
                    break
            status, _, _ = http_call(
                server,
                "POST",
                "/v2/repository/models/live/load",
                json.dumps({"parameters": {"config": config(1 + reloads % 2)}}).encode(),
            )
            assert status == 200
            reloads += 1
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert failures == []
    assert counts["ok"] >= MIN_REQUESTS and reloads >= RELOADS
    status, _, body = http_call(server, "POST", "/v2/repository/index")
    assert json.loads(body) == [
        {"name": "live", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"},
        {"name": "live", "version": "2", "state": "READY"},
    ]
