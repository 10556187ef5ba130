#!/usr/bin/env python3
"""HTTP JSON requests, as curl and most non-Triton clients send them: tritium against Triton 2.51, one run.

perf_analyzer sends binary tensors only, so JSON needs another client. Both POST
the ``add_sub`` python model (``benchmarks/python_backend.py`` writes it) an FP32
[4] + [4] request with JSON ``data``:

* ``--client wrk`` (the default; ``apt-get install wrk``): wrk, one thread and
  ``--concurrency`` keep-alive connections, for ``--seconds``; one request sent
  beforehand checks the JSON answer value by value, and any non-2xx answer fails
  the run. :func:`measure_wrk` is also what ``benchmarks/python_backend.py`` runs
  for its JSON rows.
* ``--client python``: ``--concurrency`` threads, each with one keep-alive
  ``http.client`` connection, every answer's status checked and the first one's
  values.

Both servers are up for the whole run and take turns, run by run, for
``--repeat`` rounds; each row is the median round.

Per run: throughput (requests/s), p50 latency (µs, as the client sees it) and
the CPU each server spent per request: its own process, and its model
processes (tritium's workers and template; Triton's python stubs), from
/proc. The Python client's own cost limits throughput alike for both servers,
so with it the CPU per request is the fairest figure of the server's cost (the
throughput ratio understates the gap); wrk costs a few µs per request.

Usage::

    python benchmarks/json_requests.py [--install-triton] [--triton-venv DIR] [--repeat 3]
                                       [--client wrk|python] [--seconds 6] [--requests 3000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import Row  # noqa: E402
from benchmarks.python_backend import side_by_side  # noqa: E402
from benchmarks.triton import add_arguments, prepare  # noqa: E402
from tritium.perf import descendants_of, process_cpu_s  # noqa: E402

_A, _B = [1.0, 2.5, -3.0, 0.125], [0.5, 0.5, 2.0, -1.0]
BODY = json.dumps(
    {
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": _A},
            {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": _B},
        ]
    }
).encode()
EXPECTED = {"OUTPUT0": [a + b for a, b in zip(_A, _B)], "OUTPUT1": [a - b for a, b in zip(_A, _B)]}


@dataclass
class Run:
    """One server's run: requests/s, p50 latency in µs, and CPU µs per request of the server and its children."""

    server: str
    concurrency: int
    throughput: float
    p50_us: float
    server_cpu_us: float
    model_cpu_us: float


def _check(body: bytes) -> None:
    outputs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
    if outputs != EXPECTED:
        raise SystemExit(f"wrong answer: {outputs} (expected {EXPECTED})")


def _client(url: str, count: int, latencies: list[float], failures: list[str]) -> None:
    host, port = url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Content-Type": "application/json"}
    try:
        for i in range(count):
            start = time.perf_counter()
            connection.request("POST", "/v2/models/add_sub/infer", BODY, headers)
            response = connection.getresponse()
            body = response.read()
            latencies.append(time.perf_counter() - start)
            if response.status != 200:
                failures.append(f"HTTP {response.status}: {body[:200]!r}")
                return
            if i == 0:
                _check(body)
    finally:
        connection.close()


def _cpu(pid: int) -> tuple[float, float]:
    return process_cpu_s(pid), sum(process_cpu_s(child) for child in descendants_of(pid))


def measure(server: str, pid: int, url: str, concurrency: int, requests: int) -> Run:
    """Send ``requests`` JSON requests over ``concurrency`` connections; account the server's CPU."""
    _client(url, 200, [], [])  # warm up
    per_client = max(1, requests // concurrency)
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    failures: list[str] = []
    threads = [
        threading.Thread(target=_client, args=(url, per_client, latencies[i], failures)) for i in range(concurrency)
    ]
    own, children = _cpu(pid)
    wall = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - wall
    own_after, children_after = _cpu(pid)
    if failures:
        raise SystemExit(f"{server}: {failures[0]}")
    total = per_client * concurrency
    every = sorted(x for client in latencies for x in client)
    return Run(
        server,
        concurrency,
        total / wall,
        every[len(every) // 2] * 1e6,
        (own_after - own) / total * 1e6,
        (children_after - children) / total * 1e6,
    )


_WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [==[{body}]==]
"""
_UNITS_US = {"us": 1.0, "ms": 1e3, "s": 1e6}


def _wrk_latency_us(output: str, percentile: str) -> float:
    match = re.search(rf"^\s*{percentile}%\s+([0-9.]+)(us|ms|s)\s*$", output, re.M)
    if match is None:
        raise SystemExit(f"wrk printed no {percentile}% latency:\n{output}")
    return float(match.group(1)) * _UNITS_US[match.group(2)]


def measure_wrk(server: str, pid: int, url: str, concurrency: int, seconds: float) -> Row:
    """Run wrk (one thread, ``concurrency`` keep-alive connections) for ``seconds`` against the
    add_sub model with the JSON body; account the server's CPU and wrk's own per request.

    :returns: a :class:`~benchmarks.common.Row` (model ``add_sub``, protocol ``http+json``;
        throughput in requests/s, latencies in µs).
    :raises SystemExit: when wrk is missing, the answer is wrong, or any answer is not 2xx.
    """
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("wrk is not installed (apt-get install wrk), or pass --client python")
    host, port = url.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("POST", "/v2/models/add_sub/infer", BODY, {"Content-Type": "application/json"})
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    if response.status != 200:
        raise SystemExit(f"{server}: HTTP {response.status}: {body[:200]!r}")
    _check(body)
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(_WRK_SCRIPT.format(body=BODY.decode()))
        script.flush()
        command = [wrk, "-t1", f"-c{concurrency}", "--latency", "-s", script.name]
        target = f"http://{url}/v2/models/add_sub/infer"
        subprocess.run([*command, "-d1s", target], check=True, capture_output=True, timeout=60)  # warm up
        own, children = _cpu(pid)
        client = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [*command, f"-d{seconds:g}s", target], check=True, capture_output=True, text=True, timeout=seconds + 60
        )
        client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        own_after, children_after = _cpu(pid)
    output = done.stdout
    if "Non-2xx" in output or re.search(r"Socket errors: .*[1-9]", output):
        raise SystemExit(f"{server}: wrk saw failed requests:\n{output}")
    total_match = re.search(r"^\s*(\d+) requests in", output, re.M)
    rate_match = re.search(r"^Requests/sec:\s+([0-9.]+)", output, re.M)
    if total_match is None or rate_match is None:
        raise SystemExit(f"wrk printed no request count:\n{output}")
    total = int(total_match.group(1))
    client_s = (client_after.ru_utime + client_after.ru_stime) - (client.ru_utime + client.ru_stime)
    return Row(
        server,
        "add_sub",
        "http+json",
        concurrency,
        float(rate_match.group(1)),
        _wrk_latency_us(output, "50"),
        _wrk_latency_us(output, "99"),
        (own_after - own) / total * 1e6,
        (children_after - children) / total * 1e6,
        client_s / total * 1e6,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every run; each row is the median round")
    parser.add_argument("--client", choices=("wrk", "python"), default="wrk", help="the JSON client (see above)")
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each wrk run")
    parser.add_argument("--requests", type=int, default=3000, help="requests per run of the python client")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    prepare(args)
    runs: dict[tuple[str, int], list[Run]] = {}
    with side_by_side(args.triton_venv, "tritium-jsonbench-") as servers:
        for _ in range(args.repeat):
            for concurrency in args.concurrency:
                for name, pid, url, _grpc in servers:
                    if args.client == "wrk":
                        row = measure_wrk(name, pid, url, concurrency, args.seconds)
                        run = Run(name, concurrency, row.throughput, row.p50_us, row.server_cpu_us, row.worker_cpu_us)
                    else:
                        run = measure(name, pid, url, concurrency, args.requests)
                    print(run, flush=True)
                    runs.setdefault((name, concurrency), []).append(run)
    print("\n| concurrency | tritium / Triton throughput | p50 | server CPU per request | model processes' CPU |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for concurrency in args.concurrency:
        ours = sorted(runs["tritium", concurrency], key=lambda r: r.throughput)[args.repeat // 2]
        theirs = sorted(runs["triton", concurrency], key=lambda r: r.throughput)[args.repeat // 2]
        print(
            f"| {concurrency} | {ours.throughput / theirs.throughput:.2f}× ({ours.throughput:,.0f} / "
            f"{theirs.throughput:,.0f}) | {ours.p50_us / theirs.p50_us:.2f}× ({ours.p50_us:.0f} / "
            f"{theirs.p50_us:.0f} µs) | {ours.server_cpu_us / theirs.server_cpu_us:.2f}× "
            f"({ours.server_cpu_us:.0f} / {theirs.server_cpu_us:.0f} µs) | "
            f"{ours.model_cpu_us:.0f} / {theirs.model_cpu_us:.0f} µs |"
        )
    spread = {k: statistics.pstdev(r.throughput for r in v) for k, v in runs.items()}
    print("throughput spread across rounds (requests/s):", {f"{k[0]} c{k[1]}": round(v) for k, v in spread.items()})


if __name__ == "__main__":
    main()
