"""Packaging: the wheel and the editable wheel build with every warning an error and say no warning.

The build runs setuptools' PEP 517 backend on a copy of the tracked files
(plus the native gRPC transport already built in place, so nothing is
compiled), without build isolation, as ``pip install [-e] .`` would run it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are not known")
    out = tmp_path_factory.mktemp("tree")
    for name in listed.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, out / name)
    for built in (ROOT / "frontends" / "kserve_grpc").glob("_native*.so"):
        shutil.copy2(built, out / "frontends" / "kserve_grpc" / built.name)
    return out


@pytest.mark.parametrize("hook", ["build_wheel", "build_editable"])
def test_build_has_no_warnings(tree: Path, tmp_path: Path, hook: str) -> None:
    code = f"import setuptools.build_meta as b; print('BUILT', b.{hook}({str(tmp_path)!r}))"
    env = dict(os.environ, PYTHONWARNINGS="error")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # else distutils warns that it skips byte-compiling
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, env=env, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "warning" not in output.replace(str(tmp_path), "").lower(), output
    # setup.py says on stderr what the gRPC endpoint's native transport is in this build (pip shows it with -v)
    # (built against gRPC C++ x.y, taken as built in place, or not built and why)
    native = list((ROOT / "frontends" / "kserve_grpc").glob("_native*.so"))
    outcomes = ("taken as built in place (",) if native else ("built against gRPC C++ ", "not built (")
    assert any(f"tritium.frontends.kserve_grpc._native {o}" in done.stderr for o in outcomes), done.stderr
    wheel = tmp_path / done.stdout.split("BUILT ")[-1].strip()
    if hook == "build_wheel":
        names = zipfile.ZipFile(wheel).namelist()
        assert "tritium/core/backend/native/include/triton/core/tritonbackend.h" in names
        assert "tritium/core/backend/native/shim.c" in names
        assert "tritium/py.typed" in names  # plugin authors' mypy sees the server API's types (PEP 561)
