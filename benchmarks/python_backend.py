#!/usr/bin/env python3
"""Python-backend benchmark: the same ``model.py`` files on tritium and on the real Triton 2.51, one run.

Models (both servers load the same files), each run listed in :data:`RUNS`:

* ``add_sub`` (FP32 [4] + [4] -> sum, difference) at concurrency 1 and 8 over
  HTTP and gRPC (perf_analyzer, binary tensors) and over HTTP with JSON tensors
  (``http+json``: wrk, see ``benchmarks/json_requests.py``);
* ``identity_16kib`` (FP32 [4096], 16 KiB) at concurrency 1 and 4 over HTTP and
  gRPC, and at concurrency 1 over gRPC with inputs and outputs in system shared
  memory (``grpc+shm``);
* ``identity_1mib`` (FP32 [262144], 1 MiB) at concurrency 4 over HTTP and gRPC.

Both servers are up for the whole run and take turns, run by run, with the same
client settings, for ``--repeat`` rounds; each row is the median round. So a
change in the machine's load hits both servers alike, which one server after
the other would not. Writes the ``python_backend`` section of
``docs/performance.md``.

Usage::

    python benchmarks/python_backend.py [--install] [--install-triton] [--triton-venv DIR] [--repeat N]
                                        [--skip-json]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import Row, python_speed_s, run_perf, write_section  # noqa: E402
from benchmarks.triton import TritonServer, add_arguments, prepare  # noqa: E402
from tests.support.server import ServerProcess, free_port  # noqa: E402

ADD_SUB_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
ADD_SUB = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]))
        return responses
"""
IDENTITY_CONFIG = """
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {count} ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {count} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests
        ]
"""
#: (model, protocol, concurrency) of every run, in the order of the tables; protocol is
#: ``http`` or ``grpc`` (perf_analyzer, binary tensors), ``grpc+shm`` (perf_analyzer with
#: system shared memory) or ``http+json`` (wrk, JSON tensors; add_sub only)
RUNS = [
    ("add_sub", "http", 1),
    ("add_sub", "grpc", 1),
    ("add_sub", "http+json", 1),
    ("add_sub", "http", 8),
    ("add_sub", "grpc", 8),
    ("add_sub", "http+json", 8),
    ("identity_16kib", "http", 1),
    ("identity_16kib", "grpc", 1),
    ("identity_16kib", "grpc+shm", 1),
    ("identity_16kib", "http", 4),
    ("identity_16kib", "grpc", 4),
    ("identity_1mib", "http", 4),
    ("identity_1mib", "grpc", 4),
]
#: FP32 elements of each identity model
IDENTITY_COUNTS = {"identity_16kib": 4096, "identity_1mib": 262144}
#: seconds of each wrk run (the perf_analyzer runs take about as long)
JSON_SECONDS = 6.0


def build(repo: Path) -> None:
    models = [("add_sub", ADD_SUB_CONFIG, ADD_SUB)]
    models += [(name, IDENTITY_CONFIG.format(count=count), IDENTITY) for name, count in IDENTITY_COUNTS.items()]
    for name, config, code in models:
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(textwrap.dedent(config))
        (repo / name / "1" / "model.py").write_text(textwrap.dedent(code))


def run_one(
    server: str, pid: int, http_url: str, grpc_url: str, model: str, protocol: str, concurrency: int, tag: str
) -> Row:
    """One run of :data:`RUNS` against one server."""
    if protocol == "http+json":
        from benchmarks.json_requests import measure_wrk

        return measure_wrk(server, pid, http_url, concurrency, JSON_SECONDS)
    if protocol == "grpc+shm":
        nbytes = 4 * IDENTITY_COUNTS[model]
        shm = ["--shared-memory", "system", "--output-shared-memory-size", str(nbytes)]
        row = run_perf(server, pid, model, grpc_url, "grpc", concurrency, f"{tag}_shm", shm)
        return dataclasses.replace(row, protocol=protocol)
    return run_perf(server, pid, model, http_url if protocol == "http" else grpc_url, protocol, concurrency, tag)


def measure(servers: list[tuple[str, int, str, str]], tag: str, repeat: int, json: bool = True) -> list[Row]:
    """Every run on every server, alternating servers run by run (both are up the whole time),
    ``repeat`` rounds; returns each (server, run)'s median-throughput row.

    :param json: run the ``http+json`` rows too (they need wrk).
    """
    rounds: dict[tuple[str, str, str, int], list[Row]] = {}
    for _ in range(repeat):
        for model, protocol, concurrency in RUNS:
            if protocol == "http+json" and not json:
                continue
            for name, pid, http_url, grpc_url in servers:
                row = run_one(name, pid, http_url, grpc_url, model, protocol, concurrency, tag)
                print(row, flush=True)
                rounds.setdefault((name, model, protocol, concurrency), []).append(row)
    return [sorted(rows, key=lambda r: r.throughput)[len(rows) // 2] for rows in rounds.values()]


def render(rows: list[Row], repeat: int = 1, speed_s: float | None = None) -> str:
    """The ``python_backend`` section: every run of :data:`RUNS` both servers have, and the targets.

    :param speed_s: :func:`~benchmarks.common.python_speed_s` measured before the runs.
    """
    by = {(r.server, r.model, r.protocol, r.concurrency): r for r in rows}
    pairs = [
        (
            model,
            protocol,
            concurrency,
            by[("tritium", model, protocol, concurrency)],
            by[("triton", model, protocol, concurrency)],
        )
        for model, protocol, concurrency in RUNS
        if ("tritium", model, protocol, concurrency) in by and ("triton", model, protocol, concurrency) in by
    ]
    lines = [
        "## Python models: tritium against Triton 2.51's python backend",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/python_backend.py`: the same model.py "
        "files (written by the script), one instance each, served by tritium and by the real Triton 2.51 "
        "(nvidia-pytriton 0.7.0's `tritonserver` with its python backend), with the same client settings; "
        f"both servers up at once, taking turns run by run, {repeat} rounds, each row the median round. "
        "Protocols: `http` and `grpc` are perf_analyzer with binary tensors, `grpc+shm` perf_analyzer with "
        "inputs and outputs in system shared memory, `http+json` wrk (one thread) with JSON tensors."
        + (
            f" Before the runs this machine took {speed_s:.2f} s for a pure-Python loop of 10**7 additions "
            "(`benchmarks/common.py: python_speed_s`; the slower the machine runs Python, the lower tritium's ratios)."
            if speed_s is not None
            else ""
        ),
        "",
        "| model | protocol | concurrency | tritium infer/s | Triton infer/s | ratio | tritium p50 (µs) | Triton p50 (µs) | p50 ratio |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model, protocol, concurrency, t, r in pairs:
        lines.append(
            f"| {model} | {protocol} | {concurrency} | {t.throughput:,.0f} | {r.throughput:,.0f} | "
            f"**{t.throughput / r.throughput:.2f}×** | {t.p50_us:,.0f} | {r.p50_us:,.0f} | {t.p50_us / r.p50_us:.2f}× |"
        )
    lines += [
        "",
        "CPU per inference (µs): server process / its workers or python stubs / the client (perf_analyzer or wrk).",
        "",
        "| model | protocol | concurrency | tritium | Triton |",
        "| --- | --- | ---: | --- | --- |",
    ]
    for model, protocol, concurrency, t, r in pairs:
        lines.append(
            f"| {model} | {protocol} | {concurrency} | {t.server_cpu_us:,.0f} / {t.worker_cpu_us:,.0f} / "
            f"{t.client_cpu_us:,.0f} | {r.server_cpu_us:,.0f} / {r.worker_cpu_us:,.0f} / {r.client_cpu_us:,.0f} |"
        )
    lines += ["", "### Targets (issues 12 and 27)", "", "| target | measured | met |", "| --- | --- | --- |"]
    for model, protocol, concurrency, t, r in pairs:
        what = f"{model}, {protocol}, concurrency {concurrency}"
        ratio = t.throughput / r.throughput
        floor = 1.5 if model == "identity_1mib" else 1.0  # issue 12's target for 1 MiB
        lines.append(
            f"| {what}: throughput ≥ {floor} × Triton | **{ratio:.2f}×** | {'yes' if ratio >= floor else 'no'} |"
        )
        if concurrency == 1 or model == "add_sub":
            ratio = t.p50_us / r.p50_us
            lines.append(f"| {what}: p50 ≤ 1.0 × Triton | **{ratio:.2f}×** | {'yes' if ratio <= 1.0 else 'no'} |")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def side_by_side(triton_venv: Path, prefix: str) -> Iterator[list[tuple[str, int, str, str]]]:
    """tritium and Triton 2.51 up at once on the models :func:`build` writes, both stopped on exit.

    :param triton_venv: the virtual environment holding nvidia-pytriton.
    :param prefix: the temporary folder's name prefix (it holds the models and both logs).
    :returns: (name, pid, HTTP address, gRPC address) of each server, tritium first.
    """
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        repo = work / "models"
        build(repo)
        server = ServerProcess([repo], log_path=work / "tritium.log").start()
        try:
            triton = TritonServer(triton_venv, repo, free_port(), free_port(), free_port(), work / "triton.log").start()
            try:
                assert server.proc is not None and triton.proc is not None
                yield [
                    ("tritium", server.proc.pid, server.http_url, server.grpc_url),
                    ("triton", triton.proc.pid, triton.http_url, triton.grpc_url),
                ]
            finally:
                triton.stop()
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every run; each row is the median round")
    parser.add_argument("--skip-json", action="store_true", help="leave out the http+json rows (no wrk here)")
    args = parser.parse_args()
    prepare(args)
    tag = time.strftime("%Y%m%d-%H%M%S")
    speed_s = python_speed_s()
    print(f"pure-Python loop of 10**7 additions: {speed_s:.2f} s", flush=True)
    with side_by_side(args.triton_venv, "tritium-pybench-") as servers:
        rows = measure(servers, tag, args.repeat, json=not args.skip_json)
    text = render(rows, args.repeat, speed_s)
    write_section(args.output, "python_backend", text)
    print(text)


if __name__ == "__main__":
    main()
