"""CPU, GPU and summary metrics, black-box, and the Grafana dashboard in deploy/ against them.

``nv_cpu_*`` from /proc (values checked against /proc/meminfo), ``nv_gpu_*`` through NVML:
on this GPU-less machine a stand-in ``pynvml`` module on the server's ``PYTHONPATH``
answers as NVML does for one GPU, and without it the GPU families are absent with one log
line. ``--metrics-config summary_latencies=true`` gives Triton's summaries with exact
counts. Every metric the dashboard queries must exist on the running server.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clients import http_call
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "tritium-dashboard.json"

_FAKE_NVML = """
class NVMLError(Exception):
    pass

class _Memory:
    total = 80 * 2**30
    used = 3 * 2**30

class _Rates:
    gpu = 42

_energy = [1000000]

def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return 1
def nvmlDeviceGetHandleByIndex(i): return ("gpu", i)
def nvmlDeviceGetUUID(h): return b"GPU-fake-0000"
def nvmlDeviceGetUtilizationRates(h): return _Rates()
def nvmlDeviceGetMemoryInfo(h): return _Memory()
def nvmlDeviceGetPowerUsage(h): return 123456
def nvmlDeviceGetEnforcedPowerLimit(h): return 700000
def nvmlDeviceGetTotalEnergyConsumption(h):
    _energy[0] += 5000
    return _energy[0]
"""


def _scrape(server: ServerProcess) -> str:
    with urllib.request.urlopen(server.metrics_url, timeout=30) as resp:
        return resp.read().decode()


def _samples(text: str) -> dict[str, list[tuple[str, float]]]:
    out: dict[str, list[tuple[str, float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _, labels = head.partition("{")
        out.setdefault(name, []).append((labels.rstrip("}"), float(value)))
    return out


def _infer(server: ServerProcess, n: int) -> None:
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}).encode()
    for _ in range(n):
        status, _, data = http_call(server, "POST", "/v2/models/ident/infer", body)
        assert status == 200, data


@pytest.fixture(scope="module")
def gpu_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("metrics")
    add_model(root / "models", "ident", identity_config(dims="[ 4 ]", max_batch_size=0))
    (root / "fake").mkdir()
    (root / "fake" / "pynvml.py").write_text(_FAKE_NVML)
    args = ["--metrics-config=summary_latencies=true", "--metrics-interval-ms=50", "--allow-grpc=false"]
    with ServerProcess(
        [root / "models"], args, log_path=root / "server.log", env={"PYTHONPATH": str(root / "fake")}
    ) as proc:
        yield proc


def test_cpu_metrics(gpu_server: ServerProcess) -> None:
    samples = _samples(_scrape(gpu_server))
    (utilization,) = samples["nv_cpu_utilization"]
    assert utilization[0] == "" and 0.0 <= utilization[1] <= 1.0
    total = int(re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text()).group(1)) * 1024  # type: ignore[union-attr]
    assert samples["nv_cpu_memory_total_bytes"] == [("", float(total))]
    (used,) = samples["nv_cpu_memory_used_bytes"]
    assert 0 < used[1] < total


def test_gpu_metrics_through_nvml(gpu_server: ServerProcess) -> None:
    deadline = time.monotonic() + 30
    while True:  # energy is counted from the server's start: wait for a sample after it
        samples = _samples(_scrape(gpu_server))
        if samples.get("nv_energy_consumption", [("", 0.0)])[0][1] > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    label = 'gpu_uuid="GPU-fake-0000"'
    assert samples["nv_gpu_utilization"] == [(label, 0.42)]
    assert samples["nv_gpu_memory_total_bytes"] == [(label, 80.0 * 2**30)]
    assert samples["nv_gpu_memory_used_bytes"] == [(label, 3.0 * 2**30)]
    assert samples["nv_gpu_power_usage"] == [(label, 123.456)]
    assert samples["nv_gpu_power_limit"] == [(label, 700.0)]
    (energy,) = samples["nv_energy_consumption"]
    assert energy[0] == label and energy[1] > 0 and energy[1] % 5 == 0


def test_summaries_count_every_request(gpu_server: ServerProcess) -> None:
    before = _samples(_scrape(gpu_server))
    base = dict(before.get("nv_inference_request_summary_us_count", []))
    _infer(gpu_server, 5)
    samples = _samples(_scrape(gpu_server))
    labels = 'model="ident",version="1"'
    for family in ("request", "queue", "compute_input", "compute_infer", "compute_output"):
        name = f"nv_inference_{family}_summary_us"
        assert dict(samples[name + "_count"])[labels] == base.get(labels, 0) + 5
        quantiles = {lab: v for lab, v in samples[name] if lab.startswith('model="ident"')}
        assert sorted(quantiles) == [
            f'model="ident",quantile="{q}",version="1"' for q in ("0.5", "0.9", "0.95", "0.99", "0.999")
        ]
        values = [
            quantiles[f'model="ident",quantile="{q}",version="1"'] for q in ("0.5", "0.9", "0.95", "0.99", "0.999")
        ]
        assert values == sorted(values) and values[0] >= 0
    request_sum = dict(samples["nv_inference_request_summary_us_sum"])[labels]
    duration = dict(samples["nv_inference_request_duration_us"])[labels]
    assert abs(request_sum - duration) <= 5 + 0.01 * duration  # the same requests, µs rounding apart


def test_dashboard_queries_only_existing_metrics(gpu_server: ServerProcess) -> None:
    _infer(gpu_server, 1)
    exposed = set(_samples(_scrape(gpu_server)))
    dashboard = json.loads(DASHBOARD.read_text())
    queried: set[str] = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            queried |= set(re.findall(r"\b((?:nv|tritium)_[a-z0-9_]+)", target["expr"]))
    for variable in dashboard["templating"]["list"]:
        queried |= set(re.findall(r"\b((?:nv|tritium)_[a-z0-9_]+)", json.dumps(variable.get("query", ""))))
    assert {"nv_cpu_utilization", "nv_gpu_utilization", "nv_inference_request_summary_us"} <= queried
    assert sorted(queried - exposed) == []


def test_gpu_metrics_absent_without_nvml(tmp_path: Path) -> None:
    add_model(tmp_path / "models", "ident", identity_config(dims="[ 4 ]", max_batch_size=0))
    with ServerProcess([tmp_path / "models"], ["--allow-grpc=false"], log_path=tmp_path / "s.log") as proc:
        samples = _samples(_scrape(proc))
        assert not [name for name in samples if name.startswith("nv_gpu") or name == "nv_energy_consumption"]
        assert "nv_cpu_utilization" in samples
        assert not [name for name in samples if "summary" in name]  # summary_latencies is off by default
    log = proc.log()
    assert log.count("GPU metrics unavailable") == 1
    assert "Traceback" not in log and " E1" not in log


def test_no_cpu_metrics_and_no_counters(tmp_path: Path) -> None:
    add_model(tmp_path / "models", "ident", identity_config(dims="[ 4 ]", max_batch_size=0))
    args = [
        "--allow-grpc=false",
        "--allow-cpu-metrics=false",
        "--allow-gpu-metrics=false",
        "--metrics-config=counter_latencies=false",
    ]
    with ServerProcess([tmp_path / "models"], args, log_path=tmp_path / "s.log") as proc:
        samples = _samples(_scrape(proc))
        assert not [name for name in samples if name.startswith("nv_cpu") or name.endswith("_duration_us")]
        assert "nv_inference_request_success" in samples


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--metrics-config=histogram_latencies=true", "tritium builds no latency histograms"),
        ("--metrics-config=summary_quantiles=0.5", "summary_quantiles must be '<quantile>:<error>,...'"),
        ("--metrics-config=summary_latencies=maybe", "summary_latencies must be true or false"),
        ("--metrics-config=colour=blue", "unknown --metrics-config setting 'colour'"),
        ("--metrics-interval-ms=0", "--metrics-interval-ms must be >= 1"),
    ],
)
def test_bad_metrics_flags(tmp_path: Path, flag: str, message: str) -> None:
    proc = ServerProcess([tmp_path], [flag], log_path=tmp_path / "bad.log")
    proc.start(wait_ready=False)
    try:
        assert proc.wait_exit() == 2
    finally:
        proc.stop()
    assert message in proc.log()
