"""Running Triton's ``perf_analyzer`` against a server, with the CPU time each process spent per inference.

``perf_analyzer`` ships inside the ``tritonclient==2.51.0`` wheel (the
``analyzer`` extra). It links against ``libb64.so.0d`` (Debian:
``libb64-0d``) and ``libcudart.so.12`` even on a CPU-only machine (PyPI:
``nvidia-cuda-runtime-cu12``, whose ``lib/`` goes on its
``LD_LIBRARY_PATH``). Used by ``tritium-perf`` (:mod:`tritium.perf_cli`),
``tritium-analyzer`` and the benchmark scripts; runs in the calling
process (blocking).
"""

from __future__ import annotations

import csv
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Measurement",
    "PerfAnalyzerError",
    "perf_analyzer_command",
    "measure",
    "process_cpu_s",
    "children_of",
    "descendants_of",
    "worker_pids",
    "stop_process",
]

_TICK = os.sysconf("SC_CLK_TCK")
_LIBB64 = Path("/usr/lib/x86_64-linux-gnu/libb64.so.0d")


class PerfAnalyzerError(RuntimeError):
    """perf_analyzer is missing, cannot start, or failed (the message says which and what to install)."""


@dataclass(slots=True)
class Measurement:
    """One perf_analyzer measurement at one concurrency.

    :ivar throughput: inferences per second.
    :ivar p50_us, p99_us: client-side latency percentiles, microseconds.
    :ivar server_cpu_us: CPU time of the server process per inference, microseconds.
    :ivar worker_cpu_us: CPU time of its descendant processes (model workers) per inference.
    :ivar client_cpu_us: CPU time of perf_analyzer itself per inference.
    """

    concurrency: int
    throughput: float
    p50_us: float
    p99_us: float
    server_cpu_us: float = 0.0
    worker_cpu_us: float = 0.0
    client_cpu_us: float = 0.0


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (from /proc); 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children() -> dict[int, list[int]]:
    """Parent pid -> the pids of its children, read from /proc now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (read from /proc)."""
    return sorted(_children().get(pid, []))


def descendants_of(pid: int) -> list[int]:
    """PIDs below ``pid``: its children, their children, ... (read from /proc; a server's model
    workers are children of its template process, not of the server)."""
    parents = _children()
    out: list[int] = []
    todo = list(parents.get(pid, []))
    while todo:
        child = todo.pop()
        out.append(child)
        todo.extend(parents.get(child, []))
    return sorted(out)


def worker_pids(server_pid: int) -> list[int]:
    """The worker processes of a tritium server (descendants named ``tritium-worker``), sorted."""
    out = []
    for pid in descendants_of(server_pid):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "tritium-worker":
                out.append(pid)
        except OSError:
            continue
    return out


def _cudart_dir() -> str | None:
    try:
        import nvidia.cuda_runtime  # type: ignore[import-not-found]
    except ImportError:
        return None
    return os.path.join(list(nvidia.cuda_runtime.__path__)[0], "lib")


def perf_analyzer_command() -> tuple[list[str], dict[str, str]]:
    """The perf_analyzer binary (this environment's first, then ``PATH``) and the environment it needs.

    :raises PerfAnalyzerError: naming what to install when it or a library it needs is missing.
    """
    binary = Path(sys.executable).parent / "perf_analyzer"
    if not binary.exists():
        found = shutil.which("perf_analyzer")
        if not found:
            raise PerfAnalyzerError(
                "perf_analyzer not found: pip install 'tritonclient[http,grpc]==2.51.0' "
                "(or pip install 'tritium[analyzer]')"
            )
        binary = Path(found)
    if sys.platform.startswith("linux") and not _LIBB64.exists():
        raise PerfAnalyzerError("perf_analyzer needs libb64.so.0d: apt-get install libb64-0d")
    lib = _cudart_dir()
    if lib is None:
        raise PerfAnalyzerError(
            "perf_analyzer needs libcudart.so.12, even without a GPU: pip install nvidia-cuda-runtime-cu12"
        )
    env = dict(os.environ, LD_LIBRARY_PATH=lib + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))
    return [str(binary)], env


def measure(
    model: str,
    url: str,
    protocol: str,
    concurrency: int,
    server_pid: int,
    csv_path: Path,
    args: list[str],
    timeout_s: float = 600.0,
) -> Measurement:
    """Run perf_analyzer once at ``concurrency`` and account the CPU of the server, its children and itself.

    :param url: ``host:port`` of the endpoint ``protocol`` names (``"http"`` or ``"grpc"``).
    :param server_pid: the server's process (its descendants run its model instances).
    :param csv_path: where perf_analyzer writes its CSV (``-f``).
    :param args: further perf_analyzer flags (measurement window, ``--shape``, ...).
    :raises PerfAnalyzerError: when perf_analyzer is missing, fails or runs past ``timeout_s``
        (its output in the message).
    """
    cmd, env = perf_analyzer_command()
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    cmd += ["-m", model, "-u", url, "-i", protocol, "--concurrency-range", str(concurrency), "-f", str(csv_path), *args]
    workers = descendants_of(server_pid)
    reaped0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    core0, workers0 = process_cpu_s(server_pid), sum(process_cpu_s(w) for w in workers)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)  # waits for (and reaps) perf_analyzer
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        raise PerfAnalyzerError(f"perf_analyzer ran past {timeout_s:.0f} s:\n{output}") from None
    wall = time.perf_counter() - start
    reaped1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    core1, workers1 = process_cpu_s(server_pid), sum(process_cpu_s(w) for w in workers)
    if proc.returncode != 0:
        raise PerfAnalyzerError(f"perf_analyzer failed ({proc.returncode}):\n{output}")
    with open(csv_path, newline="") as f:
        row = next(csv.DictReader(f))
    throughput = float(row["Inferences/Second"])
    inferences = max(1.0, throughput * wall)  # perf_analyzer keeps the load on for its whole run
    client_s = (reaped1.ru_utime + reaped1.ru_stime) - (reaped0.ru_utime + reaped0.ru_stime)
    return Measurement(
        concurrency,
        throughput,
        float(row["p50 latency"]),
        float(row["p99 latency"]),
        (core1 - core0) / inferences * 1e6,
        (workers1 - workers0) / inferences * 1e6,
        client_s / inferences * 1e6,
    )


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 60.0) -> None:
    """Stop a server this process started: SIGTERM by PID, then SIGKILL after ``grace_s`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
