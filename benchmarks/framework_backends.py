#!/usr/bin/env python3
"""Framework backends: each CPU backend's real example model in tritium against the framework in-process.

For every model below (built by ``examples/fetch_models.py``), with two
instances and one thread each:

* tritium: perf_analyzer over gRPC at concurrency 4, batch 1 (random inputs);
* in-process: the framework itself in this process, two copies of the model
  (one per instance), each driven by its own thread in a loop, batch 1, with
  the same thread settings — the most the two instances could do with no
  server at all.

Models: ``efficientnet_lite0_torchscript`` (pytorch, INTRA/INTER_OP_THREAD_COUNT 1),
``efficientnet_lite0_openvino`` (openvino, INFERENCE_NUM_THREADS 1, NUM_STREAMS 1,
f32), ``breast_cancer_xgboost`` and ``breast_cancer_lightgbm`` (fil,
cpu_nthread 1), ``efficientnet_lite0_savedmodel`` (tensorflow, TF_NUM_INTRA_THREADS
and TF_NUM_INTER_THREADS 1 with per-session threads; in-process: a
``tf.compat.v1.Session`` per copy with the same settings, as the backend runs it). It writes its section of ``docs/performance.md``
(``--output``); raw CSVs go to ``benchmarks/results/``.

Usage::

    python benchmarks/framework_backends.py [--install] [--seconds 8] [--output docs/performance.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, Row, install_perf_analyzer_libraries, run_perf, write_section  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

MODELS = {
    # model -> (backend, model file)
    "efficientnet_lite0_torchscript": ("pytorch", "model.pt"),
    "efficientnet_lite0_openvino": ("openvino", "model.xml"),
    "breast_cancer_xgboost": ("fil", "xgboost.json"),
    "breast_cancer_lightgbm": ("fil", "model.txt"),
    "efficientnet_lite0_savedmodel": ("tensorflow", "model.savedmodel"),
}
INSTANCES = 2


def build(work: Path) -> Path:
    """The example models, each with two single-threaded instances."""
    repo = work / "models"
    command = [
        sys.executable,
        str(ROOT / "examples" / "fetch_models.py"),
        "--output",
        str(repo),
        "--images",
        str(work / "images"),
    ]
    for name in (
        "efficientnet_lite0_torchscript",
        "efficientnet_lite0_openvino",
        "breast_cancer_trees",
        "efficientnet_lite0_savedmodel",
    ):
        command += ["--model", name]
    subprocess.run(command, check=True, capture_output=True, timeout=900)
    shutil.rmtree(repo / "efficientnet_lite0_onnx")  # built only to convert it to IR
    for name, (backend, _file) in MODELS.items():
        config = repo / name / "config.pbtxt"
        text = re.sub(
            r"instance_group \[.*?\]",
            f"instance_group [ {{ count: {INSTANCES} kind: KIND_CPU }} ]",
            config.read_text(),
            flags=re.S,
        )
        if backend == "fil":
            text += 'parameters { key: "cpu_nthread" value: { string_value: "1" } }\n'
        config.write_text(text)
    return repo


def _predictor(repo: Path, name: str) -> Callable[[], Any]:
    """One in-process copy of model ``name`` with the server's thread settings; returns a batch-1 call."""
    import numpy as np

    backend, filename = MODELS[name]
    path = repo / name / "1" / filename
    if backend == "pytorch":
        import torch

        torch.set_num_threads(1)
        sys.path.insert(0, str(ROOT / "examples"))
        import framework_examples

        module = framework_examples.load_torchscript(path)
        x = torch.from_numpy(np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32))

        def run_torch() -> Any:
            with torch.inference_mode():
                return module(x)

        return run_torch
    if backend == "openvino":
        from tritium.backends.openvino.libtriton_openvino import import_openvino

        ov = import_openvino()

        compiled = ov.Core().compile_model(
            str(path), "CPU", {"INFERENCE_NUM_THREADS": "1", "NUM_STREAMS": "1", "INFERENCE_PRECISION_HINT": "f32"}
        )
        request = compiled.create_infer_request()
        x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
        return lambda: request.infer({"input": x})
    if backend == "tensorflow":
        return _tensorflow_predictor(path)
    x = np.random.default_rng(0).random((1, 30), dtype=np.float32)
    if name.endswith("lightgbm"):
        import lightgbm

        booster = lightgbm.Booster(model_file=str(path))
        return lambda: booster.predict(x, num_threads=1)
    import treelite

    model = treelite.frontend.load_xgboost_model(str(path), format_choice="json")
    return lambda: treelite.gtil.predict(model, x, nthread=1)


def _tensorflow_predictor(path: Path) -> Callable[[], Any]:
    """The SavedModel in a ``tf.compat.v1.Session`` with the example's thread settings (as the backend runs it)."""
    import numpy as np
    import tensorflow as tf

    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=1, inter_op_parallelism_threads=1, use_per_session_threads=True
    )
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph, config=config)
    with graph.as_default():
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(path))
    signature = meta.signature_def["serving_default"]
    run = session.make_callable([signature.outputs["output_0"].name], [signature.inputs["input"].name])
    x = np.random.default_rng(0).random((1, 224, 224, 3), dtype=np.float32)
    return lambda: run(x)


def in_process(repo: Path, name: str, seconds: float) -> dict[str, float]:
    """Throughput and p50 of ``INSTANCES`` copies of the model, each in its own thread."""
    calls = [_predictor(repo, name) for _ in range(INSTANCES)]
    for call in calls:
        for _ in range(5):
            call()
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    def loop(call: Callable[[], Any]) -> None:
        while time.perf_counter() < stop:
            t = time.perf_counter()
            call()
            latencies.append(time.perf_counter() - t)

    threads = [threading.Thread(target=loop, args=(c,)) for c in calls]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"throughput": len(latencies) / (time.perf_counter() - start), "p50_us": statistics.median(latencies) * 1e6}


def render(rows: dict[str, Row], references: dict[str, dict[str, float]], note: str) -> str:
    lines = [
        "## Framework backends: tritium against the framework in-process",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/framework_backends.py` "
        f"({os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, CPU only). "
        f"Each model has {INSTANCES} single-threaded instances; tritium is driven by perf_analyzer over gRPC at "
        "concurrency 4, batch 1, on the same cores; in-process is the framework itself with the same thread "
        f"settings, {INSTANCES} copies of the model each in its own thread, batch 1. {note}",
        "",
        "| model | backend | tritium (infer/s) | p50 (µs) | in-process (infer/s) | p50 (µs) | ratio | ≥ 0.9× |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, row in rows.items():
        ref = references[name]
        ratio = row.throughput / ref["throughput"]
        lines.append(
            f"| {name} | {MODELS[name][0]} | {row.throughput:,.1f} | {row.p50_us:,.0f} | {ref['throughput']:,.1f} "
            f"| {ref['p50_us']:,.0f} | **{ratio:.2f}×** | {'yes' if ratio >= 0.9 else 'no'} |"
        )
    lines += [
        "",
        "CPU per inference in the same tritium runs (µs): core / workers / perf_analyzer — "
        + "; ".join(
            f"{n}: {r.server_cpu_us:,.0f} / {r.worker_cpu_us:,.0f} / {r.client_cpu_us:,.0f}" for n, r in rows.items()
        )
        + ". A tree model predicts one row in tens of microseconds, so the per-request cost of the server "
        "(HTTP/gRPC, scheduling, the core-worker round trip) and of the client on the same two cores sets its "
        "rate; the image models spend most of their time in the framework.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--install", action="store_true", help="install perf_analyzer's libraries (libb64, libcudart)")
    parser.add_argument("--seconds", type=float, default=8.0, help="in-process run per model (default 8)")
    parser.add_argument("--note", default="", help="a sentence about the run (e.g. that the machine was shared)")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "performance.md")
    args = parser.parse_args()
    if args.install:
        install_perf_analyzer_libraries()
    tag = time.strftime("%Y%m%d-%H%M%S")
    with tempfile.TemporaryDirectory(prefix="tritium-bench-fw-") as tmp:
        work = Path(tmp)
        repo = build(work)
        references = {}
        for name in MODELS:
            print(f"in-process {name} ...", flush=True)
            references[name] = in_process(repo, name, args.seconds)
            print(references[name], flush=True)
        rows: dict[str, Row] = {}
        server = ServerProcess([repo], log_path=work / "server.log")
        server.start()
        try:
            assert server.proc is not None
            for name in MODELS:
                rows[name] = run_perf("tritium", server.proc.pid, name, server.grpc_url, "grpc", 4, tag)
                print(rows[name], flush=True)
        finally:
            server.stop()
    text = render(rows, references, args.note)
    write_section(args.output, "framework_backends", text)
    print(text)


if __name__ == "__main__":
    main()
