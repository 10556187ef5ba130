#!/usr/bin/env python3
"""Check tensors in CUDA shared memory end to end on a machine with an NVIDIA GPU.

Run it through ``scripts/gpu_check.sh`` (which makes a virtual environment
with what it needs), or directly with an interpreter that already has
tritium with the ``cuda`` and ``onnxruntime-gpu`` extras, ``cuda-python<13``
(tritonclient 2.51's ``cuda_shared_memory`` imports ``cuda.cudart``, which
cuda-python 13 no longer has), ``tritonclient[http,grpc]==2.51.0``,
``setuptools<81`` and ``onnx``.

What it does (about a minute once installed):

1. builds a model repository in a temporary folder: ``add_sub``, an ONNX
   model (``OUTPUT0 = INPUT0 + INPUT1``, ``OUTPUT1 = INPUT0 - INPUT1``, FP32
   ``[-1, 16]``) with one ``KIND_GPU`` instance on GPU 0, run by the
   onnxruntime backend with the CUDA execution provider;
2. checks that onnxruntime can make a CUDA session here (else the KIND_GPU
   model fails to load with a clear error, since the backend does not run a
   KIND_GPU instance on the CPU; reported, and an error with
   ``--require-gpu-ep``; ``--kind cpu`` checks CUDA shared memory alone);
3. starts ``python -m tritium`` on loopback ports and waits until ready;
4. over HTTP and then gRPC: creates CUDA regions with
   ``tritonclient.utils.cuda_shared_memory`` on GPU 0 (both inputs in one
   region at offsets 0 and 64, each output in its own region), registers
   them, runs an inference with every input and output in a CUDA region and
   compares the outputs (read back with ``get_contents_as_numpy``) with
   numpy; then a request whose input is in a CUDA region and whose outputs
   come back in the response; then a bad offset (must answer Triton's
   error) and one more good request (the server keeps serving); checks the
   status endpoint and unregisters;
5. stops the server, prints ``PASS`` or ``FAIL`` per check and overall,
   exits 1 on any failure (and shows the tail of the server's log).

Usage: ``python scripts/gpu_check.py [--device 0] [--kind gpu|cpu]
[--require-gpu-ep] [--keep]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHAPE = [1, 16]
NBYTES = 64  # 16 FP32
RESULTS: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str = "") -> bool:
    RESULTS.append((name, ok, detail))
    print(f"{'PASS' if ok else 'FAIL'}  {name}{': ' + detail if detail else ''}", flush=True)
    return ok


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_repository(root: Path, kind: str, device: int) -> Path:
    """``add_sub`` as an ONNX model with one instance of ``kind`` on ``device``."""
    import onnx
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 16]) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 16]) for n in ("OUTPUT0", "OUTPUT1")]
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
        ],
        "add_sub",
        inputs,
        outputs,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by every onnxruntime >= 1.10
    onnx.checker.check_model(model)
    folder = root / "add_sub"
    (folder / "1").mkdir(parents=True)
    onnx.save(model, str(folder / "1" / "model.onnx"))
    gpus = f" gpus: [ {device} ]" if kind == "KIND_GPU" else ""
    (folder / "config.pbtxt").write_text(
        'name: "add_sub"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },'
        ' { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },'
        ' { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
        f"instance_group [ {{ kind: {kind} count: 1{gpus} }} ]\n"
    )
    return folder / "1" / "model.onnx"


def probe_gpu_execution_provider(model_path: Path, device: int) -> tuple[bool, str]:
    """Whether onnxruntime runs this model with the CUDA execution provider here."""
    import onnxruntime as ort

    available = ort.get_available_providers()
    if "CUDAExecutionProvider" not in available:
        return False, f"onnxruntime {ort.__version__} provides only {available} (install onnxruntime-gpu)"
    if hasattr(ort, "preload_dlls"):  # onnxruntime-gpu >= 1.21: CUDA/cuDNN from the nvidia-* wheels, if any
        try:
            ort.preload_dlls()
        except Exception as exc:  # noqa: BLE001 - only a hint
            print(f"NOTE  onnxruntime.preload_dlls(): {exc}", flush=True)
    session = ort.InferenceSession(
        str(model_path), providers=[("CUDAExecutionProvider", {"device_id": device}), "CPUExecutionProvider"]
    )
    used = session.get_providers()
    if used and used[0] == "CUDAExecutionProvider":
        return True, f"onnxruntime {ort.__version__}: {used}"
    return False, f"onnxruntime {ort.__version__} fell back to {used} (CUDA or cuDNN libraries not found?)"


def nvidia_library_path() -> str:
    """LD_LIBRARY_PATH with the lib folders of installed nvidia-* wheels (cuDNN, cuBLAS) first."""
    folders: list[str] = []
    for entry in sys.path:
        nvidia = Path(entry) / "nvidia"
        if nvidia.is_dir():
            folders += sorted(str(p) for p in nvidia.glob("*/lib") if p.is_dir())
    old = os.environ.get("LD_LIBRARY_PATH", "")
    return ":".join(folders + ([old] if old else []))


class Server:
    """``python -m tritium`` on loopback ports, its log in a file."""

    def __init__(self, repo: Path, log_path: Path) -> None:
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.repo = repo

    def start(self, timeout: float = 180.0) -> None:
        cmd = [
            sys.executable,
            "-m",
            "tritium",
            f"--model-repository={self.repo}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            "--metrics-address=127.0.0.1",
        ]
        env = dict(os.environ, LD_LIBRARY_PATH=nvidia_library_path())
        with open(self.log_path, "wb") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritium exited with code {self.proc.returncode} while starting")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/v2/health/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"tritium was not ready after {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def run_protocol(protocol: str, server: Server, device: int) -> None:
    """Every CUDA shared-memory check over one protocol."""
    import tritonclient.utils.cuda_shared_memory as cudashm
    from tritonclient.utils import InferenceServerException

    if protocol == "http":
        import tritonclient.http as module

        client: Any = module.InferenceServerClient(f"127.0.0.1:{server.http_port}")
    else:
        import tritonclient.grpc as module  # type: ignore[no-redef]

        client = module.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    p = f"[{protocol}]"
    rng = np.random.default_rng(5 if protocol == "http" else 6)
    in0 = rng.standard_normal(SHAPE).astype(np.float32)
    in1 = rng.standard_normal(SHAPE).astype(np.float32)
    handles: dict[str, Any] = {}
    try:
        client.unregister_cuda_shared_memory()
        handles["in"] = cudashm.create_shared_memory_region(f"{protocol}_in", 2 * NBYTES, device)
        handles["out0"] = cudashm.create_shared_memory_region(f"{protocol}_out0", NBYTES, device)
        handles["out1"] = cudashm.create_shared_memory_region(f"{protocol}_out1", NBYTES, device)
        cudashm.set_shared_memory_region(handles["in"], [in0, in1])  # INPUT0 at 0, INPUT1 at 64
        for key, handle in handles.items():
            size = 2 * NBYTES if key == "in" else NBYTES
            client.register_cuda_shared_memory(f"{protocol}_{key}", cudashm.get_raw_handle(handle), device, size)
        status = client.get_cuda_shared_memory_status()
        if protocol == "http":
            names = sorted(r["name"] for r in status)
        else:
            names = sorted(status.regions)
        check(f"{p} register and status", names == sorted(f"{protocol}_{k}" for k in handles), f"{names}")

        def inputs(offset1: int = NBYTES) -> list[Any]:
            a = module.InferInput("INPUT0", SHAPE, "FP32")
            a.set_shared_memory(f"{protocol}_in", NBYTES, offset=0)
            b = module.InferInput("INPUT1", SHAPE, "FP32")
            b.set_shared_memory(f"{protocol}_in", NBYTES, offset=offset1)
            return [a, b]

        outputs = []
        for name, key in (("OUTPUT0", "out0"), ("OUTPUT1", "out1")):
            out = module.InferRequestedOutput(name)
            out.set_shared_memory(f"{protocol}_{key}", NBYTES)
            outputs.append(out)
        client.infer("add_sub", inputs(), outputs=outputs)
        got0 = cudashm.get_contents_as_numpy(handles["out0"], np.float32, SHAPE)
        got1 = cudashm.get_contents_as_numpy(handles["out1"], np.float32, SHAPE)
        ok = np.allclose(got0, in0 + in1, rtol=1e-5, atol=1e-6) and np.allclose(got1, in0 - in1, rtol=1e-5, atol=1e-6)
        check(
            f"{p} inputs and outputs in CUDA regions",
            bool(ok),
            "" if ok else f"max error {np.abs(got0 - (in0 + in1)).max()}, {np.abs(got1 - (in0 - in1)).max()}",
        )

        result = client.infer("add_sub", inputs(), outputs=[module.InferRequestedOutput("OUTPUT0")])
        got = result.as_numpy("OUTPUT0")
        check(
            f"{p} input in a CUDA region, output in the response",
            got is not None and np.allclose(got, in0 + in1, rtol=1e-5, atol=1e-6),
        )

        try:
            client.infer("add_sub", inputs(offset1=NBYTES + 16), outputs=outputs)
            check(f"{p} a window beyond the region is refused", False, "the request succeeded")
        except InferenceServerException as exc:
            want = f"Invalid offset + byte size for shared memory region: '{protocol}_in'"
            check(f"{p} a window beyond the region is refused", want in str(exc.message()), str(exc.message()))

        in0b = in0 * 3
        cudashm.set_shared_memory_region(handles["in"], [in0b, in1])
        client.infer("add_sub", inputs(), outputs=outputs)
        got0 = cudashm.get_contents_as_numpy(handles["out0"], np.float32, SHAPE)
        check(
            f"{p} serves again after the error (new input bytes)",
            bool(np.allclose(got0, in0b + in1, rtol=1e-5, atol=1e-6)),
        )

        client.unregister_cuda_shared_memory()
        status = client.get_cuda_shared_memory_status()
        empty = status == [] if protocol == "http" else len(status.regions) == 0
        check(f"{p} unregister", bool(empty), f"{status}")
    finally:
        try:
            client.unregister_cuda_shared_memory()
        except Exception as exc:  # noqa: BLE001 - cleanup
            print(f"NOTE  unregister at cleanup: {exc}", flush=True)
        for handle in handles.values():
            cudashm.destroy_shared_memory_region(handle)
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", type=int, default=0, help="GPU for the regions and the model (default 0)")
    parser.add_argument(
        "--kind",
        choices=["gpu", "cpu"],
        default="gpu",
        help="the model's instance kind (default gpu: KIND_GPU with the CUDA execution provider)",
    )
    parser.add_argument(
        "--require-gpu-ep",
        action="store_true",
        help="fail when onnxruntime cannot run the model with the CUDA execution provider",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (model repository, log)")
    args = parser.parse_args()
    started = time.monotonic()

    try:
        import tritonclient.utils.cuda_shared_memory  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        check(
            "tritonclient.utils.cuda_shared_memory imports",
            False,
            f"{type(exc).__name__}: {exc} (needs cuda-python<13 and setuptools<81)",
        )
        print("FAIL")
        return 1
    from tritium.core.memory.cuda import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    if not check("CUDA is available to tritium", reason is None, reason or ""):
        print("FAIL")
        return 1

    work = Path(tempfile.mkdtemp(prefix="tritium-gpu-check-"))
    kind = "KIND_GPU" if args.kind == "gpu" else "KIND_CPU"
    model_path = build_repository(work / "models", kind, args.device)
    if kind == "KIND_GPU":
        on_gpu, detail = probe_gpu_execution_provider(model_path, args.device)
        if args.require_gpu_ep:
            check("onnxruntime runs the model on the GPU", on_gpu, detail)
        else:
            print(f"{'INFO' if on_gpu else 'NOTE'}  onnxruntime CUDA execution provider: {detail}", flush=True)

    server = Server(work / "models", work / "tritium.log")
    try:
        server.start()
        check("tritium starts with add_sub (" + kind + ")", True)
        for protocol in ("http", "grpc"):
            try:
                run_protocol(protocol, server, args.device)
            except Exception as exc:  # noqa: BLE001 - report and go on to the next protocol
                check(f"[{protocol}] ran to the end", False, f"{type(exc).__name__}: {exc}")
                traceback.print_exc()
        check("tritium still running", server.proc is not None and server.proc.poll() is None)
    except Exception as exc:  # noqa: BLE001
        check("tritium starts with add_sub (" + kind + ")", False, str(exc))
    finally:
        server.stop()
    failed = [name for name, ok, _ in RESULTS if not ok]
    if failed:
        print(f"--- last lines of {server.log_path} ---\n{server.log_tail()}")
    if not args.keep and not failed:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept {work}")
    print(json.dumps({"checks": len(RESULTS), "failed": failed, "seconds": round(time.monotonic() - started, 1)}))
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
