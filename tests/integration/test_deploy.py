"""deploy/: the Kubernetes manifests and KServe runtimes validate offline and match the server.

kubernetes-validate checks the manifests against Kubernetes' own schemas (bundled,
no cluster and no network); check-jsonschema checks the KServe runtimes against
deploy/kserve/schema/servingruntime.schema.json. The flags, probe paths and
metric names the manifests use are checked against tritium itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tritium.cli import parse_args

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
KSERVE = ROOT / "deploy" / "kserve"
SCHEMA = KSERVE / "schema" / "servingruntime.schema.json"
MANIFESTS = sorted(K8S.glob("*.yaml"))
RUNTIMES = sorted(KSERVE.glob("*.yaml"))


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def kubernetes_validate(*paths: Path, version: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "kubernetes_validate", "--strict"]
    if version:
        cmd += ["-k", version]
    return subprocess.run(cmd + [str(p) for p in paths], capture_output=True, text=True, timeout=120)


def check_jsonschema(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(SCHEMA), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_kind_is_there() -> None:
    kinds = sorted(load(p)["kind"] for p in MANIFESTS)
    assert kinds == [
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "Service",
    ]
    assert sorted(load(p)["kind"] for p in RUNTIMES) == ["ClusterServingRuntime", "ServingRuntime"]


@pytest.mark.parametrize("version", ["1.29.0", None])
def test_manifests_validate_against_kubernetes_schemas(version: str | None) -> None:
    result = kubernetes_validate(*MANIFESTS, version=version)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(" passed for resource ") == len(MANIFESTS)


def test_kubernetes_validate_rejects_a_misspelt_field(tmp_path: Path) -> None:
    broken = load(K8S / "deployment.yaml")
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    path = tmp_path / "deployment.yaml"
    path.write_text(yaml.safe_dump(broken))
    result = kubernetes_validate(path)
    assert result.returncode != 0
    assert "readinessProbes" in result.stdout + result.stderr


def test_kserve_runtimes_validate_against_the_crd_schema() -> None:
    result = check_jsonschema(*RUNTIMES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["spec"].update(protocolVersions=["v3"]), "v3"),
        (lambda d: d["spec"]["supportedModelFormats"][0].update(autoselect=True), "autoselect"),
        (lambda d: d["spec"].update(container=[]), "container"),
    ],
)
def test_crd_schema_rejects_bad_runtimes(tmp_path: Path, change, field: str) -> None:
    runtime = load(KSERVE / "servingruntime.yaml")
    change(runtime)
    path = tmp_path / "servingruntime.yaml"
    path.write_text(yaml.safe_dump(runtime))
    result = check_jsonschema(path)
    assert result.returncode == 1
    assert field in result.stdout


def test_kserve_runtime_containers_are_valid_kubernetes_containers(tmp_path: Path) -> None:
    for runtime in RUNTIMES:
        spec = load(runtime)["spec"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "tritium"},
            "spec": {"containers": spec["containers"]},
        }
        path = tmp_path / f"{runtime.stem}-pod.yaml"
        path.write_text(yaml.safe_dump(pod))
        result = kubernetes_validate(path)
        assert result.returncode == 0, result.stdout + result.stderr


def test_kserve_runtimes_serve_onnx_pytorch_and_triton_formats() -> None:
    for runtime in RUNTIMES:
        spec = load(runtime)["spec"]
        formats = {f["name"]: f for f in spec["supportedModelFormats"]}
        assert sorted(formats) == ["onnx", "pytorch", "triton"]
        assert formats["onnx"]["autoSelect"] and formats["triton"]["autoSelect"]
        assert spec["protocolVersions"] == ["v2", "grpc-v2"]


def _containers() -> list[dict]:
    deployment = load(K8S / "deployment.yaml")["spec"]["template"]["spec"]["containers"]
    return deployment + [c for p in RUNTIMES for c in load(p)["spec"]["containers"]]


def test_every_container_command_line_is_accepted_by_tritium_server() -> None:
    for container in _containers():
        options, _ = parse_args(container["args"])
        assert options.model_repositories in (["/models"], ["/mnt/models"])
        assert options.exit_timeout_s == 30.0


def test_probes_use_the_v2_health_endpoints_and_services_name_every_port() -> None:
    container = load(K8S / "deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    assert container["startupProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"http": 8000, "grpc": 8001, "metrics": 8002}
    service = load(K8S / "service.yaml")
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {"http": 8000, "grpc": 8001, "metrics": 8002}
    grace = load(K8S / "deployment.yaml")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > 30 + 5  # --exit-timeout-secs + the preStop pause


def test_hpa_metrics_come_from_series_tritium_exports(start_server, tmp_path: Path) -> None:
    rules = yaml.safe_load(load(K8S / "prometheus-adapter-rules.yaml")["data"]["config.yaml"])["rules"]
    hpa = load(K8S / "hpa.yaml")
    assert sorted(m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]) == sorted(r["name"]["as"] for r in rules)
    repo = tmp_path / "models"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text(
        'backend: "identity"\nmax_batch_size: 8\n'
        'input [{name: "INPUT0", data_type: TYPE_FP32, dims: [4]}]\n'
        'output [{name: "OUTPUT0", data_type: TYPE_FP32, dims: [4]}]\n'
    )
    server = start_server([repo])
    exported = server.wait_metrics()
    used = {"nv_inference_pending_request_count", "nv_inference_queue_duration_us", "nv_inference_request_success"}
    text = "\n".join(r["seriesQuery"] + r["metricsQuery"] for r in rules)
    for name in used:
        assert name in text
        assert f'\n{name}{{model="m",version="1"}}' in "\n" + exported
