"""The ``onnxruntime`` backend: ONNX models (``platform: "onnxruntime_onnx"``) on ONNX Runtime.

Behaves like Triton's onnxruntime backend where it matters to users:

* model file ``<version>/model.onnx`` (or ``default_model_filename``);
* auto-complete (when the config lacks inputs or outputs): inputs, outputs,
  datatypes and dims from the model; ``max_batch_size`` set to the backend's
  ``default-max-batch-size`` (4) when every input and output has a variable
  first dimension, plus ``dynamic_batching {}`` when that is > 1;
* config ``parameters`` (string values, as Triton names them):
  ``intra_op_thread_count``, ``inter_op_thread_count``, ``execution_mode``
  (0 sequential, 1 parallel), ``enable_mem_arena``, ``enable_mem_pattern``;
  ``optimization { graph { level } }`` (-1 basic, 1 extended, 2 disabled,
  default all);
* one ONNX Runtime session per model instance; KIND_GPU instances use the
  CUDA execution provider (and ``gpu_execution_accelerator: tensorrt`` the
  TensorRT one) — only when ``onnxruntime-gpu`` provides them, otherwise the
  instance fails to load with a clear error. Requests of a batch are
  concatenated along the batch dimension and run together.

Runs in the worker process; onnxruntime is imported only here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tritium.core.backend.api import batch_input, Backend, Model, ModelInstance, Request
from tritium.core.errors import Code, TritonError
from tritium.core.model_repository.paths import safe_join

# ONNX tensor element types -> model-config datatypes
_ORT_TO_CONFIG = {
    "tensor(bool)": "TYPE_BOOL",
    "tensor(uint8)": "TYPE_UINT8",
    "tensor(uint16)": "TYPE_UINT16",
    "tensor(uint32)": "TYPE_UINT32",
    "tensor(uint64)": "TYPE_UINT64",
    "tensor(int8)": "TYPE_INT8",
    "tensor(int16)": "TYPE_INT16",
    "tensor(int32)": "TYPE_INT32",
    "tensor(int64)": "TYPE_INT64",
    "tensor(float16)": "TYPE_FP16",
    "tensor(float)": "TYPE_FP32",
    "tensor(double)": "TYPE_FP64",
    "tensor(string)": "TYPE_STRING",
    "tensor(bfloat16)": "TYPE_BF16",
}


def _ort() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise TritonError(
            Code.UNAVAILABLE,
            "the onnxruntime backend needs the onnxruntime package: pip install 'tritium[onnxruntime]' "
            f"(or 'tritium[onnxruntime-gpu]' for GPUs) ({exc})",
        ) from None
    return onnxruntime


def TRITONBACKEND_Initialize(backend: Backend) -> None:
    ort = _ort()
    backend.state = {"version": ort.__version__, "providers": list(ort.get_available_providers())}


def _model_file(model: Model) -> Path:
    filename = model.config.get("default_model_filename") or "model.onnx"
    version_dir = safe_join(model.repository_path, str(model.version), what="version")
    path = safe_join(version_dir, filename, what="default_model_filename")
    if not path.exists():
        raise TritonError(
            Code.NOT_FOUND,
            f"unable to find '{path}' for model '{model.name}' version {model.version}",
        )
    return path


def _dims(shape: list[Any]) -> list[int]:
    return [d if isinstance(d, int) and d >= 0 else -1 for d in shape]


def _session_options(model: Model) -> Any:
    ort = _ort()
    options = ort.SessionOptions()
    level = ((model.config.get("optimization") or {}).get("graph") or {}).get("level", 0)
    options.graph_optimization_level = {
        -1: ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        1: ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        2: ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }.get(int(level), ort.GraphOptimizationLevel.ORT_ENABLE_ALL)

    def int_param(key: str, default: int) -> int:
        text = model.parameter(key)
        if text is None or text == "":
            return default
        try:
            return int(text)
        except ValueError:
            raise TritonError(
                Code.INVALID_ARG, f"failed to convert '{key}' of model '{model.name}' to an integer: '{text}'"
            ) from None

    def bool_param(key: str) -> bool | None:
        text = model.parameter(key)
        if text is None:
            return None
        value = text.strip().lower()
        if value in ("true", "1", "on", "yes"):
            return True
        if value in ("false", "0", "off", "no"):
            return False
        raise TritonError(Code.INVALID_ARG, f"failed to convert '{key}' of model '{model.name}' to a boolean: '{text}'")

    mode = int_param("execution_mode", 0)
    if mode not in (0, 1):
        raise TritonError(
            Code.INVALID_ARG,
            f"Invalid configuration value provided. Expected values for  execution_mode are 0 or 1 but got {mode} .",
        )
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL if mode == 0 else ort.ExecutionMode.ORT_PARALLEL
    intra = int_param("intra_op_thread_count", 0)
    if intra > 0:
        options.intra_op_num_threads = intra
    inter = int_param("inter_op_thread_count", 0)
    if inter > 0:
        options.inter_op_num_threads = inter
    arena = bool_param("enable_mem_arena")
    if arena is not None:
        options.enable_cpu_mem_arena = arena
    pattern = bool_param("enable_mem_pattern")
    if pattern is not None:
        options.enable_mem_pattern = pattern
    return options


def _providers(model: Model, kind: str, device_id: int, available: list[str]) -> list[Any]:
    if kind != "KIND_GPU":
        for acc in ((model.config.get("optimization") or {}).get("execution_accelerators") or {}).get(
            "cpu_execution_accelerator", []
        ):
            raise TritonError(Code.INVALID_ARG, f"unknown Execution Accelerator '{acc.get('name', '')}' is requested")
        return ["CPUExecutionProvider"]
    providers: list[Any] = []
    for acc in ((model.config.get("optimization") or {}).get("execution_accelerators") or {}).get(
        "gpu_execution_accelerator", []
    ):
        name = acc.get("name", "")
        if name == "tensorrt":
            if "TensorrtExecutionProvider" not in available:
                raise TritonError(
                    Code.UNAVAILABLE,
                    f"model '{model.name}' asks for the TensorRT execution accelerator, but this onnxruntime "
                    f"provides only {', '.join(available)} (install onnxruntime-gpu with TensorRT)",
                )
            providers.append(("TensorrtExecutionProvider", {"device_id": device_id}))
        elif name != "cuda":
            raise TritonError(Code.INVALID_ARG, f"unknown Execution Accelerator '{name}' is requested")
    if "CUDAExecutionProvider" not in available:
        raise TritonError(
            Code.UNAVAILABLE,
            f"model '{model.name}' has a KIND_GPU instance, but this onnxruntime provides only "
            f"{', '.join(available)}: install onnxruntime-gpu (pip install 'tritium[onnxruntime-gpu]') "
            "on a machine with a CUDA GPU",
        )
    providers.append(("CUDAExecutionProvider", {"device_id": device_id}))
    providers.append("CPUExecutionProvider")
    return providers


def _auto_complete(model: Model, session: Any) -> None:
    config = dict(model.config)
    if config.get("input") and config.get("output"):
        return
    inputs = [(i.name, i.type, _dims(list(i.shape))) for i in session.get_inputs()]
    outputs = [(o.name, o.type, _dims(list(o.shape))) for o in session.get_outputs()]
    batching = all(dims and dims[0] == -1 for _n, _t, dims in inputs + outputs)
    max_batch = int(config.get("max_batch_size", 0))
    if batching:
        if max_batch == 0:
            max_batch = max(int(model.backend.config.get("default-max-batch-size", "4")), 0)
            config["max_batch_size"] = max_batch
        if max_batch > 1 and "dynamic_batching" not in config and "sequence_batching" not in config:
            config["dynamic_batching"] = {}
    elif max_batch != 0:
        raise TritonError(
            Code.INVALID_ARG,
            f"autofill failed for model '{model.name}': model does not support batching while non-zero "
            "max_batch_size is specified",
        )

    def describe(items: list[tuple[str, str, list[int]]]) -> list[dict[str, Any]]:
        out = []
        for name, ort_type, dims in items:
            entry: dict[str, Any] = {"name": name, "data_type": _ORT_TO_CONFIG.get(ort_type, "TYPE_INVALID")}
            tail = dims[1:] if max_batch > 0 else dims
            if not tail:
                entry["dims"] = [1]
                if max_batch > 0:
                    entry["reshape"] = {"shape": []}
            else:
                entry["dims"] = tail
            out.append(entry)
        return out

    if not config.get("input"):
        config["input"] = describe(inputs)
    if not config.get("output"):
        config["output"] = describe(outputs)
    model.set_config(config)


def TRITONBACKEND_ModelInitialize(model: Model) -> None:
    path = _model_file(model)
    model.state = {"path": str(path)}
    if model.auto_complete_config and not (model.config.get("input") and model.config.get("output")):
        ort = _ort()
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        _auto_complete(model, session)


def _check_signature(model: Model, session: Any) -> None:
    """Every configured input and output must exist in the ONNX model, with the same datatype."""
    for kind, provided in (
        ("input", {i.name: i.type for i in session.get_inputs()}),
        ("output", {o.name: o.type for o in session.get_outputs()}),
    ):
        for item in model.config.get(kind, []):
            name = item["name"]
            if name not in provided:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"unable to load model '{model.name}', unexpected inference {kind} '{name}', "
                    f"allowed {kind}s are: " + ", ".join(sorted(provided)),
                )
            expected = _ORT_TO_CONFIG.get(provided[name])
            if expected != item["data_type"]:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"unable to load model '{model.name}', unexpected datatype {item['data_type']} for inference "
                    f"{kind} '{name}', expecting {expected}",
                )


def TRITONBACKEND_ModelInstanceInitialize(instance: ModelInstance) -> None:
    model = instance.model
    ort = _ort()
    providers = _providers(model, instance.kind, instance.device_id, model.backend.state["providers"])
    try:
        session = ort.InferenceSession(model.state["path"], sess_options=_session_options(model), providers=providers)
    except TritonError:
        raise
    except Exception as exc:
        raise TritonError(Code.INTERNAL, f"onnxruntime failed to load model '{model.name}': {exc}") from None
    _check_signature(model, session)
    string_inputs = {i["name"] for i in model.config.get("input", []) if i["data_type"] == "TYPE_STRING"}
    instance.state = {
        "session": session,
        "batching": int(model.config.get("max_batch_size", 0)) > 0,
        "outputs": [o["name"] for o in model.config.get("output", [])],
        "string_inputs": string_inputs,
    }


def _feed(state: dict[str, Any], name: str, array: np.ndarray) -> np.ndarray:
    if name in state["string_inputs"]:
        return np.array([x.decode("utf-8", "replace") for x in array.reshape(-1)], dtype=object).reshape(array.shape)
    return array


def _run(state: dict[str, Any], requests: list[Request]) -> list[dict[str, np.ndarray]]:
    session = state["session"]
    wanted: list[str] = []
    for request in requests:
        for name in request.requested_output_names or state["outputs"]:
            if name not in wanted:
                wanted.append(name)
    if len(requests) == 1:
        feeds = {name: _feed(state, name, arr) for name, arr in requests[0].inputs.items()}
        results = session.run(wanted, feeds)
        return [dict(zip(wanted, results))]
    # a batch of several requests: one array per input (a view: the dynamic batcher lays the
    # batch out contiguously), run once, split
    sizes = [next(iter(r.inputs.values())).shape[0] if r.inputs else 1 for r in requests]
    feeds = {name: _feed(state, name, batch_input(requests, name)) for name in requests[0].inputs}
    results = session.run(wanted, feeds)
    total = sum(sizes)
    split: list[dict[str, np.ndarray]] = [{} for _ in requests]
    for name, value in zip(wanted, results):
        if value.shape[:1] != (total,):
            raise TritonError(
                Code.INTERNAL,
                f"output '{name}' has batch size {value.shape[0] if value.ndim else 0}, expected {total}",
            )
        start = 0
        for i, size in enumerate(sizes):
            split[i][name] = value[start : start + size]
            start += size
    return split


def TRITONBACKEND_ModelInstanceExecute(instance: ModelInstance, requests: list[Request]) -> None:
    state = instance.state
    try:
        results = _run(state, requests) if state["batching"] else [_run(state, [r])[0] for r in requests]
    except TritonError:
        raise
    except Exception as exc:
        raise TritonError(
            Code.INTERNAL, f"onnxruntime execute failure for model '{instance.model.name}': {exc}"
        ) from None
    for request, outputs in zip(requests, results):
        for name, value in list(outputs.items()):
            if value.dtype == object:
                outputs[name] = np.array(
                    [x.encode("utf-8") if isinstance(x, str) else x for x in value.reshape(-1)], dtype=object
                ).reshape(value.shape)
        request.respond(outputs)


def TRITONBACKEND_ModelInstanceFinalize(instance: ModelInstance) -> None:
    instance.state = None
