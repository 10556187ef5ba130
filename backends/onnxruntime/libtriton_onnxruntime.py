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
  default all); ``model_operations { op_library_filename }``: custom operation
  libraries registered with each session (files under the model's folder);
* one ONNX Runtime session per model instance; KIND_GPU instances use the
  CUDA execution provider (and ``gpu_execution_accelerator: tensorrt`` the
  TensorRT one) — only when ``onnxruntime-gpu`` provides them, otherwise the
  instance fails to load with a clear error. Requests of a batch are
  concatenated along the batch dimension and run together.

Runs in the worker process; onnxruntime is imported only here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tritium.core.backend.api import Backend, Model, ModelInstance, Request
from tritium.core.backend.batch_io import BatchIO
from tritium.core.backend.framework import (
    OP_LIBRARY_FIELD,
    autocomplete_io,
    bool_parameter,
    check_io,
    import_framework,
    int_parameter,
    model_file,
    op_libraries,
    run_batched,
)
from tritium.core.errors import Code, TritonError

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
    return import_framework(
        "onnxruntime", "onnxruntime", "pip install 'tritium[onnxruntime]' (or 'tritium[onnxruntime-gpu]' for GPUs)"
    )


def TRITONBACKEND_Initialize(backend: Backend) -> None:
    ort = _ort()
    backend.state = {"version": ort.__version__, "providers": list(ort.get_available_providers())}


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

    mode = int_parameter(model, "execution_mode", 0)
    if mode not in (0, 1):
        raise TritonError(
            Code.INVALID_ARG,
            f"Invalid configuration value provided. Expected values for  execution_mode are 0 or 1 but got {mode} .",
        )
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL if mode == 0 else ort.ExecutionMode.ORT_PARALLEL
    intra = int_parameter(model, "intra_op_thread_count", 0)
    if intra > 0:
        options.intra_op_num_threads = intra
    inter = int_parameter(model, "inter_op_thread_count", 0)
    if inter > 0:
        options.inter_op_num_threads = inter
    options.enable_cpu_mem_arena = bool_parameter(model, "enable_mem_arena", options.enable_cpu_mem_arena)
    options.enable_mem_pattern = bool_parameter(model, "enable_mem_pattern", options.enable_mem_pattern)
    _register_op_libraries(model, options)
    return options


def _register_op_libraries(model: Model, options: Any) -> None:
    """Register the config's custom operation libraries with the session (Triton's onnxruntime backend
    calls ``RegisterCustomOpsLibrary`` for each ``model_operations.op_library_filename``; each must be
    under the model's folder, see :func:`~tritium.core.backend.framework.op_libraries`).

    :raises TritonError: INVALID_ARG naming the field for a path that leaves the model folder, or
        for a library onnxruntime cannot register (its message).
    """
    for filename, path in op_libraries(model):
        try:
            options.register_custom_ops_library(str(path))
        except Exception as exc:  # onnxruntime's Fail / RuntimeError: a missing file, a bad library
            raise TritonError(
                Code.INVALID_ARG,
                f"model '{model.name}': {OP_LIBRARY_FIELD} '{filename}' could not be registered: {exc}",
            ) from None


#: Triton's TensorRT-accelerator parameter names -> ONNX Runtime's TensorRT provider option names
#: (``precision_mode`` is mapped on its own: FP16 -> trt_fp16_enable, INT8 -> trt_int8_enable)
_TRT_OPTIONS = {
    "max_workspace_size_bytes": "trt_max_workspace_size",
    "int8_calibration_table_name": "trt_int8_calibration_table_name",
    "int8_use_native_calibration_table": "trt_int8_use_native_calibration_table",
    **{
        key: key
        for key in (
            "trt_max_partition_iterations",
            "trt_min_subgraph_size",
            "trt_dla_enable",
            "trt_dla_core",
            "trt_engine_cache_enable",
            "trt_engine_cache_path",
            "trt_engine_cache_prefix",
            "trt_dump_subgraphs",
            "trt_force_sequential_engine_build",
            "trt_context_memory_sharing_enable",
            "trt_layer_norm_fp32_fallback",
            "trt_timing_cache_enable",
            "trt_timing_cache_path",
            "trt_force_timing_cache",
            "trt_detailed_build_log",
            "trt_build_heuristics_enable",
            "trt_sparsity_enable",
            "trt_builder_optimization_level",
            "trt_auxiliary_streams",
            "trt_tactic_sources",
            "trt_extra_plugin_lib_paths",
            "trt_profile_min_shapes",
            "trt_profile_max_shapes",
            "trt_profile_opt_shapes",
            "trt_cuda_graph_enable",
            "trt_dump_ep_context_model",
            "trt_ep_context_file_path",
            "trt_ep_context_embed_mode",
        )
    },
}
#: model-config ``parameters`` that Triton hands to the CUDA provider: name -> (option, value map or None)
_CUDA_PARAMETERS: dict[str, tuple[str, dict[str, str] | None]] = {
    "cudnn_conv_algo_search": ("cudnn_conv_algo_search", {"0": "EXHAUSTIVE", "1": "HEURISTIC", "2": "DEFAULT"}),
    "gpu_mem_limit": ("gpu_mem_limit", None),
    "arena_extend_strategy": ("arena_extend_strategy", {"0": "kNextPowerOfTwo", "1": "kSameAsRequested"}),
    "do_copy_in_default_stream": ("do_copy_in_default_stream", None),
}


def _accelerator_parameters(acc: dict[str, Any]) -> dict[str, str]:
    """An accelerator's ``parameters`` map (proto JSON: ``{"key": "value"}``)."""
    return {str(k): str(v) for k, v in (acc.get("parameters") or {}).items()}


def _tensorrt_options(model: Model, acc: dict[str, Any], device_id: int) -> dict[str, str]:
    """ONNX Runtime TensorRT provider options from Triton's ``tensorrt`` accelerator parameters.

    :raises TritonError: INVALID_ARG for a parameter Triton does not know, or a
        ``precision_mode`` other than FP32, FP16 or INT8 (Triton's messages).
    """
    options = {"device_id": str(device_id)}
    for key, value in _accelerator_parameters(acc).items():
        if key == "precision_mode":
            mode = value.upper()
            if mode not in ("FP32", "FP16", "INT8"):
                raise TritonError(
                    Code.INVALID_ARG,
                    f"unsupported precision mode '{value}' is requested for TensorRT Execution Accelerator "
                    f"of model '{model.name}' (FP32, FP16 or INT8)",
                )
            if mode in ("FP16", "INT8"):
                options["trt_fp16_enable"] = "True"
            if mode == "INT8":
                options["trt_int8_enable"] = "True"
        elif key in _TRT_OPTIONS:
            options[_TRT_OPTIONS[key]] = value
        else:
            raise TritonError(
                Code.INVALID_ARG, f"unknown parameter '{key}' is provided for TensorRT Execution Accelerator"
            )
    return options


def _cuda_options(model: Model, accelerators: list[dict[str, Any]], device_id: int) -> dict[str, str]:
    """ONNX Runtime CUDA provider options: the model's CUDA parameters and the ``cuda`` accelerator's.

    :raises TritonError: INVALID_ARG for a value outside a parameter's choices.
    """
    options = {"device_id": str(device_id)}
    for key, (option, choices) in _CUDA_PARAMETERS.items():
        text = model.parameter(key)
        if text is None:
            continue
        if choices is not None and text not in choices:
            raise TritonError(
                Code.INVALID_ARG,
                f"Invalid configuration value provided. Expected values for  {key} are "
                f"{' or '.join(choices)} but got {text} .",
            )
        options[option] = choices[text] if choices is not None else text
    for acc in accelerators:
        if acc.get("name") == "cuda":
            options.update(_accelerator_parameters(acc))  # passed as ONNX Runtime names them
    return options


def _providers(model: Model, kind: str, device_id: int, available: list[str]) -> list[Any]:
    """The execution providers of an instance, in ONNX Runtime's ``providers=`` form.

    KIND_CPU: the CPU provider. KIND_GPU: the TensorRT provider when the config
    asks for the ``tensorrt`` accelerator, then the CUDA provider on the
    instance's device, then the CPU one (for the operators neither runs), as
    Triton's onnxruntime backend builds its session.

    :param available: ``onnxruntime.get_available_providers()``.
    :raises TritonError: UNAVAILABLE when this onnxruntime lacks a provider the
        instance needs (e.g. the CPU-only package on a KIND_GPU instance);
        INVALID_ARG for an unknown accelerator or parameter.
    """
    accelerators = (model.config.get("optimization") or {}).get("execution_accelerators") or {}
    if kind != "KIND_GPU":
        for acc in accelerators.get("cpu_execution_accelerator", []):
            raise TritonError(Code.INVALID_ARG, f"unknown Execution Accelerator '{acc.get('name', '')}' is requested")
        return ["CPUExecutionProvider"]
    gpu_accelerators = list(accelerators.get("gpu_execution_accelerator", []))
    providers: list[Any] = []
    for acc in gpu_accelerators:
        name = acc.get("name", "")
        if name == "tensorrt":
            if "TensorrtExecutionProvider" not in available:
                raise TritonError(
                    Code.UNAVAILABLE,
                    f"model '{model.name}' asks for the TensorRT execution accelerator, but this onnxruntime "
                    f"provides only {', '.join(available)} (install onnxruntime-gpu with TensorRT)",
                )
            providers.append(("TensorrtExecutionProvider", _tensorrt_options(model, acc, device_id)))
        elif name != "cuda":
            raise TritonError(Code.INVALID_ARG, f"unknown Execution Accelerator '{name}' is requested")
    if "CUDAExecutionProvider" not in available:
        raise TritonError(
            Code.UNAVAILABLE,
            f"model '{model.name}' has a KIND_GPU instance, but this onnxruntime provides only "
            f"{', '.join(available)}: install onnxruntime-gpu (pip install 'tritium[onnxruntime-gpu]') "
            "on a machine with a CUDA GPU",
        )
    providers.append(("CUDAExecutionProvider", _cuda_options(model, gpu_accelerators, device_id)))
    providers.append("CPUExecutionProvider")
    return providers


def _auto_complete(model: Model, session: Any) -> None:
    def info(items: Any) -> list[tuple[str, str, list[int]]]:
        return [(i.name, _ORT_TO_CONFIG.get(i.type, "TYPE_INVALID"), _dims(list(i.shape))) for i in items]

    if not (model.config.get("input") and model.config.get("output")):
        autocomplete_io(model, info(session.get_inputs()), info(session.get_outputs()))


def TRITONBACKEND_ModelInitialize(model: Model) -> None:
    path = model_file(model, "model.onnx")
    model.state = {"path": str(path)}
    if model.auto_complete_config and not (model.config.get("input") and model.config.get("output")):
        ort = _ort()
        options = ort.SessionOptions()
        _register_op_libraries(model, options)
        session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        _auto_complete(model, session)


def _check_signature(model: Model, session: Any) -> None:
    """Every configured input and output must exist in the ONNX model, with the same datatype."""
    check_io(model, "input", {i.name: _ORT_TO_CONFIG.get(i.type, i.type) for i in session.get_inputs()})
    check_io(model, "output", {o.name: _ORT_TO_CONFIG.get(o.type, o.type) for o in session.get_outputs()})
    _check_ragged(model, {i.name: i for i in session.get_inputs()})


def _check_ragged(model: Model, onnx_inputs: dict[str, Any]) -> None:
    """Triton's onnxruntime checks of ragged batching: a ragged input is not optional and is ``[-1]`` in
    the model; each ``batch_input`` target is an input of the model, with the batch input's data type.

    :raises TritonError: INVALID_ARG (Triton's messages for the first two).
    """
    for item in model.config.get("input", []):
        if not item.get("allow_ragged_batch"):
            continue
        name = str(item["name"])
        if item.get("optional"):
            raise TritonError(
                Code.INVALID_ARG,
                f"unable to load model '{model.name}', configuration expects model provides input with shape [-1] "
                f"for ragged input '{name}', which is not supported for optional input",
            )
        dims = _dims(list(onnx_inputs[name].shape))
        if dims != [-1]:
            raise TritonError(
                Code.INVALID_ARG,
                f"unable to load model '{model.name}', configuration expects model provides input with shape [-1]  "
                f"for ragged input '{name}', model provides [{','.join(str(d) for d in dims)}]",
            )
    for batch in model.config.get("batch_input", []):
        for target in batch.get("target_name", []):
            onnx_input = onnx_inputs.get(str(target))
            if onnx_input is None:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"unable to load model '{model.name}', batch input '{target}' is not an input of the model, "
                    "whose inputs are: " + ", ".join(sorted(onnx_inputs)),
                )
            datatype = _ORT_TO_CONFIG.get(onnx_input.type, onnx_input.type)
            if datatype != batch.get("data_type"):
                raise TritonError(
                    Code.INVALID_ARG,
                    f"unable to load model '{model.name}', unexpected datatype {batch.get('data_type')} for batch "
                    f"input '{target}', expecting {datatype}",
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
    if instance.kind == "KIND_GPU" and "CUDAExecutionProvider" not in session.get_providers():
        # onnxruntime falls back to the CPU when the CUDA provider cannot start (a missing CUDA or cuDNN
        # library); a KIND_GPU instance on the CPU would be a silent surprise
        raise TritonError(
            Code.UNAVAILABLE,
            f"onnxruntime could not start the CUDA execution provider on GPU {instance.device_id} for model "
            f"'{model.name}' (it runs with {', '.join(session.get_providers())}): check that the CUDA and "
            "cuDNN libraries onnxruntime-gpu needs are installed (pip install 'onnxruntime-gpu[cuda,cudnn]')",
        )
    _check_signature(model, session)
    string_inputs = {i["name"] for i in model.config.get("input", []) if i["data_type"] == "TYPE_STRING"}
    instance.state = {
        "session": session,
        "batching": int(model.config.get("max_batch_size", 0)) > 0,
        "outputs": [o["name"] for o in model.config.get("output", [])],
        "string_inputs": string_inputs,
        "layout": BatchIO.from_config(model.config),
    }


def _feed(state: dict[str, Any], name: str, array: np.ndarray) -> np.ndarray:
    if name in state["string_inputs"]:
        return np.array([x.decode("utf-8", "replace") for x in array.reshape(-1)], dtype=object).reshape(array.shape)
    return array


def _run(state: dict[str, Any], requests: list[Request], failure: str) -> list[dict[str, np.ndarray]]:
    session = state["session"]

    def run(inputs: dict[str, np.ndarray], wanted: list[str]) -> dict[str, np.ndarray]:
        feeds = {name: _feed(state, name, array) for name, array in inputs.items()}
        return dict(zip(wanted, session.run(wanted, feeds)))

    return run_batched(requests, state["batching"], run, state["outputs"], failure, state["layout"])


def TRITONBACKEND_ModelInstanceExecute(instance: ModelInstance, requests: list[Request]) -> None:
    state = instance.state
    results = _run(state, requests, f"onnxruntime execute failure for model '{instance.model.name}'")
    for request, outputs in zip(requests, results):
        for name, value in list(outputs.items()):
            if value.dtype == object:
                outputs[name] = np.array(
                    [x.encode("utf-8") if isinstance(x, str) else x for x in value.reshape(-1)], dtype=object
                ).reshape(value.shape)
        request.respond(outputs)


def TRITONBACKEND_ModelInstanceFinalize(instance: ModelInstance) -> None:
    instance.state = None
