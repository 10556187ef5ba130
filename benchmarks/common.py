"""Shared by the benchmark scripts: perf_analyzer runs with CPU accounting, and docs sections."""

from __future__ import annotations

import csv
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PERF_ARGS = ["--measurement-interval", "3000", "--stability-percentage", "10000", "--max-trials", "3"]

__all__ = ["Row", "run_perf", "install_perf_analyzer_libraries", "write_section", "children_of", "ROOT", "RESULTS"]


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


_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (from /proc); 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is ``pid``."""
    sys.path.insert(0, str(ROOT))
    from tests.support.procs import children_of as find

    return find(pid)


def _cudart_dir() -> str | None:
    try:
        import nvidia.cuda_runtime  # type: ignore[import-not-found]
    except ImportError:
        return None
    return os.path.join(list(nvidia.cuda_runtime.__path__)[0], "lib")


def install_perf_analyzer_libraries() -> None:
    """libb64 (apt) and the CUDA runtime library (pip) that perf_analyzer links against, even on a CPU."""
    if not Path("/usr/lib/x86_64-linux-gnu/libb64.so.0d").exists():
        subprocess.run(["apt-get", "install", "-y", "-q", "libb64-0d"], check=True)
    if _cudart_dir() is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "nvidia-cuda-runtime-cu12"], check=True)


def _perf_analyzer() -> tuple[list[str], dict[str, str]]:
    binary = Path(sys.executable).parent / "perf_analyzer"
    if not binary.exists():
        found = shutil.which("perf_analyzer")
        if not found:
            raise SystemExit("perf_analyzer not found: pip install 'tritonclient[all]==2.51.0'")
        binary = Path(found)
    lib = _cudart_dir()
    if lib is None:
        raise SystemExit("perf_analyzer needs libcudart.so.12: run with --install (pip install nvidia-cuda-runtime-cu12)")
    env = dict(os.environ, LD_LIBRARY_PATH=lib + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))
    return [str(binary)], env


def run_perf(
    server: str, server_pid: int, model: str, url: str, protocol: str, concurrency: int, tag: str,
    extra: list[str] | None = None,
) -> Row:
    """Run perf_analyzer once and account the CPU of the server, its children and the client."""
    cmd, env = _perf_analyzer()
    RESULTS.mkdir(parents=True, exist_ok=True)
    out_csv = RESULTS / f"{tag}_{server}_{model}_{protocol}_c{concurrency}.csv"
    cmd += ["-m", model, "-u", url, "-i", protocol, "--concurrency-range", str(concurrency), *PERF_ARGS,
            "-f", str(out_csv), *(extra or [])]
    workers = children_of(server_pid)
    reaped0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    core0, workers0, start = process_cpu_s(server_pid), sum(process_cpu_s(w) for w in workers), time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = proc.communicate(timeout=600)  # waits for (and reaps) perf_analyzer
    wall = time.perf_counter() - start
    reaped1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    core1, workers1 = process_cpu_s(server_pid), sum(process_cpu_s(w) for w in workers)
    if proc.returncode != 0:
        raise RuntimeError(f"perf_analyzer failed ({proc.returncode}):\n{output}")
    with open(out_csv, newline="") as f:
        row = next(csv.DictReader(f))
    throughput = float(row["Inferences/Second"])
    inferences = max(1.0, throughput * wall)  # perf_analyzer keeps the load on for its whole run
    client_s = (reaped1.ru_utime + reaped1.ru_stime) - (reaped0.ru_utime + reaped0.ru_stime)
    return Row(
        server, model, protocol, concurrency, throughput, float(row["p50 latency"]), float(row["p99 latency"]),
        (core1 - core0) / inferences * 1e6, (workers1 - workers0) / inferences * 1e6, client_s / inferences * 1e6,
    )


def write_section(path: Path, name: str, text: str) -> None:
    """Replace the section ``name`` of a markdown file (between its markers), or append it."""
    begin, end = f"<!-- begin:{name} -->", f"<!-- end:{name} -->"
    block = f"{begin}\n{text.rstrip()}\n{end}\n"
    current = path.read_text() if path.exists() else "# Performance\n\n"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.S)
    path.write_text(pattern.sub(lambda _m: block, current) if pattern.search(current) else current.rstrip() + "\n\n" + block)
