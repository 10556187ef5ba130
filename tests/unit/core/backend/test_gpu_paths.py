"""GPU code paths of the onnxruntime and pytorch backends, checked on a machine without a GPU.

* onnxruntime: the execution providers a KIND_GPU instance asks for, with
  Triton's accelerator parameter names mapped to ONNX Runtime's option names
  (a pure mapping, checked against the providers list a GPU build reports);
  and the real CPU-only onnxruntime refusing a KIND_GPU instance clearly;
* pytorch: the real CPU-only torch refusing a KIND_GPU instance clearly.

(The core refuses KIND_GPU groups on a machine without GPUs before any
backend sees them, so these call the backends' entry points directly.)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tests.support import framework_models as fm
from tritium.core.backend.api import Backend, Model, ModelInstance
from tritium.core.errors import TritonError

ROOT = Path(__file__).resolve().parents[4]
GPU_PROVIDERS = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"tritium_backend_{name}_gpu_test", ROOT / f"backends/{name}/libtriton_{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _model(tmp_path: Path, backend: str, config: dict[str, Any]) -> Model:
    return Model("m", 1, {"name": "m", **config}, str(tmp_path / "m"), Backend(backend, str(tmp_path), {}), False)


def _accelerators(*items: dict[str, Any], params: dict[str, str] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"optimization": {"execution_accelerators": {"gpu_execution_accelerator": list(items)}}}
    if params:
        config["parameters"] = {k: {"string_value": v} for k, v in params.items()}
    return config


def test_kind_gpu_uses_tensorrt_then_cuda_with_tritons_parameter_names(tmp_path: Path) -> None:
    ort = _load("onnxruntime")
    trt = {
        "name": "tensorrt",
        "parameters": {
            "precision_mode": "FP16",
            "max_workspace_size_bytes": "1073741824",
            "trt_engine_cache_enable": "true",
            "trt_engine_cache_path": "/tmp/cache",
            "trt_max_partition_iterations": "10",
            "trt_min_subgraph_size": "3",
        },
    }
    cuda = {"name": "cuda", "parameters": {"cudnn_conv_use_max_workspace": "0"}}
    model = _model(
        tmp_path,
        "onnxruntime",
        _accelerators(
            trt,
            cuda,
            params={
                "cudnn_conv_algo_search": "1",
                "gpu_mem_limit": "4294967296",
                "arena_extend_strategy": "1",
                "do_copy_in_default_stream": "1",
            },
        ),
    )
    providers = ort._providers(model, "KIND_GPU", 1, GPU_PROVIDERS)
    assert providers == [
        (
            "TensorrtExecutionProvider",
            {
                "device_id": "1",
                "trt_fp16_enable": "True",
                "trt_max_workspace_size": "1073741824",
                "trt_engine_cache_enable": "true",
                "trt_engine_cache_path": "/tmp/cache",
                "trt_max_partition_iterations": "10",
                "trt_min_subgraph_size": "3",
            },
        ),
        (
            "CUDAExecutionProvider",
            {
                "device_id": "1",
                "cudnn_conv_algo_search": "HEURISTIC",
                "gpu_mem_limit": "4294967296",
                "arena_extend_strategy": "kSameAsRequested",
                "do_copy_in_default_stream": "1",
                "cudnn_conv_use_max_workspace": "0",
            },
        ),
        "CPUExecutionProvider",
    ]
    int8 = _model(
        tmp_path, "onnxruntime", _accelerators({"name": "tensorrt", "parameters": {"precision_mode": "INT8"}})
    )
    assert ort._providers(int8, "KIND_GPU", 0, GPU_PROVIDERS)[0][1] == {
        "device_id": "0",
        "trt_fp16_enable": "True",
        "trt_int8_enable": "True",
    }
    assert ort._providers(_model(tmp_path, "onnxruntime", {}), "KIND_CPU", 0, GPU_PROVIDERS) == ["CPUExecutionProvider"]


@pytest.mark.parametrize(
    ("config", "available", "message"),
    [
        (
            _accelerators({"name": "tensorrt", "parameters": {"precision": "FP16"}}),
            GPU_PROVIDERS,
            "unknown parameter 'precision' is provided for TensorRT Execution Accelerator",
        ),
        (
            _accelerators({"name": "tensorrt", "parameters": {"precision_mode": "FP8"}}),
            GPU_PROVIDERS,
            "unsupported precision mode 'FP8' is requested for TensorRT Execution Accelerator of model 'm'",
        ),
        (_accelerators({"name": "openvino"}), GPU_PROVIDERS, "unknown Execution Accelerator 'openvino' is requested"),
        (
            _accelerators(params={"cudnn_conv_algo_search": "7"}),
            GPU_PROVIDERS,
            "Expected values for  cudnn_conv_algo_search are 0 or 1 or 2 but got 7",
        ),
        (
            _accelerators({"name": "tensorrt"}),
            ["CUDAExecutionProvider", "CPUExecutionProvider"],
            "model 'm' asks for the TensorRT execution accelerator, but this onnxruntime provides only "
            "CUDAExecutionProvider, CPUExecutionProvider",
        ),
        (
            _accelerators(),
            ["CPUExecutionProvider"],
            "model 'm' has a KIND_GPU instance, but this onnxruntime provides only CPUExecutionProvider: install "
            "onnxruntime-gpu",
        ),
    ],
)
def test_provider_errors(tmp_path: Path, config: dict[str, Any], available: list[str], message: str) -> None:
    ort = _load("onnxruntime")
    with pytest.raises(TritonError) as info:
        ort._providers(_model(tmp_path, "onnxruntime", config), "KIND_GPU", 0, available)
    assert message in info.value.message


def test_cpu_only_onnxruntime_refuses_a_kind_gpu_instance(tmp_path: Path) -> None:
    ort = _load("onnxruntime")
    fm.add_sub_onnx(tmp_path / "m" / "1" / "model.onnx")
    backend = Backend("onnxruntime", str(tmp_path), {})
    ort.TRITONBACKEND_Initialize(backend)
    if "CUDAExecutionProvider" in backend.state["providers"]:
        pytest.skip("this onnxruntime has the CUDA provider (onnxruntime-gpu): the GPU check script covers it")
    model = Model("m", 1, {"name": "m", "max_batch_size": 8}, str(tmp_path / "m"), backend, False)
    ort.TRITONBACKEND_ModelInitialize(model)
    with pytest.raises(
        TritonError,
        match="has a KIND_GPU instance, but this onnxruntime provides only .*CPUExecutionProvider: install onnxruntime-gpu",
    ):
        ort.TRITONBACKEND_ModelInstanceInitialize(ModelInstance("m_0", "KIND_GPU", 0, model))


def test_cpu_only_torch_refuses_a_kind_gpu_instance(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this torch can use CUDA: the GPU check script covers it")
    pt = _load("pytorch")
    fm.add_sub_torchscript(tmp_path / "m" / "1" / "model.pt")
    io = {
        "input": [{"name": f"INPUT__{i}", "data_type": "TYPE_FP32", "dims": [4]} for i in range(2)],
        "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [4]}],
    }
    model = _model(tmp_path, "pytorch", io)
    pt.TRITONBACKEND_ModelInitialize(model)
    with pytest.raises(TritonError) as info:
        pt.TRITONBACKEND_ModelInstanceInitialize(ModelInstance("m_0", "KIND_GPU", 0, model))
    assert info.value.message == (
        f"model 'm' has a KIND_GPU instance, but this torch ({torch.__version__}) cannot use CUDA (a CPU-only build, "
        "or no GPU or driver here): install a CUDA build of torch on a machine with an NVIDIA GPU, or use KIND_CPU"
    )
