"""Build C backends for the tests with the system's C compiler (skip when there is none)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tritium.core.backend.native.build import INCLUDE_DIR

__all__ = ["EXAMPLES", "TEST_BACKENDS", "compiler", "build_backend"]

ROOT = Path(__file__).resolve().parents[2]
#: examples/native_backends: identity/, repeat/, accumulate/
EXAMPLES = ROOT / "examples" / "native_backends"
#: tests/integration/native_backends: misbehaving backends for error paths
TEST_BACKENDS = ROOT / "tests" / "integration" / "native_backends"


def compiler() -> str:
    """The C compiler ($CC, gcc or cc); skips the test when there is none, or no Python.h for the shim."""
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        pytest.skip("no Python development headers (Python.h) to build the native-backend shim")
    for name in (os.environ.get("CC"), "gcc", "cc"):
        if name and shutil.which(name):
            return name
    pytest.skip("no C compiler (gcc/cc) to build native backends")


def build_backend(source: Path, target: Path, include: Path = INCLUDE_DIR, cxx: bool = False) -> Path:
    """Compile ``source`` into the shared library ``target`` (the documented one-line command).

    :param include: the folder holding ``triton/core/tritonbackend.h``.
    :param cxx: compile as C++ with g++ (Triton's own headers are C++-only).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    cc = shutil.which("g++") if cxx else compiler()
    if cc is None:
        pytest.skip("no C++ compiler (g++)")
    command = [
        cc,
        *(["-x", "c++"] if cxx else []),
        "-shared",
        "-fPIC",
        "-O2",
        "-pthread",
        f"-I{include}",
        str(source),
        "-o",
        str(target),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stderr}"
    return target
