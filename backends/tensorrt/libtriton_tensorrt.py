"""The ``tensorrt`` backend: TensorRT engines (``platform: "tensorrt_plan"``, ``model.plan``) on NVIDIA GPUs.

Behaves like Triton's TensorRT backend where it matters to users:

* model file ``<version>/model.plan`` (or ``default_model_filename``), a
  serialized engine deserialized with the ``tensorrt`` package (TensorRT 10's
  tensor API: tensors bound by name);
* dynamic shapes through the engine's optimisation profiles: each batch runs
  with the first profile (of those the instance group's ``profile`` list
  names, else all) whose min/max shapes hold the batch's input shapes;
* one execution context and one CUDA stream per model instance, on the
  instance's GPU; device buffers (cuda-python's runtime, ``cudaMalloc``) are
  kept per tensor and grown when a batch needs more; inputs go host -> device
  and outputs device -> host on the instance's stream;
* auto-complete from the engine's I/O tensors: names, datatypes, dims, and
  ``max_batch_size`` from the profiles' largest first dimension when every
  tensor's first dimension is dynamic (then ``dynamic_batching {}``);
* on a machine without a GPU, or without the ``tensorrt`` or ``cuda-python``
  package, the model fails to load with a message that names what is missing;
  the server keeps serving its other models. A KIND_CPU instance is refused
  (TensorRT runs only on GPUs).

Shape tensors (``is_shape_inference_io``) are not supported (a load error).
Runs in the worker process; tensorrt and cuda-python are imported only here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tritium.core.backend.api import Model, ModelInstance, Request
from tritium.core.backend.batch_io import BatchIO
from tritium.core.backend.framework import autocomplete_io, check_io, model_file, run_batched
from tritium.core.errors import Code, TritonError
from tritium.core.model import devices

#: TensorRT DataType names -> model-config datatypes
_TRT_TO_CONFIG = {
    "FLOAT": "TYPE_FP32",
    "HALF": "TYPE_FP16",
    "BF16": "TYPE_BF16",
    "INT8": "TYPE_INT8",
    "UINT8": "TYPE_UINT8",
    "INT32": "TYPE_INT32",
    "INT64": "TYPE_INT64",
    "BOOL": "TYPE_BOOL",
}


def _modules() -> tuple[Any, Any]:
    """``(tensorrt, cuda runtime)``; raises naming everything that is missing (GPU, packages)."""
    missing = []
    if not devices.gpu_ids():
        missing.append("an NVIDIA GPU with its driver (/proc/driver/nvidia/gpus is absent or lists none)")
    try:
        import tensorrt
    except ImportError as exc:
        tensorrt = None
        missing.append(f"the tensorrt package ({exc}; pip install 'tritium[tensorrt]')")
    try:
        try:
            from cuda.bindings import runtime as cudart
        except ImportError:
            from cuda import cudart
    except ImportError as exc:
        cudart = None
        missing.append(f"the cuda-python package ({exc}; pip install 'tritium[tensorrt]')")
    if missing:
        raise TritonError(
            Code.UNAVAILABLE,
            "the tensorrt backend runs TensorRT engines on NVIDIA GPUs; this machine lacks " + "; ".join(missing),
        )
    return tensorrt, cudart


def _check(cudart: Any, result: Any, what: str) -> Any:
    """Unpack a cuda-python call's ``(error, *values)``; raise INTERNAL on an error."""
    error, *values = result if isinstance(result, tuple) else (result,)
    if int(error) != 0:
        _err, text = cudart.cudaGetErrorString(error)
        raise TritonError(Code.INTERNAL, f"{what} failed: {text.decode() if isinstance(text, bytes) else text}")
    return values[0] if len(values) == 1 else tuple(values)


def _engine(tensorrt: Any, model: Model, path: str) -> Any:
    logger = tensorrt.Logger(tensorrt.Logger.WARNING)
    runtime = tensorrt.Runtime(logger)
    with open(path, "rb") as f:
        engine = runtime.deserialize_cuda_engine(f.read())
    if engine is None:
        raise TritonError(
            Code.INTERNAL,
            f"unable to load model '{model.name}': TensorRT could not deserialize '{path}' (an engine built by "
            "another TensorRT version or for another GPU?)",
        )
    return engine


def _io(tensorrt: Any, model: Model, engine: Any) -> list[dict[str, Any]]:
    """Each I/O tensor: name, is_input, config datatype, numpy dtype, dims (-1 dynamic)."""
    tensors = []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.is_shape_inference_io(name):
            raise TritonError(
                Code.UNSUPPORTED, f"unable to load model '{model.name}': shape tensor '{name}' is not supported"
            )
        dtype = engine.get_tensor_dtype(name)
        tensors.append(
            {
                "name": name,
                "input": engine.get_tensor_mode(name) == tensorrt.TensorIOMode.INPUT,
                "data_type": _TRT_TO_CONFIG.get(getattr(dtype, "name", str(dtype)), "TYPE_INVALID"),
                "numpy": np.dtype(tensorrt.nptype(dtype)),
                "dims": [int(d) for d in engine.get_tensor_shape(name)],
            }
        )
    return tensors


def _profile_max_batch(engine: Any, tensors: list[dict[str, Any]]) -> int:
    """The largest batch every profile's max shape allows for every input (0 when inputs have fixed dim 0)."""
    best = 0
    for profile in range(engine.num_optimization_profiles):
        limit = min(int(engine.get_tensor_profile_shape(t["name"], profile)[2][0]) for t in tensors if t["input"])
        best = max(best, limit)
    return best


def _auto_complete(model: Model, engine: Any, tensors: list[dict[str, Any]]) -> None:
    def info(is_input: bool) -> list[tuple[str, str, list[int]]]:
        return [(t["name"], t["data_type"], t["dims"]) for t in tensors if t["input"] == is_input]

    autocomplete_io(model, info(True), info(False), max_batch_size=_profile_max_batch(engine, tensors))


def TRITONBACKEND_ModelInitialize(model: Model) -> None:
    path = model_file(model, "model.plan")
    model.state = {"path": str(path)}
    tensorrt, _cudart = _modules()
    if model.auto_complete_config and not (model.config.get("input") and model.config.get("output")):
        engine = _engine(tensorrt, model, str(path))
        _auto_complete(model, engine, _io(tensorrt, model, engine))


def _group_profiles(model: Model, instance_name: str, count: int) -> list[int]:
    for group in model.config.get("instance_group", []):
        if instance_name.startswith(f"{group.get('name', '')}_") and group.get("profile"):
            chosen = [int(p) for p in group["profile"]]
            for p in chosen:
                if not 0 <= p < count:
                    raise TritonError(
                        Code.INVALID_ARG,
                        f"unable to load model '{model.name}': profile {p} does not exist (the engine has {count})",
                    )
            return chosen
    return list(range(count))


def _check_config(model: Model, tensors: list[dict[str, Any]]) -> None:
    for kind, is_input in (("input", True), ("output", False)):
        check_io(model, kind, {t["name"]: t["data_type"] for t in tensors if t["input"] == is_input})


def TRITONBACKEND_ModelInstanceInitialize(instance: ModelInstance) -> None:
    model = instance.model
    tensorrt, cudart = _modules()
    if instance.kind != "KIND_GPU":
        raise TritonError(
            Code.INVALID_ARG,
            f"unable to load model '{model.name}': TensorRT engines run only on GPUs, but instance "
            f"'{instance.name}' is {instance.kind} (use KIND_GPU)",
        )
    _check(cudart, cudart.cudaSetDevice(instance.device_id), f"cudaSetDevice({instance.device_id})")
    engine = _engine(tensorrt, model, model.state["path"])
    tensors = _io(tensorrt, model, engine)
    _check_config(model, tensors)
    stream = _check(cudart, cudart.cudaStreamCreate(), "cudaStreamCreate")
    context = engine.create_execution_context()
    if context is None:
        raise TritonError(Code.INTERNAL, f"unable to create a TensorRT execution context for model '{model.name}'")
    instance.state = {
        "cudart": cudart,
        "engine": engine,
        "context": context,
        "stream": stream,
        "tensors": tensors,
        "profiles": _group_profiles(model, instance.name, engine.num_optimization_profiles),
        "profile": -1,
        "buffers": {},  # tensor name -> (device pointer, capacity in bytes)
        "batching": int(model.config.get("max_batch_size", 0)) > 0,
        "layout": BatchIO.from_config(model.config),
        "config_outputs": [str(o["name"]) for o in model.config.get("output", [])],
    }


def _select_profile(state: dict[str, Any], inputs: dict[str, np.ndarray], model_name: str) -> None:
    engine = state["engine"]
    for profile in state["profiles"]:
        fits = True
        for name, array in inputs.items():
            low, _opt, high = engine.get_tensor_profile_shape(name, profile)
            if len(low) != array.ndim or any(not lo <= d <= hi for lo, d, hi in zip(low, array.shape, high)):
                fits = False
                break
        if fits:
            if profile != state["profile"]:
                if not state["context"].set_optimization_profile_async(profile, int(state["stream"])):
                    raise TritonError(Code.INTERNAL, f"TensorRT could not select profile {profile} for '{model_name}'")
                state["profile"] = profile
            return
    shapes = ", ".join(f"{n} {list(a.shape)}" for n, a in inputs.items())
    raise TritonError(
        Code.INVALID_ARG,
        f"model '{model_name}': no optimization profile of the engine accepts the input shapes ({shapes})",
    )


def _buffer(state: dict[str, Any], name: str, nbytes: int) -> int:
    cudart = state["cudart"]
    pointer, capacity = state["buffers"].get(name, (0, 0))
    if nbytes > capacity:
        if pointer:
            _check(cudart, cudart.cudaFree(pointer), "cudaFree")
        pointer = int(_check(cudart, cudart.cudaMalloc(max(nbytes, 1)), f"cudaMalloc({nbytes})"))
        state["buffers"][name] = (pointer, max(nbytes, 1))
    return pointer


def _run(
    state: dict[str, Any], inputs: dict[str, np.ndarray], wanted: list[str], model_name: str
) -> dict[str, np.ndarray]:
    cudart = state["cudart"]
    context = state["context"]
    stream = state["stream"]
    to_device = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
    to_host = cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
    _select_profile(state, inputs, model_name)
    keep = []
    for tensor in state["tensors"]:
        if not tensor["input"]:
            continue
        array = np.ascontiguousarray(inputs[tensor["name"]], dtype=tensor["numpy"])
        keep.append(array)
        if not context.set_input_shape(tensor["name"], tuple(array.shape)):
            raise TritonError(
                Code.INVALID_ARG, f"TensorRT refused shape {list(array.shape)} for input '{tensor['name']}'"
            )
        pointer = _buffer(state, tensor["name"], array.nbytes)
        _check(
            cudart,
            cudart.cudaMemcpyAsync(pointer, array.ctypes.data, array.nbytes, to_device, stream),
            "cudaMemcpyAsync",
        )
        context.set_tensor_address(tensor["name"], pointer)
    results = {}
    for tensor in state["tensors"]:
        if tensor["input"]:
            continue
        shape = tuple(int(d) for d in context.get_tensor_shape(tensor["name"]))
        host = np.empty(shape, tensor["numpy"])
        pointer = _buffer(state, tensor["name"], host.nbytes)
        context.set_tensor_address(tensor["name"], pointer)
        results[tensor["name"]] = (host, pointer)
    if not context.execute_async_v3(int(stream)):
        raise TritonError(Code.INTERNAL, f"TensorRT failed to run model '{model_name}'")
    for name, (host, pointer) in results.items():
        if name in wanted:
            _check(
                cudart,
                cudart.cudaMemcpyAsync(host.ctypes.data, pointer, host.nbytes, to_host, stream),
                "cudaMemcpyAsync",
            )
    _check(cudart, cudart.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
    return {name: host for name, (host, _p) in results.items() if name in wanted}


def TRITONBACKEND_ModelInstanceExecute(instance: ModelInstance, requests: list[Request]) -> None:
    state = instance.state
    name = instance.model.name
    results = run_batched(
        requests,
        state["batching"],
        lambda i, w: _run(state, i, w, name),
        state["config_outputs"],
        f"TensorRT execute failure for model '{name}'",
        state["layout"],
    )
    for request, outputs in zip(requests, results):
        request.respond(outputs)


def TRITONBACKEND_ModelInstanceFinalize(instance: ModelInstance) -> None:
    state = instance.state
    if not state:
        return
    cudart = state["cudart"]
    for pointer, _capacity in state["buffers"].values():
        cudart.cudaFree(pointer)
    cudart.cudaStreamDestroy(state["stream"])
    instance.state = None
