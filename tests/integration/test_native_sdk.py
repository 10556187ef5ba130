"""The backend SDK: shipped headers, tritium-config, tritium-backend new, installed backends, Triton compatibility."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.support.clients import http_call
from tests.support.native import EXAMPLES, build_backend, compiler
from tests.support.repo import add_model
from tests.support.server import ServerProcess
from tritium.core.backend.native.build import INCLUDE_DIR

EXAMPLE_SOURCES = sorted(EXAMPLES.glob("*/*.c"))


def test_tritium_config_prints_the_include_folder() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tritium.config_cli", "--include", "--cflags"],
        capture_output=True,
        text=True,
        check=True,
    )
    include, cflags = result.stdout.splitlines()
    assert Path(include) == INCLUDE_DIR
    assert cflags == f"-I{INCLUDE_DIR}"
    assert (Path(include) / "triton" / "core" / "tritonbackend.h").is_file()
    assert (Path(include) / "triton" / "core" / "tritonserver.h").is_file()


@pytest.mark.parametrize("language", ["c", "c++"])
def test_the_headers_compile_cleanly_as_c_and_cxx(tmp_path: Path, language: str) -> None:
    cc = compiler() if language == "c" else shutil.which("g++")
    if cc is None:
        pytest.skip("no C++ compiler")
    source = tmp_path / "all.c"
    source.write_text('#include "triton/core/tritonbackend.h"\nint tritium_header_check;\n')
    subprocess.run(
        [
            cc,
            "-x",
            language,
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsyntax-only",
            f"-I{INCLUDE_DIR}",
            str(source),
        ],
        check=True,
    )


@pytest.mark.parametrize("source", EXAMPLE_SOURCES, ids=[p.parent.name for p in EXAMPLE_SOURCES])
def test_examples_compile_unchanged_against_tritons_own_headers(tmp_path: Path, source: Path) -> None:
    """TRITON_BACKEND_INCLUDE: a folder holding Triton's triton/core/tritonbackend.h (C++-only headers)."""
    include = os.environ.get("TRITON_BACKEND_INCLUDE")
    if not include:
        pytest.skip("TRITON_BACKEND_INCLUDE is not set (a folder with Triton's triton/core/tritonbackend.h)")
    build_backend(source, tmp_path / f"libtriton_{source.stem}.so", include=Path(include), cxx=True)


@pytest.mark.parametrize("source", EXAMPLE_SOURCES, ids=[p.parent.name for p in EXAMPLE_SOURCES])
def test_examples_compile_without_warnings(tmp_path: Path, source: Path) -> None:
    cc = compiler()
    subprocess.run(
        [
            cc,
            "-Wall",
            "-Wextra",
            "-Werror",
            "-shared",
            "-fPIC",
            "-O2",
            "-pthread",
            f"-I{INCLUDE_DIR}",
            str(source),
            "-o",
            str(tmp_path / "lib.so"),
        ],
        check=True,
    )


@pytest.mark.parametrize("language", ["python", "c"])
def test_a_generated_backend_builds_serves_and_passes_its_own_test(tmp_path: Path, language: str) -> None:
    if language == "c":
        compiler()
    name = f"doubler_{language}"
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "tritium.backend_cli",
            "new",
            name,
            "--language",
            language,
            "--directory",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    folder = tmp_path / name
    files = [f"libtriton_{name}.py"] if language == "python" else ["build.sh", f"{name}.c"]
    build = (
        "# build: nothing to build (a Python backend)"
        if language == "python"
        else f"./build.sh   # build: -> libtriton_{name}.so"
    )
    serve = f"tritium-server --model-repository=models --backend-directory={tmp_path.resolve()}"
    assert made.stdout.splitlines() == [
        f"wrote {folder}/ (a {language} backend: OUTPUT0 = 2 * INPUT0):",
        *(
            f"  {f}"
            for f in sorted(
                ["README.md", *files, f"models/{name}_model/1/", f"models/{name}_model/config.pbtxt", f"test_{name}.py"]
            )
        ),
        "next:",
        f"  cd {folder}",
        f"  {build}",
        f"  pip install pytest 'tritonclient[http,grpc]'{' cffi' if language == 'c' else ''}   # what the test needs",
        f"  python -m pytest test_{name}.py   # test: serves models/ over HTTP and gRPC, checks exact values",
        f"  {serve}   # serve",
    ]
    expected = {"README.md", f"test_{name}.py", "models"} | (
        {f"libtriton_{name}.py"} if language == "python" else {f"{name}.c", "build.sh"}
    )
    assert {p.name for p in folder.iterdir()} == expected
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={folder}", str(folder)],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    # the serve command as printed (run in the folder; loopback ports added)
    server = ServerProcess(
        [],
        serve.split()[1:] + ["--allow-grpc=false", "--allow-metrics=false"],
        cwd=folder,
        log_path=tmp_path / "serve.log",
    )
    with server:
        body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1.5, -2]}]})
        status, _, reply = http_call(server, "POST", f"/v2/models/{name}_model/infer", body.encode())
        assert (status, json.loads(reply)["outputs"][0]["data"]) == (200, [3.0, -4.0])


def test_tritium_backend_new_refuses_a_bad_name(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tritium.backend_cli", "new", "../x", "--directory", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr == "tritium-backend: invalid backend name '../x': use letters, digits and '_'\n"


def _distribution(site: Path, package: str, backend: str, files: dict[str, str]) -> Path:
    """A minimal installed distribution on ``site`` declaring a ``tritium.backends`` entry point."""
    (site / package).mkdir(parents=True)
    for rel, text in files.items():
        (site / package / rel).write_text(textwrap.dedent(text))
    info = site / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[tritium.backends]\n{backend} = {package}\n")
    return site / package


def test_backends_from_installed_packages_are_found_by_entry_point(tmp_path: Path) -> None:
    site = tmp_path / "site"
    native = _distribution(site, "tritium_ext_native", "ext_identity", {"__init__.py": ""})
    build_backend(EXAMPLES / "identity" / "identity.c", native / "libtriton_ext_identity.so")
    _distribution(
        site,
        "tritium_ext_python",
        "ext_negate",
        {
            "__init__.py": """
            def TRITONBACKEND_ModelInstanceExecute(instance, requests):
                for request in requests:
                    request.respond({"OUTPUT0": -request.input("INPUT0")})
        """
        },
    )
    repo = tmp_path / "models"
    for model, backend in (("native", "ext_identity"), ("python", "ext_negate")):
        add_model(
            repo,
            model,
            f"""
            backend: "{backend}"
            max_batch_size: 0
            input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 2 ] }} ]
            output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2 ] }} ]
        """,
        )
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))}
    with ServerProcess([repo], ["--allow-grpc=false", "--allow-metrics=false"], tmp_path / "server.log", env) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            for model, expected in (("native", [1.5, -2.0]), ("python", [-1.5, 2.0])):
                tensor = httpclient.InferInput("INPUT0", [2], "FP32")
                tensor.set_data_from_numpy(np.array([1.5, -2.0], np.float32))
                assert client.infer(model, [tensor]).as_numpy("OUTPUT0").tolist() == expected
        finally:
            client.close()
