#!/usr/bin/env python3
"""Ray Serve benchmark: tritium behind Serve's proxies (1 and 2 replicas) against one tritium-server.

What it measures, back to back on this machine with the same perf_analyzer settings:

* one ``tritium-server`` on the repository (the baseline);
* the ``tritium.integrations.ray_serve`` application on a local one-node Ray
  cluster (loopback, 2 logical CPUs, no dashboard) with 1 replica, then 2;

each for EfficientNet-Lite0 (ONNX, examples/fetch_models.py, its example
config: 2 instances) and Triton's add_sub python model, over HTTP and gRPC, at
concurrency 1 and 4. Besides throughput and latency it accounts the CPU of the
whole serving side per inference (the server and its workers; for Serve every
Ray process: proxy, replicas, their workers, controller, raylet, GCS) and
derives the proxy's cost per request: the concurrency-1 p50 latency and the
CPU per request of Serve with one replica minus those of tritium-server, on add_sub.

It writes its section of ``docs/performance.md`` (``--output``); raw
perf_analyzer CSVs go to ``benchmarks/results/``. Needs the ``ray`` extra.

Usage::

    python benchmarks/ray_serve.py [--install] [--output docs/performance.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, Row, process_cpu_s, run_perf, write_section  # noqa: E402
from benchmarks.triton import add_arguments, prepare  # noqa: E402
from tests.support.ray_cluster import RayCluster, descendants, replicas_in_metrics  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

EFFICIENTNET = "efficientnet_lite0_onnx"
MODELS = ("add_sub", EFFICIENTNET)
PROTOCOLS = ("http", "grpc")
CONCURRENCIES = (1, 4)
LOAD = os.getloadavg()


@dataclass
class Measured:
    setup: str
    row: Row
    serving_cpu_us: float  # every process of the serving side, per inference
    idle_cpu_us: float  # the part of it the serving side spends when idle (its background work), per inference
    by_process: dict[str, float]  # serving CPU per inference by kind of process


def process_kind(pid: int) -> str:
    """What a serving-side process is: Ray's actor title, ``tritium worker``, or the program's name."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    first = argv[0].decode(errors="replace")
    if first.startswith("ray::"):
        return first.split(".")[0].replace("ServeReplica:tritium:", "")
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        comm = ""
    if comm == "tritium-worker" or b"tritium.core.worker " in b" ".join(argv):
        return "tritium worker"
    if comm == "tritium-tmpl":
        return "tritium worker template"
    return "tritium-server core" if b"tritium" in b" ".join(argv) else Path(first).name


def idle_cpu(root_pid: int, seconds: float = 10.0) -> float:
    """CPU seconds per second the serving side spends with no request (Ray's background work)."""
    pids = [root_pid, *descendants(root_pid)]
    cpu0, start = sum(process_cpu_s(p) for p in pids), time.perf_counter()
    time.sleep(seconds)
    return (sum(process_cpu_s(p) for p in pids) - cpu0) / (time.perf_counter() - start)


def build_repository(work: Path) -> Path:
    repo = work / "models"
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
    for name in ("config.pbtxt", "1/model.py"):
        target = repo / "add_sub" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((ROOT / "examples" / "python_models" / "add_sub" / name).read_text())
    return repo


def measure(setup: str, root_pid: int, http_url: str, grpc_url: str, tag: str) -> list[Measured]:
    """perf_analyzer over the matrix; CPU summed over ``root_pid`` and everything below it."""
    idle = idle_cpu(root_pid)
    print(setup, f"idle: {idle * 1000:.0f} ms CPU per second", flush=True)
    out = []
    for model in MODELS:
        for protocol in PROTOCOLS:
            for concurrency in CONCURRENCIES:
                pids = [root_pid, *descendants(root_pid)]
                kinds = {p: process_kind(p) for p in pids}
                each0 = {p: process_cpu_s(p) for p in pids}
                cpu0, start = sum(each0.values()), time.perf_counter()
                url = http_url if protocol == "http" else grpc_url
                row = run_perf(setup, root_pid, model, url, protocol, concurrency, tag)
                wall = time.perf_counter() - start
                each1 = {p: process_cpu_s(p) for p in pids}
                cpu1 = sum(each1.values())
                inferences = max(1.0, row.throughput * wall)
                by_process: dict[str, float] = {}
                for p in pids:
                    by_process[kinds[p]] = by_process.get(kinds[p], 0.0) + (each1[p] - each0[p]) / inferences * 1e6
                measured = Measured(
                    setup, row, (cpu1 - cpu0) / inferences * 1e6, idle * wall / inferences * 1e6, by_process
                )
                print(
                    setup,
                    model,
                    protocol,
                    concurrency,
                    f"{row.throughput:.1f}/s",
                    f"p50 {row.p50_us:.0f} us",
                    f"cpu {measured.serving_cpu_us:.0f} us",
                    flush=True,
                )
                out.append(measured)
    return out


def serve_setup(cluster: RayCluster, repo: Path, replicas: int) -> None:
    cluster.serve_run(
        cluster.config(
            {
                "model_repository": str(repo),
                "num_replicas": replicas,
                "num_cpus": 0.5,
                "max_ongoing_requests": 100,
                "graceful_shutdown_timeout_s": 5,
            }
        )
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if len(replicas_in_metrics(cluster.http_url)) == replicas:
                time.sleep(5)  # let the replaced replicas of the previous setup go
                if len(replicas_in_metrics(cluster.http_url)) == replicas:
                    return
        except Exception:
            pass
        time.sleep(1)
    raise RuntimeError(f"{replicas} replicas did not come up:\n{cluster.serve_logs()}")


def render(results: list[Measured]) -> str:
    by = {(m.setup, m.row.model, m.row.protocol, m.row.concurrency): m for m in results}
    setups = ["tritium-server", "serve-1", "serve-2"]
    names = {"tritium-server": "one tritium-server", "serve-1": "Serve, 1 replica", "serve-2": "Serve, 2 replicas"}
    lines = [
        "## Ray Serve: tritium behind Serve's proxies",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/ray_serve.py` "
        f"({os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, CPU only; "
        "Ray 2.60.0, one local node on loopback with 2 logical CPUs, replicas of 0.5 CPU). The same model "
        "repository everywhere: EfficientNet-Lite0 with its example config (2 instances, 1 intra-op thread "
        "each — per replica) and Triton's add_sub python model (1 instance). perf_analyzer (tritonclient "
        "2.51.0) runs on the same 2 cores, `--measurement-interval 3000 --stability-percentage 10000 "
        "--max-trials 3`. *CPU/inference* is the CPU time of the whole serving side divided by the inferences: "
        "tritium-server and its workers, or every Ray process (proxy, replicas and their workers, controller, "
        "raylet, GCS); *of it idle* is what the same processes spend with no request at all (measured for "
        "10 s before each setup's runs: Serve's controller, Ray's agents, the replicas' coordinator polls), "
        "spread over the same inferences. The machine is shared: its load average was "
        f"{LOAD[0]:.1f} when the run started and {os.getloadavg()[0]:.1f} at its end.",
        "",
        "| model | protocol | concurrency | setup | throughput (infer/s) | vs tritium-server | p50 (µs) | p99 (µs) "
        "| CPU/inference (µs) | of it idle (µs) |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model in MODELS:
        for protocol in PROTOCOLS:
            for concurrency in CONCURRENCIES:
                base = by.get(("tritium-server", model, protocol, concurrency))
                for setup in setups:
                    m = by.get((setup, model, protocol, concurrency))
                    if m is None:
                        continue
                    ratio = f"{m.row.throughput / base.row.throughput:.2f}×" if base else "–"
                    lines.append(
                        f"| {model} | {protocol} | {concurrency} | {names[setup]} | {m.row.throughput:,.1f} | {ratio} "
                        f"| {m.row.p50_us:,.0f} | {m.row.p99_us:,.0f} | {m.serving_cpu_us:,.0f} "
                        f"| {m.idle_cpu_us:,.0f} |"
                    )
    lines += [
        "",
        "### The proxy's cost per request",
        "",
        "Serve with one replica minus one tritium-server, add_sub, concurrency 1 (the same server code runs "
        "inside the replica; the difference is Serve's proxy, its routing and the hops between Ray "
        "processes):",
        "",
        "| protocol | p50 latency added (µs) | serving CPU added per request (µs) "
        "| of it, per request, not idle work (µs) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for protocol in PROTOCOLS:
        base, serve = by.get(("tritium-server", "add_sub", protocol, 1)), by.get(("serve-1", "add_sub", protocol, 1))
        if base and serve:
            busy = (serve.serving_cpu_us - serve.idle_cpu_us) - (base.serving_cpu_us - base.idle_cpu_us)
            lines.append(
                f"| {protocol} | {serve.row.p50_us - base.row.p50_us:,.0f} "
                f"| {serve.serving_cpu_us - base.serving_cpu_us:,.0f} | {busy:,.0f} |"
            )
    lines += [
        "",
        "Where that CPU goes, per request (add_sub, concurrency 1, µs; processes under 100 µs left out):",
        "",
        "| protocol | setup | CPU by process |",
        "| --- | --- | --- |",
    ]
    for protocol in PROTOCOLS:
        for setup in ("tritium-server", "serve-1"):
            m = by.get((setup, "add_sub", protocol, 1))
            if m:
                parts = sorted(((v, k) for k, v in m.by_process.items() if v >= 100), reverse=True)
                lines.append(f"| {protocol} | {names[setup]} | " + ", ".join(f"{k} {v:,.0f}" for v, k in parts) + " |")
    lines += ["", *_reading(by), ""]
    return "\n".join(lines)


def _reading(by: dict[tuple[str, str, str, int], Measured]) -> list[str]:
    """What the numbers say, computed from this run."""
    out = ["### Reading the numbers", ""]
    base, one = by.get(("tritium-server", "add_sub", "http", 1)), by.get(("serve-1", "add_sub", "http", 1))
    if base and one:
        proxy = one.by_process.get("ray::ProxyActor", 0.0)
        replica = one.by_process.get("ray::TritiumServer", 0.0)
        workers = one.by_process.get("tritium worker", 0.0)
        out.append(
            f"- **Every request pays Serve's hops.** add_sub through Serve costs {one.serving_cpu_us:,.0f} µs of "
            f"serving CPU per HTTP request against {base.serving_cpu_us:,.0f} µs in tritium-server: "
            f"{proxy:,.0f} µs in Serve's proxy (uvicorn, routing, the Ray call), {replica:,.0f} µs in the replica "
            f"(Serve's request handling, the call back to the proxy for the body, and tritium's own core) and "
            f"{workers:,.0f} µs in the model's worker, as in tritium-server. With the 2 cores shared by client "
            "and server, that CPU is the throughput limit for a small model, and a second replica on the same "
            "cores cannot raise it."
        )
    eff1, eff2 = by.get(("serve-1", EFFICIENTNET, "grpc", 4)), by.get(("serve-2", EFFICIENTNET, "grpc", 4))
    effb = by.get(("tritium-server", EFFICIENTNET, "grpc", 4))
    if eff1 and eff2 and effb:
        extra = eff1.serving_cpu_us - effb.serving_cpu_us
        out.append(
            f"- **A compute-bound model keeps more of its throughput.** EfficientNet at concurrency 4 over gRPC: "
            f"{eff1.row.throughput / effb.row.throughput:.2f}× of tritium-server with one replica, "
            f"{eff2.row.throughput / effb.row.throughput:.2f}× with two. Serve adds about {extra:,.0f} µs of CPU "
            f"per 602 KB request to onnxruntime's {effb.serving_cpu_us:,.0f} µs, on the same 2 cores; a second "
            "replica here only adds instances competing for those cores. Replicas add throughput when each "
            "brings its own CPUs or GPUs (other nodes), which this one machine cannot show."
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser, triton=False)
    args = parser.parse_args()
    prepare(args)
    tag = time.strftime("%Y%m%d-%H%M%S")
    results: list[Measured] = []
    with tempfile.TemporaryDirectory(prefix="tritium-bench-") as tmp:
        work = Path(tmp)
        repo = build_repository(work)
        server = ServerProcess([repo], log_path=work / "server.log")
        server.start()
        try:
            assert server.proc is not None
            results += measure("tritium-server", server.proc.pid, server.http_url, server.grpc_url, tag)
        finally:
            server.stop()
        cluster = RayCluster(num_cpus=2).start()  # after the baseline: an idle cluster still uses some CPU
        try:
            assert cluster.proc is not None
            for replicas in (1, 2):
                serve_setup(cluster, repo, replicas)
                results += measure(f"serve-{replicas}", cluster.proc.pid, cluster.http_url, cluster.grpc_url, tag)
        finally:
            cluster.stop()
    text = render(results)
    write_section(args.output, "ray_serve", text)
    print(text)


if __name__ == "__main__":
    main()
