#!/usr/bin/env python3
"""Check the GPU backends end to end on a machine with an NVIDIA GPU: TensorRT, and onnxruntime-gpu.

Run it through ``scripts/gpu_check_tensorrt.sh`` (which makes a virtual
environment with what it needs), or directly with an interpreter that has
tritium with the ``tensorrt`` and ``onnxruntime-gpu`` extras, the ``examples``
extra (to build EfficientNet-Lite0), ``tritonclient[http,grpc]==2.51.0`` and ``onnx``.

What it does (a few minutes, most of it building the TensorRT engine):

1. builds EfficientNet-Lite0 as ONNX with ``examples/fetch_models.py`` and the
   coffee photo;
2. builds a TensorRT plan from that ONNX file with TensorRT's Python builder
   (``OnnxParser``, one optimisation profile for batch 1..8, FP32);
3. writes a model repository: ``efficientnet_trt`` (``platform:
   "tensorrt_plan"``, config completed from the engine), ``efficientnet_ort_cuda``
   (onnxruntime, KIND_GPU: the CUDA execution provider) and
   ``efficientnet_ort_trt`` (onnxruntime with ``gpu_execution_accelerator
   [{ name: "tensorrt" }]`` and Triton's parameter names), each on ``--device``;
4. starts ``python -m tritium`` and checks that all three are READY;
5. for the coffee photo, over HTTP and gRPC: each model's top-5 must equal
   ONNX Runtime's on the CPU in this process (espresso first), logits within
   0.05; a batch of 3 through the dynamic batcher returns each row;
6. with ``--bench``: each served model at concurrency 4 (tritonclient threads,
   ``--seconds``) against the same framework in-process (onnxruntime sessions
   with the same provider; the TensorRT engine through the backend's own
   execute path without the server), as ratios;
7. prints PASS/FAIL per check and overall; exits 1 on any failure.

Usage: ``python scripts/gpu_check_tensorrt.py [--device 0] [--bench] [--seconds 10] [--keep]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
RESULTS: list[tuple[str, bool, str]] = []
MODELS = ("efficientnet_trt", "efficientnet_ort_cuda", "efficientnet_ort_trt")


def check(name: str, ok: bool, detail: str = "") -> bool:
    RESULTS.append((name, ok, detail))
    print(f"{'PASS' if ok else 'FAIL'}  {name}{(': ' + detail) if detail else ''}", flush=True)
    return ok


def build_plan(onnx_path: Path, plan_path: Path) -> None:
    """A TensorRT engine from the ONNX file: explicit batch 1..8 (opt 4), FP32, 1 GiB workspace."""
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_path.read_bytes()):
        raise RuntimeError(
            "TensorRT could not parse the ONNX file: "
            + "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        )
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 30)
    profile = builder.create_optimization_profile()
    profile.set_shape("input", (1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise RuntimeError("TensorRT failed to build the engine (see its log above)")
    plan_path.write_bytes(bytes(plan))


def write_repository(work: Path, device: int) -> Path:
    repo = work / "models"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "fetch_models.py"),
            "--model",
            "efficientnet_lite0_onnx",
            "--output",
            str(work / "built"),
            "--images",
            str(work / "images"),
        ],
        check=True,
        timeout=900,
    )
    onnx_path = work / "built" / "efficientnet_lite0_onnx" / "1" / "model.onnx"
    group = f"instance_group [ {{ count: 1 kind: KIND_GPU gpus: [ {device} ] }} ]\n"
    io = (
        'input [ { name: "input" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]\n'
        'output [ { name: "logits" data_type: TYPE_FP32 dims: [ 1000 ] } ]\n'
    )
    batching = "dynamic_batching { max_queue_delay_microseconds: 20000 }\n"
    (repo / "efficientnet_trt" / "1").mkdir(parents=True)
    start = time.monotonic()
    build_plan(onnx_path, repo / "efficientnet_trt" / "1" / "model.plan")
    check("TensorRT builds a plan from EfficientNet-Lite0's ONNX", True, f"{time.monotonic() - start:.0f} s")
    # inputs, outputs, max_batch_size and dynamic_batching come from the engine (auto-complete)
    (repo / "efficientnet_trt" / "config.pbtxt").write_text('platform: "tensorrt_plan"\n' + group)
    trt_ep = (
        'optimization { execution_accelerators { gpu_execution_accelerator : [ { name : "tensorrt"\n'
        '  parameters { key: "precision_mode" value: "FP32" }\n'
        '  parameters { key: "max_workspace_size_bytes" value: "1073741824" }\n'
        f'  parameters {{ key: "trt_engine_cache_enable" value: "true" }}\n'
        f'  parameters {{ key: "trt_engine_cache_path" value: "{work / "trt_cache"}" }} }} ] }} }}\n'
    )
    for name, extra in (("efficientnet_ort_cuda", ""), ("efficientnet_ort_trt", trt_ep)):
        (repo / name / "1").mkdir(parents=True)
        shutil.copyfile(onnx_path, repo / name / "1" / "model.onnx")
        (repo / name / "config.pbtxt").write_text(
            'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n' + io + group + batching + extra
        )
    return repo


def _infer(url: str, protocol: str, model: str, batch: np.ndarray) -> np.ndarray:
    if protocol == "http":
        import tritonclient.http as client_module
    else:
        import tritonclient.grpc as client_module
    client = client_module.InferenceServerClient(url)
    tensor = client_module.InferInput("input", list(batch.shape), "FP32")
    tensor.set_data_from_numpy(batch)
    try:
        return client.infer(model, [tensor]).as_numpy("logits")
    finally:
        client.close()


def served_rate(url: str, model: str, x: np.ndarray, seconds: float) -> float:
    """Inferences per second with 4 concurrent gRPC clients."""
    stop = time.monotonic() + seconds
    counts = [0] * 4

    def loop(i: int) -> None:
        while time.monotonic() < stop:
            _infer(url, "grpc", model, x)
            counts[i] += 1

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(loop, range(4)))
    return sum(counts) / seconds


def in_process_rate(run: Callable[[], Any], seconds: float) -> float:
    stop = time.monotonic() + seconds
    counts = [0, 0]

    def loop(i: int) -> None:
        while time.monotonic() < stop:
            run()
            counts[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / seconds


def in_process_runner(repo: Path, model: str, device: int, x: np.ndarray) -> Callable[[], Any]:
    """The framework without the server: an onnxruntime session, or the tensorrt backend's execute path."""
    if model == "efficientnet_trt":
        import importlib.util

        from tritium.core.backend.api import Backend, Model, ModelInstance, Request

        spec = importlib.util.spec_from_file_location("trt_backend", ROOT / "backends/tensorrt/libtriton_tensorrt.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        m = Model(model, 1, {"name": model}, str(repo / model), Backend("tensorrt", "", {}), True)
        module.TRITONBACKEND_ModelInitialize(m)
        instance = ModelInstance(f"{model}_0", "KIND_GPU", device, m)
        module.TRITONBACKEND_ModelInstanceInitialize(instance)

        class Sink:
            def send_response(self, *args: Any) -> None:
                pass

            def output_buffer(self, *args: Any) -> Any:
                raise NotImplementedError

        return lambda: module.TRITONBACKEND_ModelInstanceExecute(
            instance, [Request("", 0, 0, {}, {"input": x}, [], Sink())]
        )
    import onnxruntime as ort

    providers: list[Any] = [("CUDAExecutionProvider", {"device_id": str(device)}), "CPUExecutionProvider"]
    if model == "efficientnet_ort_trt":
        providers.insert(0, ("TensorrtExecutionProvider", {"device_id": str(device)}))
    session = ort.InferenceSession(str(repo / model / "1" / "model.onnx"), providers=providers)
    return lambda: session.run(["logits"], {"input": x})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--bench", action="store_true", help="also measure throughput against in-process")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    started = time.monotonic()
    import image_client
    import onnxruntime as ort

    from tests.support.server import ServerProcess

    work = Path(tempfile.mkdtemp(prefix="tritium-gpu-check-trt-"))
    server = None
    try:
        repo = write_repository(work, args.device)
        img = image_client.load_image(work / "images" / "coffee.jpg")
        coffee = image_client.preprocess(img, "FORMAT_NCHW", "FP32", 3, 224, 224, "INCEPTION")[np.newaxis]
        cpu = ort.InferenceSession(
            str(repo / "efficientnet_ort_cuda" / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
        )
        expected = cpu.run(["logits"], {"input": coffee})[0]
        top5 = list(np.argsort(-expected[0])[:5])
        check("onnxruntime on the CPU names espresso first", top5[0] == 967, f"top-5 {top5}")
        server = ServerProcess([repo], ["--exit-on-error=false"], log_path=work / "tritium.log")
        server.start()
        import tritonclient.http as httpclient

        ready = {m: httpclient.InferenceServerClient(server.http_url).is_model_ready(m) for m in MODELS}
        check("all three GPU models are READY", all(ready.values()), json.dumps(ready))
        for model in (m for m in MODELS if ready[m]):
            for protocol, url in (("http", server.http_url), ("grpc", server.grpc_url)):
                logits = _infer(url, protocol, model, coffee)
                got = list(np.argsort(-logits[0])[:5])
                diff = float(np.max(np.abs(logits - expected)))
                check(
                    f"[{protocol}] {model}: top-5 equals onnxruntime on the CPU",
                    got == top5 and diff < 0.05,
                    f"top-5 {got}, max logit diff {diff:.4f}",
                )
            batch = np.concatenate([coffee, np.zeros_like(coffee), coffee])
            logits = _infer(server.grpc_url, "grpc", model, batch)
            check(
                f"{model}: a batch of 3 returns each row",
                logits.shape == (3, 1000) and int(logits[0].argmax()) == int(logits[2].argmax()) == 967,
            )
        if args.bench:
            for model in (m for m in MODELS if ready[m]):
                served = served_rate(server.grpc_url, model, coffee, args.seconds)
                local = in_process_rate(in_process_runner(repo, model, args.device, coffee), args.seconds)
                print(
                    f"BENCH {model}: tritium {served:.1f} infer/s, in-process {local:.1f} infer/s, "
                    f"ratio {served / local:.2f}x",
                    flush=True,
                )
        check("tritium still running", server.proc is not None and server.proc.poll() is None)
    except Exception as exc:  # noqa: BLE001 - report and fail
        check("ran to the end", False, f"{type(exc).__name__}: {exc}")
    finally:
        if server is not None:
            server.stop()
    failed = [name for name, ok, _ in RESULTS if not ok]
    if failed and server is not None:
        print(f"--- last lines of {server.log_path} ---\n" + "\n".join(server.log().splitlines()[-40:]))
    if args.keep or failed:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"checks": len(RESULTS), "failed": failed, "seconds": round(time.monotonic() - started, 1)}))
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
