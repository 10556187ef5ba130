#!/usr/bin/env python3
"""Does compiling the request hot path pay? Core CPU per request, compiled and not, in one run.

Lays out copies of the checkout as the ``tritium`` import package (the
package-dir mapping: ``core/`` is ``tritium.core``) in a temporary folder, one
per variant, and compiles the hot modules of each copy:

* ``pure``: no compiler, the reference;
* ``mypyc``: mypyc (the pinned mypy) over :data:`HOT`, with the two changes
  mypyc needs where the source has them: ``__slots__`` dropped from the
  compiled modules' classes (mypyc's native classes have fixed attributes
  already) and from :class:`~tritium.core.errors.TritonError`, which compiled
  classes subclass;
* ``cython``: Cython's pure-Python mode over :data:`HOT`, annotations not
  trusted (``annotation_typing=False``), so that the same source stays valid.

Then runs ``benchmarks/profile_core.py`` of each copy in turn, ``--repeat``
rounds, and prints the core's CPU per request (µs) of each run and the median
of each variant. Nothing is measured while a build runs.

Needs a C compiler; the ``cython`` variant needs ``pip install cython`` (it is
not a dependency) and is skipped with a message without it. Findings are in
docs/architecture.md, "Compiling the hot path".

Usage::

    python benchmarks/compile_hot_path.py [--repeat 4] [--requests 5000] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the modules the profile in docs/architecture.md names (paths in the checkout); core/model/model.py is
#: left out: its streaming path is an async generator, which mypyc does not compile
HOT = [
    "frontends/kserve_http/connection.py",
    "frontends/kserve_http/framing.py",
    "frontends/kserve_http/routes.py",
    "frontends/kserve_http/plain.py",
    "frontends/kserve_http/codec.py",
    "frontends/kserve_http/messages.py",
    "frontends/kserve_http/context.py",
    "frontends/kserve_http/router.py",
    "core/model/input_staging.py",
    "core/model/validation.py",
    "core/model/response_assembly.py",
    "core/observability/stats.py",
    "core/inference/request.py",
    "core/inference/response.py",
    "core/inference/types.py",
    "core/model/servable.py",
    "core/scheduler/base.py",
    "core/scheduler/default.py",
    "core/memory/arena.py",
    "core/memory/pool.py",
    "core/worker/channel.py",
    "core/worker/process.py",
    "core/worker/protocol.py",
]

_PACKAGES = ("core", "frontends", "backends", "proto", "integrations")
_SLOTS = re.compile(r"\n    __slots__ = \([^()]*\)\n")
_CPU = re.compile(r"Core CPU per request: (\d+)")


def lay_out(target: Path) -> Path:
    """Copy the checkout into ``target`` as the ``tritium`` package beside ``benchmarks/`` and ``tests/support``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.so", ".venv*", "results")
    shutil.copytree(ROOT / "tritium", target / "tritium", ignore=ignore)
    for package in _PACKAGES:
        shutil.copytree(ROOT / package, target / "tritium" / package, ignore=ignore)
    shutil.copytree(ROOT / "benchmarks", target / "benchmarks", ignore=ignore)
    shutil.copytree(ROOT / "tests" / "support", target / "tests" / "support", ignore=ignore)  # benchmarks import it
    shutil.copy2(ROOT / "tests" / "__init__.py", target / "tests" / "__init__.py")
    for name in ("_bytes_elements",):  # the BYTES extension as built in the checkout, if it is
        for built in (ROOT / "core").glob(f"{name}.*.so"):
            shutil.copy2(built, target / "tritium" / "core" / built.name)
    return target


def _drop_slots(tree: Path, paths: list[str]) -> None:
    for path in paths:
        file = tree / "tritium" / path
        file.write_text(_SLOTS.sub("\n", file.read_text()))


def build_mypyc(tree: Path) -> None:
    """Compile :data:`HOT` of ``tree`` with mypyc, in place (raises CalledProcessError on failure)."""
    _drop_slots(tree, [*HOT, "core/errors.py"])
    files = [f"tritium/{path}" for path in HOT]
    config = ROOT / "pyproject.toml"
    subprocess.run(
        [sys.executable, "-m", "mypyc", "--config-file", str(config), *files],
        cwd=tree,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def build_cython(tree: Path) -> None:
    """Compile :data:`HOT` of ``tree`` with Cython's pure-Python mode, in place."""
    files = [f"tritium/{path}" for path in HOT]
    directives = "language_level=3,annotation_typing=False,binding=True"
    subprocess.run(
        [sys.executable, "-m", "Cython.Build.Cythonize", "-i", "-q", "-X", directives, *files],
        cwd=tree,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def measure(tree: Path, requests: int, concurrency: int) -> int:
    """Core CPU per request in µs, from one ``profile_core.py`` run of ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}  # workers import tritium from the same copy
    script = tree / "benchmarks" / "profile_core.py"
    args = [str(script), "--requests", str(requests), "--concurrency", str(concurrency), "--traced", "10"]
    run = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True)
    found = _CPU.search(run.stdout)
    if run.returncode or found is None:
        raise RuntimeError(
            f"profile_core.py of {tree.name} failed (exit {run.returncode}):\n{run.stdout}\n{run.stderr[-3000:]}"
        )
    return int(found.group(1))


def compiled_modules(tree: Path) -> int:
    """How many of :data:`HOT` a process of ``tree`` imports from an extension module, not from source."""
    names = [f"tritium.{path[:-3].replace('/', '.')}" for path in HOT]
    check = f"import importlib; print(sum(importlib.import_module(n).__file__.endswith('.so') for n in {names!r}))"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    run = subprocess.run([sys.executable, "-c", check], cwd=tree, env=env, capture_output=True, text=True, check=True)
    return int(run.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=4, help="rounds; each round runs every variant once")
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    builders = {"mypyc": build_mypyc, "cython": build_cython}
    if importlib.util.find_spec("Cython") is None:
        print("cython: skipped (pip install cython to include it)")
        del builders["cython"]
    with tempfile.TemporaryDirectory(prefix="tritium-compile-") as tmp:
        trees = {"pure": lay_out(Path(tmp) / "pure")}
        print(f"pure: {compiled_modules(trees['pure'])} of {len(HOT)} modules load compiled")
        for name, build in builders.items():
            trees[name] = lay_out(Path(tmp) / name)
            build(trees[name])
            print(f"{name}: {compiled_modules(trees[name])} of {len(HOT)} modules load compiled")
        figures: dict[str, list[int]] = {name: [] for name in trees}
        for _ in range(args.repeat):
            for name, tree in trees.items():
                figures[name].append(measure(tree, args.requests, args.concurrency))
        print(f"\ncore CPU per request (µs), concurrency {args.concurrency}, {args.requests} requests per run:")
        reference = statistics.median(figures["pure"])
        for name, values in figures.items():
            median = statistics.median(values)
            print(f"  {name:7} median {median:6.1f} ({median / reference:.2f}× pure)  runs {values}")


if __name__ == "__main__":
    main()
