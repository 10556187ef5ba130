"""``tritium-perf``: perf_analyzer run the documented way (docs/deploy.md) against a tritium-server.

Black-box: the ``tritium-perf`` console script of this environment as a
subprocess, with no library path set by the test; a short measurement of
Triton's add_sub python model over HTTP and gRPC. The errors that name what
to install are checked by running the entry point with the binary or the
CUDA runtime package hidden.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.perf import perf_analyzer_missing
from tests.support.server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
TRITIUM_PERF = Path(sys.executable).parent / "tritium-perf"
# short fixed windows: on a small shared machine perf_analyzer's stability check fails
WINDOWS = ["--measurement-interval", "500", "--stability-percentage", "10000", "--max-trials", "3"]
needs_perf_analyzer = pytest.mark.skipif(bool(perf_analyzer_missing()), reason=perf_analyzer_missing() or "-")


@pytest.fixture
def add_sub_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    repo = tmp_path / "models"
    shutil.copytree(ROOT / "examples" / "python_models" / "add_sub", repo / "add_sub")
    with ServerProcess([repo], log_path=tmp_path / "server.log") as server:
        yield server


def _env_without_library_path() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    return env


@needs_perf_analyzer
def test_version() -> None:
    done = subprocess.run(
        [str(TRITIUM_PERF), "--version"], env=_env_without_library_path(), capture_output=True, text=True, timeout=60
    )
    # perf_analyzer prints its version on stderr
    assert (done.returncode, done.stderr.strip()) == (0, "Perf Analyzer Version 2.51.0 (commit unknown)"), done.stdout


@needs_perf_analyzer
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_measures_add_sub(add_sub_server: ServerProcess, protocol: str) -> None:
    url = add_sub_server.http_url if protocol == "http" else add_sub_server.grpc_url
    done = subprocess.run(
        [str(TRITIUM_PERF), "-m", "add_sub", "-u", url, "-i", protocol, *WINDOWS],
        env=_env_without_library_path(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"^ +Throughput: ([0-9.]+) infer/sec$", done.stdout, re.M)
    assert found is not None, done.stdout
    assert float(found.group(1)) > 0
    assert f"Concurrency: 1, throughput: {found.group(1)} infer/sec" in done.stdout


@needs_perf_analyzer
def test_perf_analyzers_own_errors_and_status_come_through(add_sub_server: ServerProcess) -> None:
    done = subprocess.run(
        [str(TRITIUM_PERF), "-m", "nope", "-u", add_sub_server.http_url, *WINDOWS],
        env=_env_without_library_path(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 99, done.stdout + done.stderr
    assert "error: failed to get model metadata: Request for unknown model: 'nope' is not found" in (
        done.stdout + done.stderr
    )


def _run_hiding(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run tritium-perf's entry point in a fresh interpreter after ``code`` hid something."""
    script = f"import sys\n{code}\nfrom tritium.perf_cli import main\nsys.exit(main(['--version']))\n"
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="perf_analyzer's wheel is Linux-only")
def test_missing_binary_names_what_to_install(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path))  # nothing named perf_analyzer on PATH either
    done = _run_hiding(f"sys.executable = {str(tmp_path / 'bin' / 'python')!r}", env)
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "tritium-perf: error: perf_analyzer not found: pip install 'tritonclient[http,grpc]==2.51.0' "
        "(or pip install 'tritium[analyzer]')\n",
    )


@pytest.mark.skipif(
    bool(perf_analyzer_missing()) and "libcudart" not in perf_analyzer_missing(),
    reason=perf_analyzer_missing() or "-",
)
def test_missing_cuda_runtime_names_what_to_install() -> None:
    done = _run_hiding("sys.modules['nvidia.cuda_runtime'] = None  # import fails as if not installed")
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "tritium-perf: error: perf_analyzer needs libcudart.so.12, even without a GPU: "
        "pip install nvidia-cuda-runtime-cu12\n",
    )
