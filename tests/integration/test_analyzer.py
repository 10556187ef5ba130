"""tritium-analyzer --quick on add_sub (batching): a report with its plots, and a best config that loads and serves.

Black-box: the ``tritium-analyzer`` console script as a subprocess (it starts
its own tritium-servers and perf_analyzer); then a tritium-server on the
best ``config.pbtxt`` answers exact values.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.clients import http_call
from tests.support.perf import perf_analyzer_missing
from tests.support.server import ServerProcess

pytest.importorskip("matplotlib")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(bool(perf_analyzer_missing()), reason=perf_analyzer_missing() or "-")
def test_quick_search_on_add_sub(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    shutil.copytree(ROOT / "examples" / "python_models" / "add_sub", repo / "add_sub")
    config = repo / "add_sub" / "config.pbtxt"
    config.write_text(config.read_text().replace('backend: "python"', 'backend: "python"\nmax_batch_size: 8'))
    out = tmp_path / "report"
    analyzer = Path(sys.executable).parent / "tritium-analyzer"
    # run from a folder holding one named "tritium" (a clone's parent): it must not shadow the package
    (tmp_path / "tritium").mkdir()
    done = subprocess.run(
        [
            str(analyzer),
            "--model-repository=models",
            "--model=add_sub",
            "--quick",
            f"--output={out}",
            "--latency-budget-ms=5000",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == f"report: {out / 'report.html'}; config: {out / 'best' / 'config.pbtxt'}"
    results = json.loads((out / "results.json").read_text())
    assert [r["label"] for r in results["results"]] == ["i1", "i1 dyn b8 100us", "i2", "i2 dyn b8 100us"]
    for r in results["results"]:
        assert r["error"] == "" and [p["concurrency"] for p in r["points"]] == [1, 4]
        assert all(p["throughput"] > 0 and p["p99_us"] >= p["p50_us"] > 0 for p in r["points"])
    best = results["best"]
    assert best["met"] is True
    label = next(r["label"] for r in results["results"] if r["candidate"] == best["candidate"])
    assert done.stdout.startswith(f"best: {label} at concurrency {best['concurrency']}: ")
    page = (out / "report.html").read_text()
    assert f"Best configuration: <b>{label}</b>" in page and "p99 latency &lt;= 5000 ms" in page
    for png in ("throughput_vs_p99.png", "cpu_per_inference.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f'<img src="{png}"' in page
    assert "Configuration names: i&lt;N&gt;: N model instances (instance_group count);" in page
    # best/config.pbtxt is an edit of the model's own file: its comments kept, only the changed fields differ
    text = (out / "best" / "config.pbtxt").read_text()
    original = config.read_text()
    assert text.startswith('# Triton\'s python_backend "add_sub" example: OUTPUT0 = INPUT0 + INPUT1')
    changed = [
        line
        for line in difflib.unified_diff(original.splitlines(), text.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    count = best["candidate"]["instances"]
    batcher = ["+dynamic_batching {", "+  max_queue_delay_microseconds: 100", "+}"]
    assert changed == [
        "-instance_group [ { kind: KIND_CPU } ]",
        f"+instance_group [ {{ kind: KIND_CPU count: {count} }} ]",
        *(batcher if best["candidate"]["batcher"] else []),
    ]
    # the best configuration loads and serves
    serve = tmp_path / "serve"
    shutil.copytree(repo / "add_sub", serve / "add_sub")
    (serve / "add_sub" / "config.pbtxt").write_text(text)
    with ServerProcess([serve], ["--allow-grpc=false", "--allow-metrics=false"], log_path=tmp_path / "s.log") as server:
        body = {
            "inputs": [{"name": f"INPUT{i}", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]} for i in (0, 1)]
        }
        status, _, reply = http_call(server, "POST", "/v2/models/add_sub/infer", json.dumps(body).encode())
        assert status == 200
        outputs = {o["name"]: o["data"] for o in json.loads(reply)["outputs"]}
        assert outputs == {"OUTPUT0": [2.0, 4.0, 6.0, 8.0], "OUTPUT1": [0.0, 0.0, 0.0, 0.0]}


@pytest.mark.skipif(bool(perf_analyzer_missing()), reason=perf_analyzer_missing() or "-")
def test_quick_search_on_efficientnet(tmp_path: Path) -> None:
    """The example EfficientNet-Lite0 (onnxruntime), narrowed to one instance count and one concurrency."""
    pytest.importorskip("efficientnet_lite_pytorch")
    repo, model = tmp_path / "models", "efficientnet_lite0_onnx"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "fetch_models.py"),
            "--model",
            model,
            "--output",
            str(repo),
            "--images",
            str(tmp_path / "images"),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    out = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tritium.analyzer.cli",
            f"--model-repository={repo}",
            f"--model={model}",
            "--quick",
            "--instances=1",
            "--concurrency=2",
            f"--output={out}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((out / "results.json").read_text())
    assert [(r["label"], r["error"], len(r["points"])) for r in results["results"]] == [
        ("i1", "", 1),
        ("i1 dyn b8 100us", "", 1),
    ]
    text = (out / "best" / "config.pbtxt").read_text()
    assert 'platform: "onnxruntime_onnx"' in text and "count: 1" in text
    (repo / model / "config.pbtxt").write_text(text)  # the best configuration loads and serves
    with ServerProcess([repo], ["--allow-grpc=false", "--allow-metrics=false"], log_path=tmp_path / "s.log") as server:
        body = {
            "inputs": [
                {
                    "name": "input",
                    "datatype": "FP32",
                    "shape": [1, 3, 224, 224],
                    "parameters": {"binary_data_size": 3 * 224 * 224 * 4},
                }
            ],
            "outputs": [{"name": "logits", "parameters": {"classification": 1}}],
        }
        head = json.dumps(body).encode()
        status, _, reply = http_call(
            server,
            "POST",
            f"/v2/models/{model}/infer",
            head + bytes(3 * 224 * 224 * 4),
            {"Inference-Header-Content-Length": str(len(head))},
        )
        assert status == 200, reply
        (top,) = json.loads(reply)["outputs"][0]["data"]
        assert top.count(":") == 2  # "<score>:<index>:<label>"


def test_bad_arguments(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "tritium.analyzer.cli"]
    done = subprocess.run([*run, f"--model-repository={tmp_path}", "--model=nope"], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (2, f"tritium-analyzer: error: model 'nope' is not in {tmp_path}\n")
    done = subprocess.run([*run, "--model=x"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "tritium-analyzer: error: the following arguments are required: --model-repository",
        "Run 'tritium-analyzer --help' for the flags.",
    ]


def test_a_run_past_its_bound_is_the_candidates_error_with_the_servers_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A perf_analyzer run that never ends is cut at the run bound and reported with the server's
    statistics and log tail (a stuck request shows there), and the search goes on."""
    from tritium import perf
    from tritium.analyzer.run import measure_candidate
    from tritium.analyzer.space import QUICK, Candidate

    assert QUICK.run_timeout_s == 120.0  # --quick: a stuck run costs 2 minutes, not 10
    stuck = tmp_path / "perf_analyzer"
    stuck.write_text("#!/bin/sh\nexec sleep 600\n")
    stuck.chmod(0o755)
    monkeypatch.setattr(perf, "perf_analyzer_command", lambda: ([str(stuck)], dict(os.environ)))
    repo = tmp_path / "models"
    shutil.copytree(ROOT / "examples" / "python_models" / "add_sub", repo / "add_sub")
    result = measure_candidate(repo, "add_sub", Candidate(1), tmp_path / "work", (1, 4), [], run_timeout_s=1.0)
    assert result.points == []
    assert result.error.splitlines()[0] == "concurrency 1: perf_analyzer ran past 1 s:"
    assert "server statistics: " in result.error and '"name":"add_sub"' in result.error.replace(" ", "")
    assert "server log:" in result.error


@pytest.mark.skipif(bool(perf_analyzer_missing()), reason=perf_analyzer_missing() or "-")
def test_a_server_that_cannot_start_is_named_with_its_reason_on_the_console(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    shutil.copytree(ROOT / "examples" / "python_models" / "add_sub", repo / "add_sub")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tritium.analyzer.cli",
            f"--model-repository={repo}",
            "--model=add_sub",
            "--instances=1",
            "--concurrency=1",
            f"--output={tmp_path / 'report'}",
            "--server-arg=--no-such-flag",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    warnings = [line for line in done.stderr.splitlines() if "not measured" in line]
    assert len(warnings) == 1 and warnings[0].endswith(
        "i1: not measured: tritium-server exited with 2: tritium-server: error: unrecognized arguments: --no-such-flag"
    ), done.stderr
