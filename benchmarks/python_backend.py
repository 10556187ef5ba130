#!/usr/bin/env python3
"""Python-backend benchmark: the same ``model.py`` files on tritium and on the real Triton 2.51, one run.

Models (both servers load the same files): ``add_sub`` (FP32 [4] + [4] -> sum,
difference) at concurrency 1 and 8, and ``identity_1mib`` (FP32 [262144], 1 MiB)
at concurrency 4, each over HTTP and gRPC. Both servers are up for the whole
run and take turns, run by run, with the same perf_analyzer settings, for
``--repeat`` rounds; each row is the median round. So a change in the machine's
load hits both servers alike, which one server after the other would not.
Writes the ``python_backend`` section of ``docs/performance.md``.

Usage::

    python benchmarks/python_backend.py [--install] [--install-triton] [--triton-venv DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import Row, run_perf, write_section  # noqa: E402
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
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 262144 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 262144 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
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
RUNS = [("add_sub", 1), ("add_sub", 8), ("identity_1mib", 4)]


def build(repo: Path) -> None:
    for name, config, code in (("add_sub", ADD_SUB_CONFIG, ADD_SUB), ("identity_1mib", IDENTITY_CONFIG, IDENTITY)):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(textwrap.dedent(config))
        (repo / name / "1" / "model.py").write_text(textwrap.dedent(code))


def measure(servers: list[tuple[str, int, str, str]], tag: str, repeat: int) -> list[Row]:
    """Every run on every server, alternating servers run by run (both are up the whole time),
    ``repeat`` rounds; returns each (server, run)'s median-throughput row."""
    rounds: dict[tuple[str, str, str, int], list[Row]] = {}
    for _ in range(repeat):
        for model, concurrency in RUNS:
            for protocol in ("http", "grpc"):
                for name, pid, http_url, grpc_url in servers:
                    url = http_url if protocol == "http" else grpc_url
                    row = run_perf(name, pid, model, url, protocol, concurrency, tag)
                    print(row, flush=True)
                    rounds.setdefault((name, model, protocol, concurrency), []).append(row)
    return [sorted(rows, key=lambda r: r.throughput)[len(rows) // 2] for rows in rounds.values()]


def render(rows: list[Row], repeat: int = 1) -> str:
    by = {(r.server, r.model, r.protocol, r.concurrency): r for r in rows}
    lines = [
        "## Python models: tritium against Triton 2.51's python backend",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/python_backend.py`: the same model.py "
        "files (written by the script), one instance each, served by tritium and by the real Triton 2.51 "
        "(nvidia-pytriton 0.7.0's `tritonserver` with its python backend), with the same perf_analyzer settings; "
        f"both servers up at once, taking turns run by run, {repeat} rounds, each row the median round.",
        "",
        "| model | protocol | concurrency | tritium infer/s | Triton infer/s | ratio | tritium p50 (µs) | Triton p50 (µs) | p50 ratio |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model, concurrency in RUNS:
        for protocol in ("http", "grpc"):
            t, r = by.get(("tritium", model, protocol, concurrency)), by.get(("triton", model, protocol, concurrency))
            if t and r:
                lines.append(
                    f"| {model} | {protocol} | {concurrency} | {t.throughput:,.0f} | {r.throughput:,.0f} | "
                    f"**{t.throughput / r.throughput:.2f}×** | {t.p50_us:,.0f} | {r.p50_us:,.0f} | {t.p50_us / r.p50_us:.2f}× |"
                )
    lines += [
        "",
        "CPU per inference (µs): server process / its workers or python stubs / perf_analyzer.",
        "",
        "| model | protocol | concurrency | tritium | Triton |",
        "| --- | --- | ---: | --- | --- |",
    ]
    for model, concurrency in RUNS:
        for protocol in ("http", "grpc"):
            t, r = by.get(("tritium", model, protocol, concurrency)), by.get(("triton", model, protocol, concurrency))
            if t and r:
                lines.append(
                    f"| {model} | {protocol} | {concurrency} | {t.server_cpu_us:,.0f} / {t.worker_cpu_us:,.0f} / "
                    f"{t.client_cpu_us:,.0f} | {r.server_cpu_us:,.0f} / {r.worker_cpu_us:,.0f} / {r.client_cpu_us:,.0f} |"
                )
    lines += ["", "### Targets (issue 12)", "", "| target | measured | met |", "| --- | --- | --- |"]
    for protocol in ("http", "grpc"):
        for concurrency in (1, 8):
            t, r = (
                by.get(("tritium", "add_sub", protocol, concurrency)),
                by.get(("triton", "add_sub", protocol, concurrency)),
            )
            if t and r:
                ratio = t.throughput / r.throughput
                lines.append(
                    f"| add_sub, {protocol}, concurrency {concurrency}: throughput ≥ 1.0 × Triton | **{ratio:.2f}×** | "
                    f"{'yes' if ratio >= 1.0 else 'no'} |"
                )
                ratio = t.p50_us / r.p50_us
                lines.append(
                    f"| add_sub, {protocol}, concurrency {concurrency}: p50 ≤ 1.0 × Triton | **{ratio:.2f}×** | "
                    f"{'yes' if ratio <= 1.0 else 'no'} |"
                )
    for protocol in ("http", "grpc"):
        t, r = by.get(("tritium", "identity_1mib", protocol, 4)), by.get(("triton", "identity_1mib", protocol, 4))
        if t and r:
            ratio = t.throughput / r.throughput
            lines.append(
                f"| identity 1 MiB, {protocol}, concurrency 4: throughput ≥ 1.5 × Triton | **{ratio:.2f}×** | {'yes' if ratio >= 1.5 else 'no'} |"
            )
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
    args = parser.parse_args()
    prepare(args)
    tag = time.strftime("%Y%m%d-%H%M%S")
    with side_by_side(args.triton_venv, "tritium-pybench-") as servers:
        rows = measure(servers, tag, args.repeat)
    text = render(rows, args.repeat)
    write_section(args.output, "python_backend", text)
    print(text)


if __name__ == "__main__":
    main()
