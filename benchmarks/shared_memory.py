#!/usr/bin/env python3
"""Shared-memory benchmark: identity on 16 MiB FP32 with and without ``--shared-memory system``, one run.

perf_analyzer at concurrency 1 over HTTP and gRPC against: tritium's ``identity``
backend and a python ``model.py`` identity (the same file for both servers), each with
and without system shared memory, then the real Triton 2.51's python backend with the
same model.py, with and without system shared memory. Writes the ``shared_memory``
section of ``docs/performance.md`` (inferences/s and tensor bytes/s: 16 MiB in + 16 MiB
out per inference).

``--soak N`` instead sends N requests through registered regions (the long form of the
soak test; default 100,000) and reports the core's RSS, its descriptors and /dev/shm
before and after (section ``shared_memory_soak``).

Usage::

    python benchmarks/shared_memory.py [--install] [--install-triton] [--triton-venv DIR] [--soak [N]]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import Row, run_perf, write_section  # noqa: E402
from benchmarks.python_backend import IDENTITY as PY_IDENTITY  # noqa: E402  (the same model.py)
from benchmarks.triton import TritonServer, add_arguments, prepare  # noqa: E402
from tests.support.procs import shm_entries, worker_pids  # noqa: E402
from tests.support.server import ServerProcess, free_port  # noqa: E402

ELEMENTS = 4 * 1024 * 1024  # FP32: 16 MiB
NBYTES = ELEMENTS * 4
PY_CONFIG = f"""
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {ELEMENTS} ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {ELEMENTS} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
SHM = ["--shared-memory", "system", "--output-shared-memory-size", str(NBYTES)]
CONCURRENCY = 1


def build(repo: Path, with_native: bool) -> None:
    (repo / "identity_py" / "1").mkdir(parents=True)
    (repo / "identity_py" / "config.pbtxt").write_text(textwrap.dedent(PY_CONFIG))
    (repo / "identity_py" / "1" / "model.py").write_text(textwrap.dedent(PY_IDENTITY))
    if with_native:
        (repo / "identity_16mib" / "1").mkdir(parents=True)
        (repo / "identity_16mib" / "config.pbtxt").write_text(
            textwrap.dedent(PY_CONFIG).replace('backend: "python"', 'backend: "identity"')
        )


def measure(server: str, pid: int, models: list[str], http_url: str, grpc_url: str, tag: str) -> list[Row]:
    rows = []
    for model in models:
        for protocol, url in (("http", http_url), ("grpc", grpc_url)):
            for shm in (False, True):
                row = run_perf(
                    server, pid, model, url, protocol, CONCURRENCY, tag + ("_shm" if shm else ""), SHM if shm else []
                )
                row.server = f"{server}{' shm' if shm else ''}"
                print(row, flush=True)
                rows.append(row)
    return rows


def render(rows: list[Row]) -> str:
    by = {(r.server, r.model, r.protocol): r for r in rows}
    mib = 2 * NBYTES / 2**20
    lines = [
        "## System shared memory: identity, 16 MiB FP32",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/shared_memory.py`: perf_analyzer at "
        f"concurrency {CONCURRENCY}, with and without `--shared-memory system` (inputs and outputs in regions). "
        "`identity_py` is the same model.py on both servers; `identity_16mib` is tritium's identity backend. "
        "Tensor bytes/s count 16 MiB in and 16 MiB out per inference. "
        "Both servers ran back to back on the same machine; absolute numbers vary from run to run on "
        "these shared machines, the ratios within one run are the result.",
        "",
        "| server | model | protocol | infer/s | tensor MiB/s | p50 (ms) | server CPU / worker CPU per inference (ms) |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r.server} | {r.model} | {r.protocol} | {r.throughput:,.1f} | {r.throughput * mib:,.0f} | "
            f"{r.p50_us / 1000:,.1f} | {r.server_cpu_us / 1000:,.2f} / {r.worker_cpu_us / 1000:,.2f} |"
        )
    lines += ["", "### Targets", "", "| target | measured | met |", "| --- | --- | --- |"]
    for model in ("identity_py", "identity_16mib"):
        for protocol in ("http", "grpc"):
            with_shm, without = by.get(("tritium shm", model, protocol)), by.get(("tritium", model, protocol))
            if with_shm and without:
                ratio = with_shm.throughput / without.throughput
                lines.append(
                    f"| {model}, {protocol}: tritium shm ≥ 2 × tritium without | **{ratio:.2f}×** | "
                    f"{'yes' if ratio >= 2 else 'no'} |"
                )
            triton = by.get(("triton shm", "identity_py", protocol))
            if with_shm and triton:
                ratio = with_shm.throughput / triton.throughput
                lines.append(
                    f"| {model}, {protocol}: tritium shm ≥ 1.0 × Triton shm (python identity) | "
                    f"**{ratio:.2f}×** | {'yes' if ratio >= 1 else 'no'} |"
                )
    return "\n".join(lines) + "\n"


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _dev_shm_held(pids: list[int]) -> int:
    """Bytes of /dev/shm files the processes hold open or mapped (each file once)."""
    files: set[str] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("/dev/shm/"):
                    files.add(target)
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                fields = line.split()
                if len(fields) > 5 and fields[5].startswith("/dev/shm/"):
                    files.add(fields[5])
        except OSError:
            continue
    return sum(os.stat(f).st_size for f in files if os.path.exists(f.removesuffix(" (deleted)")))


def soak(count: int, output: Path) -> None:
    """N requests (inputs and outputs in regions, regions re-registered every 1,000), memory before/after."""
    warnings.simplefilter("ignore")
    import numpy as np
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm

    with tempfile.TemporaryDirectory(prefix="tritium-shmsoak-") as tmp:
        repo = Path(tmp) / "models"
        (repo / "identity_fp32" / "1").mkdir(parents=True)
        (repo / "identity_fp32" / "config.pbtxt").write_text(
            'backend: "identity"\nmax_batch_size: 0\n'
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
            'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
        )
        server = ServerProcess([repo], log_path=Path(tmp) / "tritium.log").start()
        prefix = f"/tritium_soak_{os.getpid()}"
        handles = [shm.create_shared_memory_region(n, f"{prefix}_{n}", 64) for n in ("in", "out")]
        try:
            assert server.proc is not None
            core = server.proc.pid
            client = httpclient.InferenceServerClient(server.http_url)
            for n in ("in", "out"):
                client.register_system_shared_memory(n, f"{prefix}_{n}", 64)
            shm.set_shared_memory_region(handles[0], [np.arange(16, dtype=np.float32)])
            inp = httpclient.InferInput("INPUT0", [16], "FP32")
            inp.set_shared_memory("in", 64)
            out = httpclient.InferRequestedOutput("OUTPUT0")
            out.set_shared_memory("out", 64)

            def burst(n: int) -> None:
                for i in range(n):
                    client.infer("identity_fp32", [inp], outputs=[out])
                    if i % 1000 == 999:
                        client.unregister_system_shared_memory("out")
                        client.register_system_shared_memory("out", f"{prefix}_out", 64)

            burst(1000)
            workers = worker_pids(core)
            before = (
                _rss_kib(core),
                len(os.listdir(f"/proc/{core}/fd")),
                _dev_shm_held([core, *workers]),
                len([e for e in shm_entries() if e.startswith("tritium")]),
            )
            start = time.perf_counter()
            burst(count)
            seconds = time.perf_counter() - start
            after = (
                _rss_kib(core),
                len(os.listdir(f"/proc/{core}/fd")),
                _dev_shm_held([core, *workers]),
                len([e for e in shm_entries() if e.startswith("tritium")]),
            )
            worker_fds = [len(os.listdir(f"/proc/{w}/fd")) for w in workers]
            client.close()
        finally:
            server.stop()
            for handle in handles:
                shm.destroy_shared_memory_region(handle)
    growth = after[0] / before[0] - 1
    text = (
        "\n".join(
            [
                "## Shared-memory soak",
                "",
                f"Measured {datetime.date.today().isoformat()} by `python benchmarks/shared_memory.py --soak {count}`: "
                f"{count:,} HTTP requests of the identity backend with input and output in system shared memory "
                f"({count / seconds:,.0f} requests/s), the output region re-registered every 1,000 requests.",
                "",
                "| | before | after |",
                "| --- | ---: | ---: |",
                f"| core RSS (KiB) | {before[0]:,} | {after[0]:,} ({growth:+.1%}) |",
                f"| core open descriptors | {before[1]} | {after[1]} |",
                f"| /dev/shm bytes the server holds open or mapped (the client's regions) | {before[2]:,} | {after[2]:,} |",
                f"| /dev/shm entries named tritium* (the soak's own two regions) | {before[3]} | {after[3]} |",
                f"| worker open descriptors (after) | | {worker_fds} |",
                "",
                f"Flat within 5%: **{'yes' if abs(growth) <= 0.05 and before[1:] == after[1:] else 'no'}**.",
            ]
        )
        + "\n"
    )
    write_section(output, "shared_memory_soak", text)
    print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--soak", type=int, nargs="?", const=100_000, default=0, help="run the soak instead")
    parser.add_argument("--no-triton", action="store_true", help="measure tritium only")
    args = parser.parse_args()
    if args.soak:
        soak(args.soak, args.output)
        return
    prepare(args)
    tag = time.strftime("%Y%m%d-%H%M%S")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="tritium-shmbench-") as tmp:
        work = Path(tmp)
        build(work / "models", with_native=True)
        server = ServerProcess([work / "models"], log_path=work / "tritium.log").start()
        try:
            assert server.proc is not None
            rows += measure(
                "tritium", server.proc.pid, ["identity_py", "identity_16mib"], server.http_url, server.grpc_url, tag
            )
        finally:
            server.stop()
        if not args.no_triton:
            build(work / "triton_models", with_native=False)
            triton = TritonServer(
                args.triton_venv, work / "triton_models", free_port(), free_port(), free_port(), work / "triton.log"
            ).start()
            try:
                assert triton.proc is not None
                rows += measure("triton", triton.proc.pid, ["identity_py"], triton.http_url, triton.grpc_url, tag)
            finally:
                triton.stop()
    text = render(rows)
    write_section(args.output, "shared_memory", text)
    print(text)


if __name__ == "__main__":
    main()
