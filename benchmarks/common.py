"""Shared by the benchmark scripts: perf_analyzer runs with CPU accounting (:mod:`tritium.perf`), and docs sections."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tritium import perf

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PERF_ARGS = ["--measurement-interval", "3000", "--stability-percentage", "10000", "--max-trials", "3"]

__all__ = [
    "Row",
    "run_perf",
    "install_perf_analyzer_libraries",
    "write_section",
    "process_cpu_s",
    "ROOT",
    "RESULTS",
    "python_speed_s",
]


@dataclass
class Row:
    """One perf_analyzer measurement, with the CPU time each process spent per inference."""

    server: str
    model: str
    protocol: str
    concurrency: int
    throughput: float  # inferences / second
    p50_us: float
    p99_us: float
    server_cpu_us: float = 0.0  # the server's own process
    worker_cpu_us: float = 0.0  # its child processes together (tritium workers, Triton's python stubs)
    client_cpu_us: float = 0.0  # perf_analyzer itself


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (from /proc); 0 when it is gone."""
    return perf.process_cpu_s(pid)


def python_speed_s(rounds: int = 3) -> float:
    """Seconds this machine takes for a pure-Python loop of 10**7 integer additions (best of ``rounds``).

    A reading of how fast the machine runs Python at the moment of a benchmark, printed with its
    tables: tritium's core and workers are Python, Triton's server is C++, so a slower machine
    (another CPU model, a busy host) lowers tritium's ratios as well as its own figures.
    """
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        total = 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.perf_counter() - start)
    return best


def install_perf_analyzer_libraries() -> None:
    """libb64 (apt) and the CUDA runtime library (pip) that perf_analyzer links against, even on a CPU."""
    if not Path("/usr/lib/x86_64-linux-gnu/libb64.so.0d").exists():
        subprocess.run(["apt-get", "install", "-y", "-q", "libb64-0d"], check=True)
    try:
        found = importlib.util.find_spec("nvidia.cuda_runtime") is not None
    except ModuleNotFoundError:  # no "nvidia" namespace package at all
        found = False
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "nvidia-cuda-runtime-cu12"], check=True)


def run_perf(
    server: str,
    server_pid: int,
    model: str,
    url: str,
    protocol: str,
    concurrency: int,
    tag: str,
    extra: list[str] | None = None,
) -> Row:
    """Run perf_analyzer once and account the CPU of the server, its children and the client."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out_csv = RESULTS / f"{tag}_{server}_{model}_{protocol}_c{concurrency}.csv"
    try:
        m = perf.measure(model, url, protocol, concurrency, server_pid, out_csv, [*PERF_ARGS, *(extra or [])])
    except perf.PerfAnalyzerError as exc:
        raise RuntimeError(str(exc)) from None
    return Row(
        server,
        model,
        protocol,
        concurrency,
        m.throughput,
        m.p50_us,
        m.p99_us,
        m.server_cpu_us,
        m.worker_cpu_us,
        m.client_cpu_us,
    )


def write_section(path: Path, name: str, text: str) -> None:
    """Replace the section ``name`` of a markdown file (between its markers), or append it."""
    begin, end = f"<!-- begin:{name} -->", f"<!-- end:{name} -->"
    block = f"{begin}\n{text.rstrip()}\n{end}\n"
    current = path.read_text() if path.exists() else "# Performance\n\n"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.S)
    path.write_text(
        pattern.sub(lambda _m: block, current) if pattern.search(current) else current.rstrip() + "\n\n" + block
    )
