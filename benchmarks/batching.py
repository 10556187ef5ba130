#!/usr/bin/env python3
"""Dynamic-batching benchmark: what batching gains on tritium and on the real Triton 2.51, one run.

Runs (perf_analyzer, gRPC, the same settings for every server):

* ``add_sub`` — Triton's add_sub python model (FP32 [4] + [4], ``max_batch_size:
  64``) computing a whole ``execute`` call's requests with one numpy operation,
  with ``dynamic_batching { max_queue_delay_microseconds: 500 }``
  (``add_sub_dyn``) and without (``add_sub_single``), concurrency 16, on
  tritium and on Triton;
* ``pybatch`` — the same with one FP32 [16] input and ``tanh`` (the earlier
  benchmark's model, kept for comparison);
* ``efficientnet_lite0_onnx`` (examples/fetch_models.py), with
  ``dynamic_batching { max_queue_delay_microseconds: 2000 }`` and without,
  concurrency 8, on tritium only (the Triton here has only the python backend).
  The server runs with ``--disable-auto-complete-config``, else the onnxruntime
  backend would give the "without" copy a ``dynamic_batching {}`` too.

Targets (issue 12): tritium ≥ 1.0 × Triton on ``add_sub_dyn``, and tritium's
gain from batching (dyn / single) ≥ Triton's. Writes the ``batching`` section
of ``docs/performance.md``.

Usage::

    python benchmarks/batching.py [--install] [--triton-venv DIR] [--skip-triton] [--skip-efficientnet]
                                  [--quick] [--repeat N] [--note "measured while the machine was busy"]
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from benchmarks.common import ROOT, Row, run_perf, write_section
from benchmarks.triton import TritonServer, add_arguments, prepare
from tests.support.server import ServerProcess, free_port

EFFICIENTNET = "efficientnet_lite0_onnx"
PYBATCH = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        inputs = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        rows = [x.shape[0] for x in inputs]
        result = np.tanh(np.concatenate(inputs) * 2.0)  # the whole batch at once
        responses, start = [], 0
        for n in rows:
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", result[start : start + n])]))
            start += n
        return responses
"""
PYBATCH_CONFIG = """
backend: "python"
max_batch_size: 64
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
{batching}
"""
ADD_SUB = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        a = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        b = [pb_utils.get_input_tensor_by_name(r, "INPUT1").as_numpy() for r in requests]
        rows = [x.shape[0] for x in a]
        x, y = np.concatenate(a), np.concatenate(b)  # the whole batch at once
        total, difference = x + y, x - y
        responses, start = [], 0
        for n in rows:
            outputs = [pb_utils.Tensor("OUTPUT0", total[start : start + n]), pb_utils.Tensor("OUTPUT1", difference[start : start + n])]
            responses.append(pb_utils.InferenceResponse(outputs))
            start += n
        return responses
"""
ADD_SUB_CONFIG = """
backend: "python"
max_batch_size: 64
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
{batching}
"""
PY_RUNS = [("add_sub_dyn", 16), ("add_sub_single", 16), ("pybatch_dyn", 16), ("pybatch_single", 16)]
ONNX_RUNS = [(f"{EFFICIENTNET}_dyn", 8), (f"{EFFICIENTNET}_single", 8)]


def build_python(repo: Path) -> None:
    for base, config, code in (("pybatch", PYBATCH_CONFIG, PYBATCH), ("add_sub", ADD_SUB_CONFIG, ADD_SUB)):
        for name, batching in (
            (f"{base}_dyn", "dynamic_batching { max_queue_delay_microseconds: 500 }"),
            (f"{base}_single", ""),
        ):
            (repo / name / "1").mkdir(parents=True)
            (repo / name / "config.pbtxt").write_text(textwrap.dedent(config.format(batching=batching)))
            (repo / name / "1" / "model.py").write_text(textwrap.dedent(code))


def build_efficientnet(repo: Path, work: Path) -> None:
    """Two copies of EfficientNet-Lite0: with and without the dynamic batcher."""
    source = work / "fetched"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "fetch_models.py"),
            "--model",
            EFFICIENTNET,
            "--output",
            str(source),
            "--images",
            str(work / "images"),
        ],
        check=True,
        capture_output=True,
        timeout=900,
    )
    for suffix, batching in (
        ("dyn", "dynamic_batching { max_queue_delay_microseconds: 2000 }"),
        ("single", ""),
    ):
        target = repo / f"{EFFICIENTNET}_{suffix}"
        shutil.copytree(source / EFFICIENTNET, target)
        config = (target / "config.pbtxt").read_text().replace(f'name: "{EFFICIENTNET}"', f'name: "{target.name}"')
        (target / "config.pbtxt").write_text(config + batching + "\n")


def measure(servers: list[tuple[str, int, str, list[tuple[str, int]]]], tag: str, repeat: int) -> list[Row]:
    """Each server's runs, servers taking turns run by run (all up the whole time), ``repeat``
    rounds; returns each (server, run)'s median-throughput row."""
    rounds: dict[tuple[str, str], list[Row]] = {}
    longest = max(len(runs) for *_, runs in servers)
    for _ in range(repeat):
        for i in range(longest):
            for name, pid, url, runs in servers:
                if i < len(runs):
                    model, concurrency = runs[i]
                    row = run_perf(name, pid, model, url, "grpc", concurrency, tag)
                    print(row, flush=True)
                    rounds.setdefault((name, model), []).append(row)
    return [sorted(rows, key=lambda r: r.throughput)[len(rows) // 2] for rows in rounds.values()]


def _reading(by: dict[tuple[str, str], Row]) -> str:
    """The paragraph under the table, its figures taken from this run."""
    text = "Reading: "
    dyn, single, triton = (
        by.get(("tritium", "add_sub_dyn")),
        by.get(("tritium", "add_sub_single")),
        by.get(("triton", "add_sub_dyn")),
    )
    if dyn and single:
        text += (
            "with the dynamic batcher, the requests of one batch share one EXECUTE frame and one response "
            f"frame, so the worker's CPU per inference falls (add_sub: {single.worker_cpu_us:,.0f} → "
            f"{dyn.worker_cpu_us:,.0f} µs) and the core's falls less ({single.server_cpu_us:,.0f} → "
            f"{dyn.server_cpu_us:,.0f} µs): most of the core's cost per request is the gRPC call itself "
            "(receive, parse, validate, answer), which a batch does not share"
        )
        if triton:
            text += f"; Triton's C++ core spends {triton.server_cpu_us:,.0f} µs per inference in all, batched"
        text += ". "
    text += (
        "EfficientNet-Lite0 here runs as two single-threaded CPU instances that already keep both cores "
        "busy; a batch runs its images in one thread one after another, so batching cannot add compute on "
        "this machine and its queue delay only adds latency (on a GPU, where a batch runs in parallel, it "
        "pays)."
    )
    return text


def render(rows: list[Row], note: str) -> str:
    by = {(r.server, r.model): r for r in rows}
    lines = [
        "## Dynamic batching",
        "",
        (
            f"Measured {datetime.date.today().isoformat()} by `python benchmarks/batching.py` (perf_analyzer, gRPC; "
            "tritium and Triton 2.51 on the same model files, both up at once and taking turns run by run; "
            "each row is the median of the rounds)."
        ),
    ]
    if note:
        lines += ["", f"**{note}**"]
    lines += [
        "",
        (
            "| model | concurrency | tritium infer/s | tritium p50 (µs) | tritium server CPU (µs/inf) | Triton infer/s "
            "| Triton p50 (µs) | Triton server CPU (µs/inf) |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model, concurrency in PY_RUNS + ONNX_RUNS:
        t, r = by.get(("tritium", model)), by.get(("triton", model))
        if t is None and r is None:
            continue

        def cell(row: Any, what: str) -> str:
            return f"{getattr(row, what):,.0f}" if row else "—"

        lines.append(
            f"| {model} | {concurrency} | {cell(t, 'throughput')} | {cell(t, 'p50_us')} | {cell(t, 'server_cpu_us')} | "
            f"{cell(r, 'throughput')} | {cell(r, 'p50_us')} | {cell(r, 'server_cpu_us')} |"
        )
    lines += ["", "| target | measured | met |", "| --- | --- | --- |"]
    for base in ("add_sub", "pybatch"):
        t, r = by.get(("tritium", f"{base}_dyn")), by.get(("triton", f"{base}_dyn"))
        if t and r:
            ratio = t.throughput / r.throughput
            lines.append(
                f"| {base}_dyn, concurrency 16: tritium ≥ 1.0 × Triton | **{ratio:.2f}×** | {'yes' if ratio >= 1 else 'no'} |"
            )
        gains = {}
        for server in ("tritium", "triton"):
            dyn, single = by.get((server, f"{base}_dyn")), by.get((server, f"{base}_single"))
            if dyn and single:
                gains[server] = dyn.throughput / single.throughput
        if len(gains) == 2:
            met = gains["tritium"] >= gains["triton"]
            lines.append(
                f"| {base}: gain from batching (dyn / single): tritium ≥ Triton | tritium **{gains['tritium']:.3f}×**, "
                f"Triton {gains['triton']:.3f}× | {'yes' if met else 'no'} |"
            )
    dyn, single = (
        by.get(("tritium", f"{EFFICIENTNET}_dyn")),
        by.get(("tritium", f"{EFFICIENTNET}_single")),
    )
    if dyn and single:
        lines.append(
            f"| EfficientNet-Lite0, concurrency 8: with / without dynamic batching (tritium) | "
            f"**{dyn.throughput / single.throughput:.2f}×** | (no target) |"
        )
    lines += ["", _reading(by)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--skip-triton", action="store_true")
    parser.add_argument("--skip-efficientnet", action="store_true")
    parser.add_argument("--quick", action="store_true", help="1-second windows (a smoke run, not a measurement)")
    parser.add_argument("--note", default="", help="a remark printed above the results (e.g. machine under load)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every run; each row is the median round")
    args = parser.parse_args()
    prepare(args)
    if args.quick:
        common.PERF_ARGS[1] = "1000"
    tag = time.strftime("%Y%m%d-%H%M%S")
    with tempfile.TemporaryDirectory(prefix="tritium-batchbench-") as tmp:
        work = Path(tmp)
        repo = work / "models"
        build_python(repo)
        onnx_repo = work / "onnx"
        if not args.skip_efficientnet:
            build_efficientnet(onnx_repo, work)
        repos = [repo] + ([onnx_repo] if not args.skip_efficientnet else [])
        # no auto-complete: the onnxruntime backend would add dynamic_batching {} to the "single" copy
        server = ServerProcess(repos, ["--disable-auto-complete-config"], log_path=work / "tritium.log").start()
        triton = None
        try:
            assert server.proc is not None
            servers = [
                ("tritium", server.proc.pid, server.grpc_url, PY_RUNS + ([] if args.skip_efficientnet else ONNX_RUNS))
            ]
            if not args.skip_triton:
                triton = TritonServer(
                    args.triton_venv, repo, free_port(), free_port(), free_port(), work / "triton.log"
                ).start()
                assert triton.proc is not None
                servers.append(("triton", triton.proc.pid, triton.grpc_url, PY_RUNS))
            rows = measure(servers, tag, args.repeat)
        finally:
            if triton is not None:
                triton.stop()
            server.stop()
    text = render(rows, args.note)
    write_section(args.output, "batching", text)
    print(text)


if __name__ == "__main__":
    main()
