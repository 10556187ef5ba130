#!/usr/bin/env python3
"""Benchmark tritium with perf_analyzer, against in-process onnxruntime in the same run.

What it measures (all on this machine, back to back, same client settings):

* ``identity`` with a 16 KiB FP32 tensor (dims [4096]): concurrency 1 and 4,
  HTTP and gRPC — the server's own per-request cost;
* ``efficientnet_lite0_onnx`` (examples/fetch_models.py): concurrency 1 and 4,
  HTTP and gRPC;
* in-process onnxruntime on the same ONNX file and thread settings, batch 1:
  the physical limit for that model here.

It writes a markdown table with throughput, p50/p99 latency and the ratios the
issues set targets for to ``docs/performance.md`` (``--output``), and the raw
perf_analyzer CSVs to ``benchmarks/results/``.

perf_analyzer ships in the ``tritonclient==2.51.0`` wheel (``bin/perf_analyzer``
of the virtual environment). On a CPU-only host it still needs
``libb64.so.0d`` (Debian package ``libb64-0d``) and ``libcudart.so.12`` (PyPI
package ``nvidia-cuda-runtime-cu12``); ``--install`` installs both.

Usage::

    python benchmarks/run.py [--install] [--quick] [--output docs/performance.md]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.repo import add_model, identity_config  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
EFFICIENTNET = "efficientnet_lite0_onnx"


@dataclass
class Row:
    """One perf_analyzer measurement."""

    model: str
    protocol: str
    concurrency: int
    throughput: float  # inferences / second
    p50_us: float
    p99_us: float


def cudart_dir() -> str | None:
    try:
        import nvidia.cuda_runtime  # type: ignore[import-not-found]
    except ImportError:
        return None
    return os.path.join(list(nvidia.cuda_runtime.__path__)[0], "lib")


def install_prerequisites() -> None:
    """libb64 (apt) and the CUDA runtime library (pip) that perf_analyzer links against."""
    if not Path("/usr/lib/x86_64-linux-gnu/libb64.so.0d").exists():
        subprocess.run(["apt-get", "install", "-y", "-q", "libb64-0d"], check=True)
    if cudart_dir() is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "nvidia-cuda-runtime-cu12"], check=True)


def perf_analyzer_command() -> tuple[list[str], dict[str, str]]:
    binary = Path(sys.executable).parent / "perf_analyzer"
    if not binary.exists():
        found = shutil.which("perf_analyzer")
        if not found:
            raise SystemExit("perf_analyzer not found: pip install 'tritonclient[all]==2.51.0'")
        binary = Path(found)
    env = dict(os.environ)
    lib = cudart_dir()
    if lib is None:
        raise SystemExit("perf_analyzer needs libcudart.so.12: run with --install (pip install nvidia-cuda-runtime-cu12)")
    env["LD_LIBRARY_PATH"] = lib + os.pathsep + env.get("LD_LIBRARY_PATH", "")
    return [str(binary)], env


def run_perf(model: str, url: str, protocol: str, concurrency: int, interval_ms: int, tag: str) -> Row:
    cmd, env = perf_analyzer_command()
    out_csv = RESULTS / f"{tag}_{model}_{protocol}_c{concurrency}.csv"
    cmd += [
        "-m", model, "-u", url, "-i", protocol,
        "--concurrency-range", str(concurrency),
        "--measurement-interval", str(interval_ms),
        "--stability-percentage", "10000", "--max-trials", "3",
        "-f", str(out_csv),
    ]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"perf_analyzer failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    with open(out_csv, newline="") as f:
        row = next(csv.DictReader(f))
    return Row(model, protocol, concurrency, float(row["Inferences/Second"]), float(row["p50 latency"]), float(row["p99 latency"]))


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
    threads = int(config.parameters["intra_op_thread_count"].string_value or 0) if "intra_op_thread_count" in config.parameters else 0
    sessions = []
    for _ in range(instances):
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        sessions.append(ort.InferenceSession(str(model_dir / "1" / "model.onnx"), options, providers=["CPUExecutionProvider"]))
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
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return {
        "throughput": len(latencies) / (time.perf_counter() - start),
        "p50_us": statistics.median(latencies) * 1e6,
        "instances": instances,
        "threads": threads,
    }


def build_repositories(work: Path) -> Path:
    repo = work / "models"
    add_model(repo, "identity_16k", identity_config(dims="[ 4096 ]", max_batch_size=0))
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "fetch_models.py"), "--output", str(repo), "--images", str(work / "images")],
        check=True, capture_output=True, timeout=900,
    )
    return repo


def render(rows: list[Row], reference: dict[str, float], quick: bool) -> str:
    by = {(r.model, r.protocol, r.concurrency): r for r in rows}
    lines = [
        "# Performance",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/run.py` on this project's CI-class machine "
        f"({os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, CPU only). "
        "perf_analyzer (from tritonclient 2.51.0) runs on the same 2 cores as the server, so its own CPU "
        "is part of every number; runs are back to back in one invocation, with "
        "`--measurement-interval 3000 --stability-percentage 10000 --max-trials 3`"
        + (" (quick mode: shorter windows)." if quick else "."),
        "",
        "| model | protocol | concurrency | throughput (infer/s) | p50 latency (µs) | p99 latency (µs) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(f"| {r.model} | {r.protocol} | {r.concurrency} | {r.throughput:,.0f} | {r.p50_us:,.0f} | {r.p99_us:,.0f} |")
    limit = reference["throughput"]
    lines += [
        "",
        f"In-process onnxruntime on the same ONNX file with the model config's settings "
        f"({reference['instances']} sessions, intra_op_num_threads={reference['threads'] or 'default'}, "
        "each driven by its own thread, batch 1 — the physical limit here): "
        f"**{limit:,.1f} infer/s** (p50 {reference['p50_us']:,.0f} µs).",
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "| --- | --- | --- |",
    ]
    grpc4 = by.get((EFFICIENTNET, "grpc", 4))
    if grpc4:
        ratio = grpc4.throughput / limit
        lines.append(
            f"| efficientnet_lite0_onnx, gRPC, concurrency 4: throughput ≥ 0.85 × in-process onnxruntime "
            f"| {grpc4.throughput:,.1f} / {limit:,.1f} = **{ratio:.2f}×** | {'yes' if ratio >= 0.85 else 'no'} |"
        )
    for protocol in ("grpc", "http"):
        r = by.get(("identity_16k", protocol, 1))
        if r:
            lines.append(
                f"| identity 16 KiB, {protocol.upper() if protocol == 'http' else 'gRPC'}, concurrency 1: "
                f"p50 ≤ 500 µs | **{r.p50_us:,.0f} µs** | {'yes' if r.p50_us <= 500 else 'no'} |"
            )
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--install", action="store_true", help="install perf_analyzer's libraries first")
    parser.add_argument("--quick", action="store_true", help="shorter measurement windows")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "performance.md")
    args = parser.parse_args()
    if args.install:
        install_prerequisites()
    RESULTS.mkdir(parents=True, exist_ok=True)
    interval = 1500 if args.quick else 3000
    tag = time.strftime("%Y%m%d-%H%M%S")
    with tempfile.TemporaryDirectory(prefix="tritium-bench-") as tmp:
        work = Path(tmp)
        repo = build_repositories(work)
        print("in-process onnxruntime reference ...", flush=True)
        reference = onnxruntime_reference(repo / EFFICIENTNET, 5 if args.quick else 10)
        rows: list[Row] = []
        server = ServerProcess([repo], log_path=work / "server.log")
        server.start()
        try:
            for model in ("identity_16k", EFFICIENTNET):
                for protocol in ("http", "grpc"):
                    for concurrency in (1, 4):
                        url = server.http_url if protocol == "http" else server.grpc_url
                        row = run_perf(model, url, protocol, concurrency, interval, tag)
                        print(row, flush=True)
                        rows.append(row)
        finally:
            server.stop()
    text = render(rows, reference, args.quick)
    args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
