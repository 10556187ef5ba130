"""Build hook for the two compiled parts: the gRPC endpoint's native transport and the BYTES scan.

Everything else about the distribution is in pyproject.toml.

``tritium.core._bytes_elements`` (``core/_bytes_elements.c``, plain C and
Python's headers) counts a BYTES tensor's elements for the request checks
(:func:`tritium.core.model.validation.check_bytes_elements`). Without a C compiler
it is skipped with a message, and those checks run in Python: a large BYTES
input of elements of varied lengths then holds the event loop for about
0.3 µs per element.

The extension ``tritium.frontends.kserve_grpc._native`` is built from
``frontends/kserve_grpc/_native_*.cc`` against the gRPC C++ library found by
``pkg-config grpc++`` (Debian: ``libgrpc++-dev`` and ``pkg-config``, plus a
C++ compiler). When any of that is missing, or the build fails, it is skipped
with a message saying why, the install goes on, and the gRPC endpoint uses
grpc.aio (and says so in the log).

Every outcome is one ``tritium: ...`` line on stderr (built against gRPC C++
x.y, or not built and why). pip shows a build's output only with ``-v`` or
when the build fails, so after a plain ``pip install``
``python -m tritium.frontends.kserve_grpc`` says which transport the install
has, and why (docs/grpc_transport.md).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:  # `pip install -e .`: setuptools' "Editable installation ... be careful with folders in your
    # working directory" is information, not a warning about this project (its package-dir layout,
    # tritium.core = core/ ..., makes the editable install use setuptools' import finder): kept quiet
    from setuptools.warnings import InformationOnly

    warnings.filterwarnings("ignore", category=InformationOnly)
except ImportError:  # older setuptools: no such note
    pass

NAME = "tritium.frontends.kserve_grpc._native"
SOURCES = ["frontends/kserve_grpc/_native_transport.cc", "frontends/kserve_grpc/_native_module.cc"]
BYTES_SCAN = "tritium.core._bytes_elements"
#: where each extension's sources are, so where `pip install -e .` builds it in place
FOLDERS = {NAME: "frontends/kserve_grpc", BYTES_SCAN: "core"}
#: what the server does without each extension
FALLBACK = {
    NAME: "the gRPC endpoint will use grpc.aio",
    BYTES_SCAN: "BYTES inputs will be checked in Python, on the event loop",
}


#: what pip shows no line of without -v: how to ask the install afterwards
CHECK = "python -m tritium.frontends.kserve_grpc says which gRPC transport the server uses"


def _skip(reason: str, name: str = NAME) -> None:
    print(f"tritium: {name} not built ({reason}); {FALLBACK[name]}", file=sys.stderr)
    if name == NAME:
        print(f"tritium: {CHECK}", file=sys.stderr)


def _built(ext: Extension, how: str) -> None:
    """One line on stderr for an extension that is in the build: what it is built against."""
    against = f" against {BUILT_AGAINST[ext.name]}" if ext.name in BUILT_AGAINST else ""
    print(f"tritium: {ext.name} {how}{against}", file=sys.stderr)
    if ext.name == NAME:
        print(f"tritium: the gRPC endpoint will use its native transport; {CHECK}", file=sys.stderr)


def bytes_scan_extension() -> Extension:
    """The BYTES scan (C, no library but Python's headers)."""
    return Extension(BYTES_SCAN, ["core/_bytes_elements.c"], extra_compile_args=["-O2", "-fvisibility=hidden"])


def _pkg_config(flag: str) -> list[str]:
    result = subprocess.run(["pkg-config", flag, "grpc++"], capture_output=True, text=True, check=True)
    return shlex.split(result.stdout)


#: extension -> the library it is built against (``gRPC C++ <pkg-config --modversion grpc++>``)
BUILT_AGAINST: dict[str, str] = {}
#: why the native transport is not in the build: said once, when build_ext runs (pip runs this file
#: three times: for the build requirements, the metadata and the build)
NOT_BUILT: list[str] = []


def native_extensions() -> list[Extension]:
    """The extension when pkg-config knows grpc++; otherwise none (and why, on stderr)."""
    if shutil.which("pkg-config") is None:
        NOT_BUILT.append("pkg-config not found: install pkg-config and libgrpc++-dev")
        return []
    try:
        cflags, libs = _pkg_config("--cflags"), _pkg_config("--libs")
        BUILT_AGAINST[NAME] = "gRPC C++ " + " ".join(_pkg_config("--modversion"))
    except subprocess.CalledProcessError:
        NOT_BUILT.append("pkg-config finds no grpc++: install libgrpc++-dev")
        return []
    return [
        Extension(
            NAME,
            SOURCES,
            language="c++",
            depends=["frontends/kserve_grpc/_native_transport.h"],
            extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden", *cflags],
            extra_link_args=libs,
        )
    ]


class OptionalBuildExt(build_ext):
    """build_ext that reports a failed build of an extension instead of failing the install.

    A wheel built from a tree where ``pip install -e .`` already compiled the
    extension in place (build.py copies that tree) reuses that binary when it
    is newer than every source, instead of compiling it again.
    """

    def run(self) -> None:
        super().run()
        for reason in NOT_BUILT:
            _skip(reason)

    def build_extension(self, ext: Extension) -> None:
        target = Path(self.get_ext_fullpath(ext.name))
        in_place = Path(FOLDERS[ext.name]) / Path(self.get_ext_filename(ext.name)).name
        sources = [Path(f) for f in [*ext.sources, *ext.depends]]
        if (
            not self.inplace
            and in_place.exists()
            and all(in_place.stat().st_mtime >= f.stat().st_mtime for f in sources)
        ):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(in_place, target)
            _built(ext, f"taken as built in place ({in_place})")
            return
        try:
            super().build_extension(ext)
        except Exception as exc:  # a compiler error, a missing header: the fallback remains
            _skip(f"build failed: {exc}", ext.name)
            return
        _built(ext, "built")


setup(ext_modules=[bytes_scan_extension(), *native_extensions()], cmdclass={"build_ext": OptionalBuildExt})
