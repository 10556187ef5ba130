#!/usr/bin/env python3
"""Serving benchmark: tritium with perf_analyzer, against in-process onnxruntime in the same run.

What it measures (all on this machine, back to back, same client settings):

* ``identity`` with a 16 KiB FP32 tensor (dims [4096]): concurrency 1 and 4,
  HTTP and gRPC — the server's own per-request cost;
* ``efficientnet_lite0_onnx`` (examples/fetch_models.py): concurrency 1 and 4,
  HTTP and gRPC;
* in-process onnxruntime on the same ONNX file and thread settings, batch 1:
  the physical limit for that model here.

It writes its section of ``docs/performance.md`` (``--output``): throughput,
p50/p99 latency, CPU per inference, and the ratios the issues set targets for;
raw perf_analyzer CSVs go to ``benchmarks/results/``.

perf_analyzer ships in the ``tritonclient==2.51.0`` wheel (``bin/perf_analyzer``
of the virtual environment). On a CPU-only host it still needs
``libb64.so.0d`` (Debian package ``libb64-0d``) and ``libcudart.so.12`` (PyPI
package ``nvidia-cuda-runtime-cu12``); ``--install`` installs both.

Usage::

    python benchmarks/serving.py [--install] [--output docs/performance.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, Row, run_perf, write_section  # noqa: E402
from benchmarks.triton import add_arguments, prepare  # noqa: E402
from tests.support.repo import add_model, identity_config  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

EFFICIENTNET = "efficientnet_lite0_onnx"


def onnxruntime_reference(model_dir: Path, seconds: float) -> dict[str, float]:
    """Batch-1 throughput of in-process onnxruntime with the model config's instances and threads.

    One session per instance of the config, each with its ``intra_op_thread_count``,
    each driven by its own thread in a loop: what the server could do with no overhead.
    """
    import numpy as np
    import onnxruntime as ort
    from google.protobuf import text_format

    from tritium.proto import model_config_pb2

    config = text_format.Parse((model_dir / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    instances = sum(g.count for g in config.instance_group) or 1
    threads = (
        int(config.parameters["intra_op_thread_count"].string_value or 0)
        if "intra_op_thread_count" in config.parameters
        else 0
    )
    sessions = []
    for _ in range(instances):
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        sessions.append(
            ort.InferenceSession(str(model_dir / "1" / "model.onnx"), options, providers=["CPUExecutionProvider"])
        )
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    for session in sessions:
        for _ in range(5):
            session.run(None, {"input": x})
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    def loop(session: object) -> None:
        while time.perf_counter() < stop:
            t = time.perf_counter()
            session.run(None, {"input": x})  # type: ignore[attr-defined]
            latencies.append(time.perf_counter() - t)

    workers = [threading.Thread(target=loop, args=(s,)) for s in sessions]
    start, cpu = time.perf_counter(), time.process_time()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    cpu = time.process_time() - cpu
    return {
        "throughput": len(latencies) / (time.perf_counter() - start),
        "p50_us": statistics.median(latencies) * 1e6,
        "cpu_us": cpu / len(latencies) * 1e6,
        "instances": instances,
        "threads": threads,
    }


def build_repositories(work: Path) -> Path:
    repo = work / "models"
    add_model(repo, "identity_16k", identity_config(dims="[ 4096 ]", max_batch_size=0))
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "fetch_models.py"),
            "--model",
            EFFICIENTNET,
            "--output",
            str(repo),
            "--images",
            str(work / "images"),
        ],
        check=True,
        capture_output=True,
        timeout=900,
    )
    return repo


def render(rows: list[Row], reference: dict[str, float], note: str = "") -> str:
    by = {(r.model, r.protocol, r.concurrency): r for r in rows}
    lines = [
        "## Serving: tritium against in-process onnxruntime",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/serving.py` on this project's CI-class machine "
        f"({os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, CPU only). "
        "perf_analyzer (from tritonclient 2.51.0) runs on the same 2 cores as the server, so its own CPU "
        "is part of every number; runs are back to back in one invocation, with "
        "`--measurement-interval 3000 --stability-percentage 10000 --max-trials 3`" + ".",
    ]
    if note:
        lines += ["", f"**{note}**"]
    lines += [
        "",
        "| model | protocol | concurrency | throughput (infer/s) | p50 latency (µs) | p99 latency (µs) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.model} | {r.protocol} | {r.concurrency} | {r.throughput:,.0f} | {r.p50_us:,.0f} | {r.p99_us:,.0f} |"
        )
    lines += [
        "",
        "### Where the CPU goes (per inference, same runs)",
        "",
        "CPU time of each process divided by the inferences served: the core (HTTP/gRPC endpoints, "
        "scheduling), the worker processes (the backend), and perf_analyzer, which shares the 2 cores.",
        "",
        "| model | protocol | concurrency | core (µs) | workers (µs) | perf_analyzer (µs) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.model} | {r.protocol} | {r.concurrency} | {r.server_cpu_us:,.0f} | {r.worker_cpu_us:,.0f} "
            f"| {r.client_cpu_us:,.0f} |"
        )
    limit = reference["throughput"]
    lines += [
        "",
        f"In-process onnxruntime on the same ONNX file with the model config's settings "
        f"({reference['instances']} sessions, intra_op_num_threads={reference['threads'] or 'default'}, "
        "each driven by its own thread, batch 1 — the physical limit here): "
        f"**{limit:,.1f} infer/s** (p50 {reference['p50_us']:,.0f} µs; the mean of a run just before tritium's "
        f"EfficientNet runs, {reference['before']:,.1f} infer/s, and one just after, {reference['after']:,.1f}).",
        "",
        "### Targets",
        "",
        "| target | measured | met |",
        "| --- | --- | --- |",
    ]
    grpc4 = by.get((EFFICIENTNET, "grpc", 4))
    if grpc4:
        ratio = grpc4.throughput / limit
        ceiling = _ceiling(grpc4, reference)
        low, high = sorted((reference["before"], reference["after"]))
        # throughput under another load favours whichever side the scheduler favours, so the verdict also
        # needs the CPU-time ceiling (what the same CPU costs allow on an otherwise idle machine)
        met = "yes" if ratio >= 0.9 and ceiling >= 0.9 else "no"
        if high > 1.2 * low:
            met += f" (the reference itself moved between {low:,.0f} and {high:,.0f} infer/s)"
        lines.append(
            f"| efficientnet_lite0_onnx, gRPC, concurrency 4: throughput ≥ 0.9 × in-process onnxruntime (issue 12) "
            f"| {grpc4.throughput:,.1f} / {limit:,.1f} = **{ratio:.2f}×**; CPU-time ceiling **{ceiling:.2f}×** | {met} |"
        )
    for protocol in ("grpc", "http"):
        r = by.get(("identity_16k", protocol, 1))
        if r:
            lines.append(
                f"| identity 16 KiB, {protocol.upper() if protocol == 'http' else 'gRPC'}, concurrency 1: "
                f"p50 ≤ 500 µs | **{r.p50_us:,.0f} µs** | {'yes' if r.p50_us <= 500 else 'no'} |"
            )
    lines += _reading(by, reference)
    lines.append("")
    return "\n".join(lines)


def _ceiling(row: Row, reference: dict[str, float]) -> float:
    """In-process CPU per inference over tritium's (core + workers + perf_analyzer): the highest ratio of the
    in-process rate that the same CPU costs allow on these cores."""
    return reference["cpu_us"] / (row.server_cpu_us + row.worker_cpu_us + row.client_cpu_us)


def _reading(by: dict[tuple[str, str, int], Row], reference: dict[str, float]) -> list[str]:
    """What the numbers say, computed from this run."""
    out = ["", "### Reading the numbers", ""]
    grpc4 = by.get((EFFICIENTNET, "grpc", 4))
    if grpc4:
        total = grpc4.server_cpu_us + grpc4.worker_cpu_us + grpc4.client_cpu_us
        ref_cpu = reference["cpu_us"]  # CPU time, not wall time: a busy machine does not inflate it
        out.append(
            f"- **EfficientNet at concurrency 4 is CPU-bound.** Each inference costs "
            f"{grpc4.worker_cpu_us / 1000:.1f} ms of worker CPU (onnxruntime itself: {ref_cpu / 1000:.1f} ms "
            f"in-process), {grpc4.server_cpu_us / 1000:.2f} ms in the core (receiving the 602 KB message and "
            f"running the request) and {grpc4.client_cpu_us / 1000:.2f} ms in perf_analyzer, all on the same 2 cores: "
            f"{total / 1000:.1f} ms against {ref_cpu / 1000:.1f} ms, so about "
            f"{_ceiling(grpc4, reference):.2f}× of the in-process rate is the ceiling on this machine, even with no waiting at all "
            "(both sides counted in CPU time, which the machine's other load moves far less than throughput)."
        )
    http1, grpc1 = by.get(("identity_16k", "http", 1)), by.get(("identity_16k", "grpc", 1))
    if http1 and grpc1:
        out.append(
            f"- **gRPC and HTTP.** At concurrency 1 the core spends {grpc1.server_cpu_us:,.0f} µs of CPU per gRPC "
            f"request against {http1.server_cpu_us:,.0f} µs per HTTP request for the same model; what the gRPC "
            "transport itself costs (native or grpc.aio) is in the grpc_transport section and docs/architecture.md."
        )
    out.append(
        "- The core and worker exchange one control frame each way per request; the tensor bytes stay in "
        "shared memory (an identity model echoes its input block without a copy)."
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser, triton=False)
    parser.add_argument("--note", default="", help="a remark printed above the results (e.g. machine under load)")
    parser.add_argument("--reference-seconds", type=float, default=10.0, help="length of each in-process run")
    args = parser.parse_args()
    prepare(args)
    tag = time.strftime("%Y%m%d-%H%M%S")
    with tempfile.TemporaryDirectory(prefix="tritium-bench-") as tmp:
        work = Path(tmp)
        repo = build_repositories(work)
        rows: list[Row] = []
        references: list[dict[str, float]] = []
        server = ServerProcess([repo], log_path=work / "server.log")
        server.start()
        try:
            assert server.proc is not None
            for model in ("identity_16k", EFFICIENTNET):
                if model == EFFICIENTNET:  # the reference just before the runs it is compared with
                    print("in-process onnxruntime reference ...", flush=True)
                    references.append(onnxruntime_reference(repo / EFFICIENTNET, args.reference_seconds))
                for protocol in ("http", "grpc"):
                    for concurrency in (1, 4):
                        url = server.http_url if protocol == "http" else server.grpc_url
                        row = run_perf("tritium", server.proc.pid, model, url, protocol, concurrency, tag)
                        print(row, flush=True)
                        rows.append(row)
        finally:
            server.stop()
        print("in-process onnxruntime reference, again ...", flush=True)
        references.append(onnxruntime_reference(repo / EFFICIENTNET, args.reference_seconds))
    before, after = references
    reference = {
        **before,
        "throughput": (before["throughput"] + after["throughput"]) / 2,
        "p50_us": (before["p50_us"] + after["p50_us"]) / 2,
        "cpu_us": (before["cpu_us"] + after["cpu_us"]) / 2,
        "before": before["throughput"],
        "after": after["throughput"],
    }
    text = render(rows, reference, args.note)
    write_section(args.output, "serving", text)
    print(text)


if __name__ == "__main__":
    main()
