#!/usr/bin/env python3
"""Density benchmark: how much memory and start-up time each model costs, against Triton 2.51.

Scenarios (each server on loopback ports, stopped by its PID):

* ``onnx``: ``--onnx N`` (1,000) tiny ONNX models (an Add/Sub graph, FP32 [4]): seconds until
  all are READY, PSS of the whole process tree per model after loading, and again after every
  model answered one request (each answer checked: ``a + b`` and ``a - b``);
* ``python``: ``--python N`` (64) copies of Triton's add_sub ``model.py`` on tritium and on
  the real Triton 2.51 (nvidia-pytriton's ``tritonserver`` with its python backend), one
  after the other in the same run: PSS per model and seconds to READY, and their ratios;
* ``examples``: the example model repository (``examples/fetch_models.py``) with all of its
  models: total PSS and process count (skipped when it is not built).

``--reference-server PATH`` adds the same scenarios for another ``tritium-server`` (e.g. the
previous commit's checkout), at ``--reference-onnx`` models (its per-instance processes may not
fit a thousand). Memory is PSS (``/proc/<pid>/smaps_rollup``) summed over the server and every
process below it: RSS would count the pages forked workers share once per process.
Writes the ``density`` section of ``docs/performance.md``.

Usage::

    python benchmarks/density.py [--install-triton] [--triton-venv DIR] [--onnx 1000] [--python 64]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, write_section  # noqa: E402
from benchmarks.python_backend import ADD_SUB  # noqa: E402
from benchmarks.triton import TritonServer, add_arguments, prepare  # noqa: E402
from tests.support.server import ServerProcess, free_port  # noqa: E402
from tritium.perf import descendants_of  # noqa: E402

IO = """input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""
A = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
B = np.array([0.5, 0.25, 2.0, 8.0], np.float32)


def add_sub_onnx() -> bytes:
    """The ONNX model: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, FP32 [4]."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
        ],
        "add_sub",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("INPUT0", "INPUT1")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("OUTPUT0", "OUTPUT1")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def write_repository(root: Path, kind: str, n: int) -> list[str]:
    """N copies of the ``kind`` ("onnx" or "python") model under ``root``; their names."""
    blob = add_sub_onnx() if kind == "onnx" else b""
    names = []
    for i in range(n):
        name = f"m{i:04d}"
        version = root / name / "1"
        version.mkdir(parents=True)
        if kind == "onnx":
            (version / "model.onnx").write_bytes(blob)
            backend = "onnxruntime"
        else:
            (version / "model.py").write_text(textwrap.dedent(ADD_SUB))
            backend = "python"
        (root / name / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "{backend}"\n{IO}')
        names.append(name)
    return names


def pss_kib(pid: int) -> int:
    """``Pss:`` of one process, KiB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pss(pid: int) -> tuple[float, int, list[tuple[int, str, int]]]:
    """PSS of ``pid`` and everything below it (MiB), the number of processes, and each one's
    ``(pid, name, KiB)``."""
    parts = []
    for proc in [pid, *descendants_of(pid)]:
        try:
            name = Path(f"/proc/{proc}/comm").read_text().strip()
        except OSError:
            continue
        parts.append((proc, name, pss_kib(proc)))
    return sum(k for _p, _n, k in parts) / 1024, len(parts), parts


def wait_ready(http_port: int, n: int, started: float, timeout: float, alive: Callable[[], bool]) -> float:
    """Seconds from ``started`` until the repository index says ``n`` models are READY."""
    url = f"http://127.0.0.1:{http_port}/v2/repository/index"
    while time.monotonic() - started < timeout:
        if not alive():
            raise RuntimeError("the server exited while loading")
        try:
            request = urllib.request.Request(url, data=b"{}", method="POST")
            with urllib.request.urlopen(request, timeout=10) as response:
                index = json.loads(response.read())
            if sum(1 for m in index if m.get("state") == "READY") >= n:
                return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"not all {n} models READY within {timeout:.0f} s")


def answer_all(http_url: str, names: list[str]) -> int:
    """Send each model one request (8 at a time); the number that answered ``a + b``, ``a - b``."""
    import tritonclient.http as httpclient

    def one(name: str) -> bool:
        client = httpclient.InferenceServerClient(http_url)
        inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
        inputs[0].set_data_from_numpy(A)
        inputs[1].set_data_from_numpy(B)
        try:
            result = client.infer(name, inputs)
            return bool(
                np.array_equal(result.as_numpy("OUTPUT0"), A + B) and np.array_equal(result.as_numpy("OUTPUT1"), A - B)
            )
        finally:
            client.close()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return sum(pool.map(one, names))


def worker_names(server: ServerProcess) -> dict[int, str]:
    """pid -> what each worker process hosts, from the metrics endpoint (``tritium_worker_instances``);
    empty for a server without that metric."""
    try:
        with urllib.request.urlopen(server.metrics_url, timeout=30) as response:
            text = response.read().decode()
    except OSError:
        return {}
    out = {}
    for labels, value in re.findall(r"^tritium_worker_instances\{([^}]*)\} (\S+)$", text, re.M):
        fields = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        count = int(float(value))
        out[int(fields["pid"])] = f"worker: {fields['worker']} ({count} instance{'s' if count != 1 else ''})"
    return out


def endpoint_times(server: ServerProcess, rounds: int = 5) -> dict[str, float]:
    """Median milliseconds of the control endpoints that list every model: the repository index,
    every model's statistics, and a metrics scrape."""
    calls = {
        "repository index": urllib.request.Request(
            f"http://{server.http_url}/v2/repository/index", data=b"{}", method="POST"
        ),
        "statistics of every model": urllib.request.Request(f"http://{server.http_url}/v2/models/stats"),
        "metrics": urllib.request.Request(server.metrics_url),
    }
    out = {}
    for name, request in calls.items():
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            with urllib.request.urlopen(request, timeout=60) as response:
                response.read()
            times.append((time.perf_counter() - start) * 1000)
        out[name] = sorted(times)[rounds // 2]
    return out


@dataclass
class Result:
    """One server on one repository."""

    server: str
    scenario: str
    models: int
    ready_s: float
    pss_mib: float
    processes: int
    answered: int = -1  # models that answered correctly (-1: not asked)
    pss_after_mib: float = 0.0  # after every model answered once
    parts: list[tuple[int, str, int]] = field(default_factory=list)
    #: median milliseconds of the repository index, every model's statistics and a metrics scrape
    endpoints_ms: dict[str, float] = field(default_factory=dict)

    @property
    def per_model(self) -> float:
        return self.pss_mib / max(1, self.models)


def run_tritium(
    python: str, label: str, scenario: str, repo: Path, n: int, names: list[str], ask: bool, log: Path
) -> Result:
    """Start ``python -m tritium`` on ``repo`` (in a neutral folder: a checkout's own ``tritium``
    folder must not shadow the installed one), wait for ``n`` READY models, measure, stop it."""
    server = ServerProcess([repo], ["--exit-on-error=false"], log_path=log, python=python, cwd=log.parent)
    started = time.monotonic()
    server.start(wait_ready=False)
    try:
        assert server.proc is not None
        proc = server.proc
        ready = wait_ready(server.http_port, n, started, 900, lambda: proc.poll() is None)
        time.sleep(3)
        pss, count, parts = tree_pss(proc.pid)
        hosts = worker_names(server)
        parts = [(pid, hosts.get(pid, name), kib) for pid, name, kib in parts]
        result = Result(label, scenario, n, ready, pss, count, parts=parts)
        if ask:
            result.answered = answer_all(server.http_url, names)
            time.sleep(1)
            result.pss_after_mib = tree_pss(proc.pid)[0]
            result.endpoints_ms = endpoint_times(server)
        return result
    finally:
        server.stop()


def run_triton(venv: Path, repo: Path, n: int, log: Path) -> Result:
    """The real Triton 2.51 on ``repo``: seconds to ``n`` READY models and PSS."""
    triton = TritonServer(venv, repo, free_port(), free_port(), free_port(), log)
    started = time.monotonic()
    triton.start(timeout=900)
    try:
        assert triton.proc is not None
        ready = time.monotonic() - started  # Triton answers ready only once every model loaded
        time.sleep(3)
        pss, count, parts = tree_pss(triton.proc.pid)
        return Result("Triton 2.51", "python", n, ready, pss, count, parts=parts)
    finally:
        triton.stop()


def render(results: list[Result], args: argparse.Namespace) -> str:
    by = {(r.server, r.scenario): r for r in results}
    lines = [
        "## Density: memory and start-up per model",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/density.py`: tiny models written by "
        "the script, one server at a time on this machine (2 cores, 24 GiB); memory is the PSS of the server's "
        "whole process tree (the core, the worker template and every worker), read 3 s after the last model "
        "became READY. Each tritium framework backend runs the instances of all its models in one shared worker "
        "process; each python model instance has a process of its own, forked from the template process "
        "(see [architecture.md](architecture.md#processes)).",
        "",
        "| server | models | READY after (s) | PSS total (MiB) | PSS per model (MiB) | processes | after one request each |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        after = "—"
        if r.answered >= 0:
            after = f"{r.answered}/{r.models} correct; {r.pss_after_mib / r.models:.2f} MiB per model"
        lines.append(
            f"| {r.server}: {r.scenario} | {r.models:,} | {r.ready_s:.1f} | {r.pss_mib:,.0f} | {r.per_model:.2f} | "
            f"{r.processes} | {after} |"
        )
    for r in results:
        if r.endpoints_ms:
            timings = ", ".join(f"{name} {ms:,.0f} ms" for name, ms in r.endpoints_ms.items())
            lines += ["", f"With {r.models:,} models loaded ({r.server}), median of 5: {timings}."]
    lines += ["", "### Targets (issue 26)", "", "| target | measured | met |", "| --- | --- | --- |"]
    onnx = by.get(("tritium", "onnx"))
    if onnx is not None:
        ok = onnx.ready_s <= 60 and onnx.per_model <= 2 and onnx.answered == onnx.models
        lines.append(
            f"| {onnx.models:,} tiny ONNX models READY within 60 s, ≤ 2 MiB PSS each, each answers | "
            f"{onnx.ready_s:.1f} s, {onnx.per_model:.2f} MiB ({onnx.pss_after_mib / onnx.models:.2f} after a request "
            f"each), {onnx.answered}/{onnx.models} correct | {'yes' if ok else '**no**'} |"
        )
    ours, theirs = by.get(("tritium", "python")), by.get(("Triton 2.51", "python"))
    if ours is not None and theirs is not None:
        ratio = ours.per_model / theirs.per_model
        lines.append(
            f"| {ours.models} python models: PSS per model ≤ 0.7× Triton's | {ours.per_model:.1f} MiB against "
            f"{theirs.per_model:.1f} MiB: {ratio:.2f}× | {'yes' if ratio <= 0.7 else '**no**'} |"
        )
        lines.append(
            f"| {ours.models} python models: READY no later than Triton | {ours.ready_s:.1f} s against "
            f"{theirs.ready_s:.1f} s | {'yes' if ours.ready_s <= theirs.ready_s else '**no**'} |"
        )
    examples = by.get(("tritium", "examples"))
    if examples is not None:
        lines.append(
            f"| the example repository, all {examples.models} models: ≤ 900 MiB PSS | {examples.pss_mib:,.0f} MiB in "
            f"{examples.processes} processes | {'yes' if examples.pss_mib <= 900 else '**no**'} |"
        )
        lines += ["", "Where the example repository's memory is (PSS, MiB):", ""]
        lines += ["| process | PSS (MiB) |", "| --- | ---: |"]
        names = {"python": "the core (tritium-server)", "tritium-tmpl": "the template process"}
        for _pid, name, kib in sorted(examples.parts, key=lambda p: -p[2]):
            lines.append(f"| {names.get(name, name)} | {kib / 1024:,.0f} |")
    if args.reference_python:
        lines += [
            "",
            "Rows marked *reference* ran another tritium installation (`--reference-python`: the commit before this "
            "one's, for a before/after comparison) in the same run, the same way.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.add_argument("--onnx", type=int, default=1000, help="tiny ONNX models (0: skip)")
    parser.add_argument("--python", type=int, default=64, help="python models, tritium and Triton (0: skip)")
    parser.add_argument("--no-examples", action="store_true", help="skip the example repository")
    parser.add_argument(
        "--examples",
        type=Path,
        default=ROOT / "examples" / "model_repository",
        help="the example model repository (examples/fetch_models.py builds it)",
    )
    parser.add_argument("--no-triton", action="store_true", help="skip the real Triton")
    parser.add_argument("--server-python", default=sys.executable, help="the interpreter that runs tritium")
    parser.add_argument(
        "--reference-python", default="", help="the interpreter of another tritium installation to measure the same way"
    )
    parser.add_argument("--reference-onnx", type=int, default=64, help="ONNX models for the reference server")
    args = parser.parse_args()
    prepare(args)
    work = Path(tempfile.mkdtemp(prefix="tritium-density-"))
    results: list[Result] = []
    servers = [("tritium", args.server_python, args.onnx)]
    if args.reference_python:
        servers.append(("reference", args.reference_python, args.reference_onnx))
    try:
        for label, binary, onnx_n in servers:
            if onnx_n:
                repo = work / f"{label}-onnx"
                names = write_repository(repo, "onnx", onnx_n)
                results.append(
                    run_tritium(binary, label, "onnx", repo, onnx_n, names, True, work / f"{label}-onnx.log")
                )
                print(results[-1], flush=True)
                shutil.rmtree(repo)
            if args.python:
                repo = work / f"{label}-python"
                names = write_repository(repo, "python", args.python)
                results.append(
                    run_tritium(binary, label, "python", repo, args.python, names, False, work / f"{label}-python.log")
                )
                print(results[-1], flush=True)
                if label == "tritium" and not args.no_triton:
                    results.append(run_triton(args.triton_venv, repo, args.python, work / "triton-python.log"))
                    print(results[-1], flush=True)
                shutil.rmtree(repo)
            examples = args.examples
            if not args.no_examples and examples.is_dir():
                count = sum(1 for p in examples.iterdir() if (p / "config.pbtxt").exists())
                results.append(
                    run_tritium(binary, label, "examples", examples, count, [], False, work / f"{label}-examples.log")
                )
                print(results[-1], flush=True)
    finally:
        if os.environ.get("TRITIUM_KEEP_DENSITY_LOGS") != "1":
            shutil.rmtree(work, ignore_errors=True)
    write_section(args.output, "density", render(results, args))
    print(f"wrote the density section of {args.output}")


if __name__ == "__main__":
    main()
