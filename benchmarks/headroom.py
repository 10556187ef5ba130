#!/usr/bin/env python3
"""How far tritium's request path is from the least Python that does the same job: one run, four servers.

Issue 27 asks a Python core and a Python worker process per model instance to
answer a small request as fast as Triton's C++. This run measures how much
room that layout leaves, with two yardsticks that serve the same KServe JSON
``add_sub`` request (FP32 [4] + [4]) with tritium's process layout (a uvloop
core and a worker process over a Unix socketpair):

* ``benchmarks/minimal_server.py``: nothing else. Its figures bound what any
  reshaping of tritium's layers can reach on this machine.
* ``benchmarks/lean_server.py``: the minimal server plus, each written the
  short way, the work no request path can drop (checks against the model's
  signature, tensors in a shared-memory arena, a scheduler with a queue,
  statistics, python-backend-like request and response objects in the
  worker). Its figures show what a lean path that keeps that work could reach.

The four servers, tritium, Triton 2.51 (python backend) and the two
yardsticks, are up at once and take turns, run by run, under the same wrk
client as the JSON rows of ``benchmarks/python_backend.py``
(:func:`~benchmarks.json_requests.measure_wrk`: one thread, keep-alive
connections, the first answer checked value by value, any non-2xx answer
failing the run). Each row is the median of ``--repeat`` rounds.

Usage::

    python benchmarks/headroom.py [--install-triton] [--triton-venv DIR] [--repeat 3] [--seconds 5]
                                  [--output docs/performance.md]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, Row, python_speed_s, write_section  # noqa: E402
from benchmarks.json_requests import measure_wrk  # noqa: E402
from benchmarks.python_backend import side_by_side  # noqa: E402
from benchmarks.triton import add_arguments, prepare  # noqa: E402
from tests.support.server import free_port  # noqa: E402

SERVERS = ("tritium", "triton", "lean", "minimal")
#: the yardstick servers, each a script in benchmarks/
YARDSTICKS = {"lean": "lean_server.py", "minimal": "minimal_server.py"}


@contextlib.contextmanager
def yardstick(script: str) -> Iterator[tuple[int, str]]:
    """``benchmarks/<script>`` on a free loopback port: ``(pid, "127.0.0.1:port")``; killed on exit.

    :raises SystemExit: when it does not accept connections within 20 s.
    """
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / script), str(port)])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{script} did not start") from None
                time.sleep(0.1)
        yield proc.pid, f"127.0.0.1:{port}"
    finally:
        proc.kill()  # its forked worker ends when the socketpair closes
        proc.wait()


def measure(triton_venv: Path, concurrencies: list[int], repeat: int, seconds: float) -> dict[tuple[str, int], Row]:
    """Every server at every concurrency, ``repeat`` rounds alternating; the median-throughput row of each."""
    runs: dict[tuple[str, int], list[Row]] = {}
    with contextlib.ExitStack() as stack:
        servers = stack.enter_context(side_by_side(triton_venv, "tritium-headroom-"))
        targets = [(name, server_pid, http) for name, server_pid, http, _grpc in servers]
        for name, script in YARDSTICKS.items():
            targets.append((name, *stack.enter_context(yardstick(script))))
        for _ in range(repeat):
            for concurrency in concurrencies:
                for name, server_pid, http in targets:
                    row = measure_wrk(name, server_pid, http, concurrency, seconds)
                    print(
                        f"{name} c{concurrency}: {row.throughput:,.0f}/s p50 {row.p50_us:.0f} µs, CPU per request "
                        f"{row.server_cpu_us:.0f} + {row.worker_cpu_us:.0f} µs",
                        flush=True,
                    )
                    runs.setdefault((name, concurrency), []).append(row)
    return {key: sorted(rows, key=lambda r: r.throughput)[len(rows) // 2] for key, rows in runs.items()}


def render(
    rows: dict[tuple[str, int], Row], concurrencies: list[int], repeat: int, seconds: float, speed_s: float
) -> str:
    """The ``headroom`` section of docs/performance.md."""
    lines = [
        "## Headroom: tritium against the least Python that does the same job",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/headroom.py --repeat {repeat} "
        f"--seconds {seconds:g}`: the add_sub python model (FP32 [4] + [4]) over HTTP with JSON tensors, wrk "
        f"with one thread, median of {repeat} alternating rounds. Two yardsticks keep tritium's process layout "
        "(a uvloop core, one worker process over a Unix socket): *minimal* (`benchmarks/minimal_server.py`) "
        "has no layers at all (no checks, statistics, scheduler or shared memory); *lean* "
        "(`benchmarks/lean_server.py`) adds back, written the short way, what no request path can drop: checks "
        "against the model's signature, tensors in a shared-memory arena, a scheduler with a queue, "
        "statistics, and python-backend-like request, tensor and response objects in the worker. Before the "
        f"run this machine took {speed_s:.2f} s for a pure-Python loop of 10**7 additions. CPU per request is "
        "the server process's own plus its model processes' (tritium's worker, Triton's python stub, the "
        "yardsticks' workers).",
        "",
        "| concurrency | server | requests/s | p50 | CPU per request: core + model process | throughput vs Triton |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for concurrency in concurrencies:
        triton = rows["triton", concurrency]
        for name in SERVERS:
            row = rows[name, concurrency]
            lines.append(
                f"| {concurrency} | {name} | {row.throughput:,.0f} | {row.p50_us:.0f} µs | "
                f"{row.server_cpu_us:.0f} + {row.worker_cpu_us:.0f} µs | {row.throughput / triton.throughput:.2f}× |"
            )
    lines += [""]
    for concurrency in concurrencies:
        ours = rows["tritium", concurrency]
        ours_cpu = ours.server_cpu_us + ours.worker_cpu_us
        for name in ("lean", "minimal"):
            other = rows[name, concurrency]
            other_cpu = other.server_cpu_us + other.worker_cpu_us
            lines.append(
                f"- Concurrency {concurrency}: tritium serves {ours.throughput / other.throughput:.2f}× the {name} "
                f"server's requests/s and spends {ours_cpu / other_cpu:.1f}× its CPU per request "
                f"({ours_cpu:.0f} against {other_cpu:.0f} µs)."
            )
    if 1 in concurrencies:
        ours, triton, lean, floor = (rows[name, 1] for name in SERVERS)
        layers_us, allowed_us = ours.p50_us - floor.p50_us, triton.p50_us - floor.p50_us
        lines += [
            "",
            "Reading:",
            "",
            "- **Python and the process layout are not what keeps tritium below Triton at concurrency 1.** "
            f"With the same uvloop core, worker process, socket and wakeups, the minimal server answers in "
            f"{floor.p50_us:.0f} µs (p50), {triton.p50_us - floor.p50_us:.0f} µs sooner than Triton. What "
            "separates tritium from it is its layers: parsing into request objects, the checks, staging "
            "into the shared-memory arena, the scheduler, statistics, response assembly and rendering, "
            "in the core and again in the worker.",
            f"- **How much of that has to go.** Those layers add {layers_us:.0f} µs to the p50. To match "
            f"Triton's p50 they may add at most {allowed_us:.0f} µs: {allowed_us / layers_us:.0%} of what they "
            "cost now. Every layer is already tens to a few hundred bytecodes with no hot spot "
            "(docs/architecture.md, “Where a request's time goes”), and compiling them as written gains "
            "nothing at concurrency 1 (“Compiling the hot path”). So the target needs a shorter request "
            "path, not a faster one: far fewer Python steps between the socket and the worker for the "
            "common request.",
            f"- **A lean path keeping the work that cannot go would be there:** the lean server answers in "
            f"{lean.p50_us:.0f} µs, {lean.throughput / triton.throughput:.2f}× Triton's requests/s, with "
            f"{lean.p50_us - floor.p50_us:.0f} µs for its checks, arena, scheduler, statistics and model "
            "objects. What it still leaves out: several instances and versions, the dynamic and sequence "
            "batchers, cancellation and timeouts, tracing, the other protocols and datatypes, and Triton's "
            "exact error messages. Those are branches the common request does not take, not steps it "
            "must run through.",
            "- **What the yardsticks are not:** designs. They serve one model, trust their worker, and "
            "carry no other endpoint.",
            "- At concurrency 8 the minimal server's worker and core take several requests per system call, "
            "so its lead there shows what batching across the socket is worth, not a per-request cost; the "
            "lean server keeps one request in flight, as tritium does for a model without a batcher.",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every run; each row is the median round")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each wrk run")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    prepare(args)
    speed_s = python_speed_s()
    print(f"pure-Python loop of 10**7 additions: {speed_s:.2f} s", flush=True)
    rows = measure(args.triton_venv, args.concurrency, args.repeat, args.seconds)
    text = render(rows, args.concurrency, args.repeat, args.seconds, speed_s)
    write_section(args.output, "headroom", text)
    print(text)


if __name__ == "__main__":
    main()
