#!/usr/bin/env python3
"""gRPC transport benchmark: tritium's native and grpc.aio transports against Triton 2.51, one run.

The python-backend models of ``benchmarks/python_backend.py`` (``add_sub``
FP32 [4] at concurrency 1 and 8, ``identity_1mib`` at concurrency 4), over
gRPC only, served by tritium once per transport (``[frontends.grpc]
transport`` in a plugins.toml of the run) and then by the real Triton 2.51,
with the same perf_analyzer settings. Reports throughput, p50 and the server
process's CPU per inference (read from /proc, see :mod:`benchmarks.common`).
Writes the ``grpc_transport`` section of ``docs/performance.md``.

Usage::

    python benchmarks/grpc_transport.py [--install] [--triton-venv DIR] [--transports native,aio] [--no-triton]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.batching import measure  # noqa: E402
from benchmarks.common import Row, write_section  # noqa: E402
from benchmarks.python_backend import build  # noqa: E402
from benchmarks.triton import TritonServer, add_arguments, prepare  # noqa: E402
from tests.support.server import ServerProcess, free_port  # noqa: E402

#: (model, concurrency) of each run (models from benchmarks/python_backend.py's build)
RUNS = [("add_sub", 1), ("add_sub", 8), ("identity_1mib", 4)]
PLUGINS = """
[frontends.http]
enabled = true

[frontends.grpc]
enabled = true
transport = "{transport}"

[frontends.metrics]
enabled = false
"""


def render(rows: list[Row], servers: list[str], load: tuple[float, float]) -> str:
    by = {(r.server, r.model, r.concurrency): r for r in rows}
    lines = [
        "## gRPC transports: tritium's native and grpc.aio transports against Triton 2.51",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/grpc_transport.py`: the python-backend "
        "models of `benchmarks/python_backend.py` over gRPC, one instance each, served by tritium with each "
        "transport and then by the real Triton 2.51, with the same perf_analyzer settings, back to back. "
        "CPU: µs of the server process per inference (its workers or python stubs not counted). "
        f"The machine is shared: its 1-minute load average was {load[0]:.1f} at the start and {load[1]:.1f} at the end.",
        "",
        "| model | concurrency | server | infer/s | p50 (µs) | server CPU (µs/infer) | throughput ÷ Triton | CPU ÷ Triton |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model, concurrency in RUNS:
        triton = by.get(("triton", model, concurrency))
        for server in servers:
            r = by.get((server, model, concurrency))
            if r is None:
                continue
            ratios = (
                f"{r.throughput / triton.throughput:.2f}× | {r.server_cpu_us / triton.server_cpu_us:.2f}×"
                if triton and server != "triton"
                else "— | —"
            )
            lines.append(
                f"| {model} | {concurrency} | {server} | {r.throughput:,.0f} | {r.p50_us:,.0f} | "
                f"{r.server_cpu_us:,.0f} | {ratios} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--transports", default="native,aio", help="tritium's transports to measure, in order")
    parser.add_argument("--no-triton", action="store_true", help="measure tritium only")
    args = parser.parse_args()
    prepare(args)
    tag = time.strftime("%Y%m%d-%H%M%S")
    rows: list[Row] = []
    servers: list[str] = []
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tritium-grpcbench-") as tmp:
        work = Path(tmp)
        repo = work / "models"
        build(repo)
        for transport in args.transports.split(","):
            plugins = work / f"plugins-{transport}.toml"
            plugins.write_text(PLUGINS.format(transport=transport))
            name = f"tritium-{transport}"
            server = ServerProcess([repo], log_path=work / f"{name}.log", env={"TRITIUM_PLUGINS": str(plugins)}).start()
            try:
                assert server.proc is not None
                expected = {"native": "native", "aio": "grpc.aio"}.get(transport)
                if expected and f"gRPC transport: {expected}" not in server.log():
                    raise SystemExit(f"{name}: the server did not use that transport:\n{server.log()}")
                rows += measure(name, server.proc.pid, server.grpc_url, RUNS, tag)
                servers.append(name)
            finally:
                server.stop()
        if not args.no_triton:
            triton = TritonServer(args.triton_venv, repo, free_port(), free_port(), free_port(), work / "triton.log")
            triton.start()
            try:
                assert triton.proc is not None
                rows += measure("triton", triton.proc.pid, triton.grpc_url, RUNS, tag)
                servers.append("triton")
            finally:
                triton.stop()
    text = render(rows, servers, (load_start, os.getloadavg()[0]))
    write_section(args.output, "grpc_transport", text)
    print(text)


if __name__ == "__main__":
    main()
