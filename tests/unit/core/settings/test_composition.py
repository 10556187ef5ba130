"""core/settings/composition.py: the [backends] table of plugins.toml and the refusal of other backends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tritium.core.errors import Code, TritonError
from tritium.core.settings.composition import Composition, check_backend, describe, read_composition


def test_a_plain_install_is_not_composed(tmp_path: Path) -> None:
    settings = {"frontends": {"http": {"enabled": True}, "grpc": {"enabled": False}, "metrics": {}}}
    assert read_composition(settings, tmp_path) == Composition(None, ("http", "metrics"))


def test_backends_table_names_the_chosen_backends_and_their_directory(tmp_path: Path) -> None:
    settings = {"backends": {"enabled": ["onnxruntime"], "directory": "backends"}, "frontends": {"http": {}}}
    assert read_composition(settings, tmp_path) == Composition(("onnxruntime",), ("http",), tmp_path / "backends")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"enabled": "onnxruntime"}, "plugins.toml: [backends] enabled must be a list of backend names"),
        ({"enabled": [1]}, "plugins.toml: [backends] enabled must be a list of backend names"),
        ({"enabled": [], "directory": 3}, "plugins.toml: [backends] directory must be a path"),
    ],
)
def test_malformed_backends_table_is_an_invalid_argument(tmp_path: Path, table: dict, message: str) -> None:
    with pytest.raises(TritonError) as err:
        read_composition({"backends": table}, tmp_path)
    assert err.value.code == Code.INVALID_ARG
    assert err.value.message == message


def test_describe_lists_backends_and_endpoints(tmp_path: Path) -> None:
    for name in ("b", "a"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"libtriton_{name}.py").write_text("")
    (tmp_path / "not_a_backend").mkdir()
    assert describe(Composition(None, ("http",)), tmp_path) == (
        f"backends: a, b (every backend in {tmp_path})\nendpoints: http"
    )
    assert describe(Composition(("a",), ()), tmp_path) == "backends: a (composed by build.py)\nendpoints: none"


def test_check_backend_refuses_a_backend_the_server_was_not_composed_with(tmp_path: Path) -> None:
    composition = Composition(("onnxruntime",), ("http", "grpc"), tmp_path)
    model = tmp_path / "models" / "m"
    (model / "1").mkdir(parents=True)
    check_backend(composition, "m", "onnxruntime", model, 1, tmp_path)  # chosen
    check_backend(composition, "e", "", model, 1, tmp_path)  # no backend (ensemble)
    check_backend(Composition(None, ()), "m", "python", model, 1, tmp_path)  # not composed
    with pytest.raises(TritonError) as err:
        check_backend(composition, "m", "python", model, 1, tmp_path)
    assert err.value.code == Code.INVALID_ARG
    assert err.value.message == (
        "model 'm' uses backend 'python', which this server was not composed with (backends: onnxruntime; "
        "endpoints: http, grpc); compose a server that has it with: python build.py --backend python ..."
    )
    (model / "1" / "libtriton_python.py").write_text("")  # the model brings its own library: Triton loads it
    check_backend(composition, "m", "python", model, 1, tmp_path)


def test_version_of_a_plain_install_lists_its_backends_and_endpoints() -> None:
    result = subprocess.run([sys.executable, "-m", "tritium", "--version"], capture_output=True, text=True)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tritium ")
    assert (
        lines[1].startswith("backends: ")
        and "onnxruntime, openvino, python, pytorch, tensorflow, tensorrt (every backend in " in lines[1]
    )
    assert lines[2] == "endpoints: http, grpc, metrics"
