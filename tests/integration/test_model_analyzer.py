"""NVIDIA's Model Analyzer (``triton-model-analyzer``) profiling a running tritium-server in remote mode.

The YAML is docs/analyzer.md's: remote launch mode against a server in
explicit model-control mode, ``perf_analyzer_path: tritium-perf``, and
``cpu_only: true`` for the model. A tiny brute search of Triton's add_sub
python model (instance counts 1 and 2, concurrency 1 and 2, 500 ms windows)
must measure three configurations (the server's own and the two instance
counts), each at both concurrencies. Without ``cpu_only`` the variants are
``KIND_GPU``, which a CPU host refuses to load, and it profiles one.

Model Analyzer 1.58 does not install beside tritium's test dependencies
without changing them (its ``tritonclient[all]`` pulls ``cuda-python``,
which downgrades ``cuda-bindings``; it also brings numba, optuna and
SQLAlchemy), so it goes into a virtual environment of its own in pytest's
cache folder (``.pytest_cache/d/triton-model-analyzer``), made once and
reused by later runs.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.perf import perf_analyzer_missing
from tests.support.server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
VERSION = "1.58.0"
TRITIUM_PERF = Path(sys.executable).parent / "tritium-perf"

pytestmark = [
    pytest.mark.skipif(bool(perf_analyzer_missing()), reason=perf_analyzer_missing() or "-"),
    # the first run installs Model Analyzer (about a minute here), then each profile takes under one
    pytest.mark.timeout(1200),
]


@pytest.fixture(scope="module")
def model_analyzer(request: pytest.FixtureRequest) -> Path:
    """The ``model-analyzer`` command of a virtual environment holding ``triton-model-analyzer`` only."""
    venv = request.config.cache.mkdir("triton-model-analyzer") / f"venv-{VERSION}"
    done_marker = venv / "installed"
    if not done_marker.exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        install = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"triton-model-analyzer=={VERSION}"],
            capture_output=True,
            text=True,
            timeout=1200,
        )
        if install.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            pytest.fail(f"pip install triton-model-analyzer=={VERSION} failed:\n{install.stdout}{install.stderr}")
        done_marker.write_text(VERSION)
    return venv / "bin" / "model-analyzer"


def _profile(
    model_analyzer: Path, tmp_path: Path, max_instances: int, max_concurrency: int, cpu_only: bool
) -> tuple[subprocess.CompletedProcess[str], Path, ServerProcess]:
    """Serve add_sub (explicit model control), profile it in remote mode; return the run, its export folder
    and the (stopped) server."""
    repo = tmp_path / "models"
    shutil.copytree(ROOT / "examples" / "python_models" / "add_sub", repo / "add_sub")
    out = tmp_path / "ma"
    out.mkdir()
    model = "  add_sub:\n    cpu_only: true\n" if cpu_only else "  add_sub: {}\n"
    server = ServerProcess([repo], ["--model-control-mode=explicit"], log_path=tmp_path / "server.log")
    with server:
        (tmp_path / "profile.yaml").write_text(
            f"""model_repository: {repo}
triton_launch_mode: remote
triton_http_endpoint: {server.http_url}
triton_grpc_endpoint: {server.grpc_url}
triton_metrics_url: {server.metrics_url}
client_protocol: grpc
perf_analyzer_path: {TRITIUM_PERF}
perf_analyzer_timeout: 120
perf_analyzer_flags:
  measurement-interval: 500
  stability-percentage: 10000
  max-trials: 3
run_config_search_max_instance_count: {max_instances}
run_config_search_max_concurrency: {max_concurrency}
output_model_repository_path: {out / "variants"}
override_output_model_repository: true
export_path: {out / "export"}
checkpoint_directory: {out / "checkpoints"}
profile_models:
{model}"""
        )
        done = subprocess.run(
            [str(model_analyzer), "profile", "-f", str(tmp_path / "profile.yaml")],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
        )
    return done, out / "export", server


def test_remote_profile_of_add_sub_measures_each_instance_count(model_analyzer: Path, tmp_path: Path) -> None:
    done, export, server = _profile(model_analyzer, tmp_path, max_instances=2, max_concurrency=2, cpu_only=True)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "[Model Analyzer] Profile complete. Profiled 3 configurations for models: ['add_sub']" in output
    with open(export / "results" / "metrics-model-inference.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    measured = sorted((r["Model Config Path"], r["Instance Group"], int(r["Concurrency"])) for r in rows)
    assert measured == [
        ("add_sub_config_0", "1:CPU", 1),
        ("add_sub_config_0", "1:CPU", 2),
        ("add_sub_config_1", "2:CPU", 1),
        ("add_sub_config_1", "2:CPU", 2),
        ("add_sub_config_default", "1:CPU", 1),
        ("add_sub_config_default", "1:CPU", 2),
    ]
    assert all(float(r["Throughput (infer/sec)"]) > 0 for r in rows)
    # tritium loaded each variant Model Analyzer sent (with its config), and none failed
    log = server.log()
    assert "successfully loaded 'add_sub' version 1" in log and "failed to load" not in log, log


def test_without_cpu_only_the_gpu_variants_fail_to_load_and_one_configuration_is_profiled(
    model_analyzer: Path, tmp_path: Path
) -> None:
    done, export, server = _profile(model_analyzer, tmp_path, max_instances=1, max_concurrency=1, cpu_only=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Setting instance_group to [{'count': 1, 'kind': 'KIND_GPU'}]" in output
    assert (
        "Model add_sub_config_0 load failed: [StatusCode.INVALID_ARGUMENT] load failed for model 'add_sub': "
        "version 1 is at UNAVAILABLE state: Invalid argument: instance group add_sub_0 of model add_sub has kind "
        "KIND_GPU but no GPUs are available;"
    ) in output
    assert "[Model Analyzer] Profile complete. Profiled 1 configurations for models: ['add_sub']" in output
    with open(export / "results" / "metrics-model-inference.csv", newline="") as f:
        assert [r["Model Config Path"] for r in csv.DictReader(f)] == ["add_sub_config_default"]
