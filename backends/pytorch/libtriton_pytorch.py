"""The ``pytorch`` backend: TorchScript models (``platform: "pytorch_libtorch"``) and ``torch.export`` programs.

Behaves like Triton's PyTorch (LibTorch) backend where it matters to users:

* model file ``<version>/model.pt`` (or ``default_model_filename``), loaded
  with ``torch.jit.load`` onto the instance's device; beyond Triton, a
  ``torch.export`` program ``model.pt2`` (``torch.export.load``), used when
  the config names it or when there is no ``model.pt``. Auto-complete of the
  config works for ``.pt2`` files (inputs, outputs, datatypes and dims from
  the program's signature, symbolic dims as -1); TorchScript files carry too
  little for it, as in Triton (the config must list inputs and outputs);
* Triton's input mapping: when every config input is a ``forward()``
  argument name, by name; else when every name is ``<name>__<index>``, by
  index; else in config order. A ``forward`` that takes one
  ``Dict[str, Tensor]`` gets every input in it, by config name. Outputs:
  ``<name>__<index>`` names the position in the returned tuple, else config
  order. A sequence model with implicit state must use ``<name>__<index>``
  for every input, output, state and control input (Triton's rule);
* BYTES inputs arrive as ``List[str]`` (one dimension only, as in Triton),
  ``List[str]`` results become BYTES outputs;
* a dynamic batch runs as one call: each input is one tensor holding every
  request's rows (``torch.from_numpy`` on the shared-memory view: no copy in);
* config ``parameters`` (string values): ``INFERENCE_MODE`` (default true),
  ``DISABLE_OPTIMIZED_EXECUTION``, ``INTRA_OP_THREAD_COUNT``,
  ``INTER_OP_THREAD_COUNT``, ``ENABLE_CACHE_CLEANING``, ``ENABLE_JIT_EXECUTOR``,
  ``ENABLE_JIT_PROFILING``, ``ENABLE_TENSOR_FUSER``, ``ENABLE_WEIGHT_SHARING``
  (the instances of the model on one device use one loaded module, so one copy
  of the weights, where they run in one worker process: the default shared
  worker, or ``worker_isolation: model``; instances isolated in processes of
  their own each load theirs); ``ENABLE_NVFUSER`` is refused with the reason
  (torch 2 has no nvfuser);
* KIND_CPU, and KIND_GPU on ``cuda:<device id>`` (a clear load error when
  this torch has no CUDA or no such device); ENABLE_CACHE_CLEANING empties
  the CUDA cache after each execution;
* an exception raised inside TorchScript fails the batch's requests with
  ``PyTorch execute failure: <message with the TorchScript traceback>``.

Runs in the worker process; torch is imported only here.
"""

from __future__ import annotations

import re
import threading
import warnings
from typing import Any

import numpy as np

from tritium.core.backend.api import Model, ModelInstance, Request
from tritium.core.backend.batch_io import BatchIO
from tritium.core.backend.framework import (
    autocomplete_io,
    bool_parameter,
    import_framework,
    int_parameter,
    model_file,
    refuse_parameters,
    run_batched,
    state_names,
)
from tritium.core.errors import Code, TritonError

_INDEXED = re.compile(r"^.+__(\d+)$")

#: config datatype -> torch dtype name (Triton's ModelConfigDataTypeToTorchType, plus BF16)
_TORCH_TYPES = {
    "TYPE_BOOL": "bool",
    "TYPE_UINT8": "uint8",
    "TYPE_INT8": "int8",
    "TYPE_INT16": "int16",
    "TYPE_INT32": "int32",
    "TYPE_INT64": "int64",
    "TYPE_FP16": "float16",
    "TYPE_FP32": "float32",
    "TYPE_FP64": "float64",
    "TYPE_BF16": "bfloat16",
}
_CONFIG_TYPES = {v: k for k, v in _TORCH_TYPES.items()}

_UNSUPPORTED = {
    "ENABLE_NVFUSER": "torch 2 removed nvfuser (use ENABLE_TENSOR_FUSER)",
}


_warnings_set = False


def _torch() -> Any:
    """Import torch (the first call costs seconds: parameters and files are checked before it)."""
    global _warnings_set
    torch = import_framework("torch", "pytorch", "pip install 'tritium[pytorch]'")
    if not _warnings_set:
        # inputs are read-only views of shared memory; models must not write into them
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="torch.jit")
        _warnings_set = True
    return torch


# -- the model ------------------------------------------------------------------------------------
def _settings(model: Model) -> dict[str, Any]:
    """The backend's parameters, checked (Triton's names and defaults)."""
    refuse_parameters(model, "pytorch", _UNSUPPORTED)
    return {
        "weight_sharing": bool_parameter(model, "ENABLE_WEIGHT_SHARING", False),
        "inference_mode": bool_parameter(model, "INFERENCE_MODE", True),
        "optimized": not bool_parameter(model, "DISABLE_OPTIMIZED_EXECUTION", False),
        "cache_cleaning": bool_parameter(model, "ENABLE_CACHE_CLEANING", False),
        "intra_threads": int_parameter(model, "INTRA_OP_THREAD_COUNT", 0, minimum=0),
        "inter_threads": int_parameter(model, "INTER_OP_THREAD_COUNT", 0, minimum=0),
        "jit": {
            key: bool_parameter(model, key, False)
            for key in ("ENABLE_JIT_EXECUTOR", "ENABLE_JIT_PROFILING", "ENABLE_TENSOR_FUSER")
            if model.parameter(key) is not None
        },
    }


def TRITONBACKEND_ModelInitialize(model: Model) -> None:
    path = model_file(model, "model.pt", alternatives=("model.pt2",))
    exported = path.suffix == ".pt2"
    model.state = {
        "path": str(path),
        "exported": exported,
        "settings": _settings(model),
        "shared": {},  # device -> (module, arguments): ENABLE_WEIGHT_SHARING's one copy per device
        "lock": threading.Lock(),
    }
    if model.auto_complete_config and not (model.config.get("input") and model.config.get("output")):
        if exported:
            _auto_complete(model, _torch().export.load(str(path)))
        # TorchScript keeps no I/O metadata: Triton skips auto-complete for it too


def _dims(shape: Any) -> list[int]:
    return [d if isinstance(d, int) else -1 for d in shape]


def _exported_io(program: Any) -> tuple[list[tuple[str, str, list[int]]], list[tuple[str, str, list[int]]]]:
    """``(name, torch dtype name, dims)`` of an exported program's user inputs and outputs.

    Outputs are named ``output__<index>``.
    """
    signature = program.graph_signature
    user_inputs = list(signature.user_inputs)
    inputs = []
    outputs = []
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in user_inputs:
            value = node.meta.get("val")
            inputs.append((node.name, str(value.dtype).replace("torch.", ""), _dims(value.shape)))
        elif node.op == "output":
            results = node.args[0]
            for index, item in enumerate(results if isinstance(results, (list, tuple)) else [results]):
                value = item.meta.get("val") if hasattr(item, "meta") else None
                if value is None or not hasattr(value, "dtype"):
                    continue
                outputs.append((f"output__{index}", str(value.dtype).replace("torch.", ""), _dims(value.shape)))
    inputs.sort(key=lambda item: user_inputs.index(item[0]))
    return inputs, outputs


def _auto_complete(model: Model, program: Any) -> None:
    """Fill the config's missing inputs and outputs from a ``torch.export`` program."""
    inputs, outputs = _exported_io(program)

    def info(items: list[tuple[str, str, list[int]]]) -> list[tuple[str, str, list[int]]]:
        return [(name, _CONFIG_TYPES.get(dtype, "TYPE_INVALID"), dims) for name, dtype, dims in items]

    autocomplete_io(model, info(inputs), info(outputs))


# -- the naming rules (Triton's ValidateInputs / ValidateOutputs / GetNamingConvention) --------------
def _control_inputs(config: dict[str, Any]) -> list[str]:
    """The sequence batcher's control inputs (START, END, READY, CORRID)."""
    return [str(item["name"]) for item in (config.get("sequence_batching") or {}).get("control_input", [])]


def _naming(names: list[str], arguments: list[str] | None) -> str:
    """``forward_argument``, ``named_index`` or ``config_order`` for these config names."""
    if arguments is not None and names and all(n in arguments for n in names):
        return "forward_argument"
    if names and all(_INDEXED.match(n) for n in names):
        return "named_index"
    return "config_order"


def _input_map(model: Model, arguments: list[tuple[str, str]]) -> tuple[bool, dict[str, int]]:
    """``(dict input?, config input name -> forward() position)``; raises on a rule violation.

    :param arguments: ``(name, type kind)`` of ``forward``'s arguments without ``self``.
    """
    config = model.config
    names = [str(i["name"]) for i in config.get("input", [])]
    batch_targets = [str(t) for b in config.get("batch_input", []) for t in b.get("target_name", [])]
    extra = _control_inputs(config) + state_names(config)[0]  # inputs the sequence batcher adds
    for name in _control_inputs(config):
        if not _INDEXED.match(name):
            raise TritonError(Code.INTERNAL, f"input '{name}' does not follow <name>__<index> naming convention.")
    for name in names:
        dtype = next(str(i["data_type"]) for i in config["input"] if i["name"] == name)
        if dtype not in _TORCH_TYPES and dtype != "TYPE_STRING":
            raise TritonError(
                Code.INTERNAL, f"unsupported datatype {dtype} for input '{name}' for model '{model.name}'"
            )
    if len(arguments) == 1 and arguments[0][1] == "DictType":
        return True, {name: i for i, name in enumerate(names + batch_targets + extra)}
    for arg_name, kind in arguments:
        if kind == "DictType":
            raise TritonError(
                Code.INTERNAL,
                "Multiple inputs of kind DictType were detected. Only a single input of type Dict(str, Tensor) "
                "is supported.",
            )
        if kind not in ("TensorType", "ListType"):
            raise TritonError(
                Code.INTERNAL,
                f"An input of type '{kind}' ('{arg_name}') was detected in the model. Only a single input of type "
                "Dict(str, Tensor) or input(s) of type Tensor are supported.",
            )
    expected = len(names) + len(batch_targets) + len(extra)
    if len(arguments) != expected:
        raise TritonError(
            Code.INVALID_ARG,
            f"unable to load model '{model.name}', configuration expects {expected} inputs, model provides "
            f"{len(arguments)}",
        )
    allowed = [a for a, _k in arguments]
    all_names = names + batch_targets + extra
    convention = _naming(all_names, allowed)
    _check_state_naming(model, convention)
    positions: dict[str, int] = {}
    for i, name in enumerate(all_names):
        if convention == "forward_argument":
            positions[name] = allowed.index(name)
        elif convention == "named_index":
            match = _INDEXED.match(name)
            assert match is not None
            positions[name] = int(match.group(1))
        else:
            positions[name] = i
    _check_positions(model, "input", positions, len(arguments))
    return False, positions


def _check_state_naming(model: Model, convention: str) -> None:
    if not state_names(model.config)[0]:
        return
    if convention != "named_index":
        raise TritonError(
            Code.INVALID_ARG,
            f"PyTorch model '{model.name}' is using sequence batching with state but not all inputs and outputs "
            "follow the <name>__<index> naming convention. ",
        )


def _check_positions(model: Model, kind: str, positions: dict[str, int], available: int | None) -> None:
    """Two names may not share a position; a position must exist (when the count is known)."""
    seen: dict[int, str] = {}
    for name, index in positions.items():
        if index in seen:
            raise TritonError(
                Code.INVALID_ARG,
                f"unable to load model '{model.name}': {kind}s '{seen[index]}' and '{name}' both map to "
                f"position {index} (<name>__<index> naming convention)",
            )
        seen[index] = name
        if available is not None and index >= available:
            raise TritonError(
                Code.INVALID_ARG,
                f"unable to load model '{model.name}': {kind} '{name}' maps to position {index} "
                f"(<name>__<index> naming convention), but forward() takes {available} arguments",
            )


def _output_map(model: Model) -> dict[str, int]:
    """Config (and implicit-state) output name -> position in what ``forward`` returns."""
    config = model.config
    names = [str(o["name"]) for o in config.get("output", [])]
    for item in config.get("output", []):
        dtype = str(item["data_type"])
        if dtype not in _TORCH_TYPES and dtype != "TYPE_STRING":
            raise TritonError(
                Code.INTERNAL, f"unsupported datatype {dtype} for output '{item['name']}' for model '{model.name}'"
            )
    names += [n for n in state_names(config)[1] if n not in names]
    convention = _naming(names, None)
    _check_state_naming(model, convention)
    if convention == "named_index":
        positions = {n: int(_INDEXED.match(n).group(1)) for n in names}  # type: ignore[union-attr]
    else:
        positions = {n: i for i, n in enumerate(names)}
    _check_positions(model, "output", positions, None)
    return positions


def _check_strings(model: Model) -> None:
    """BYTES inputs and outputs are a ``List[str]``: one dimension, the batch one included (Triton)."""
    batching = int(model.config.get("max_batch_size", 0)) > 0
    for kind in ("input", "output"):
        for item in model.config.get(kind, []):
            if item["data_type"] != "TYPE_STRING":
                continue
            dims = (item.get("reshape") or {}).get("shape", item.get("dims", []))
            if len(dims) + (1 if batching else 0) > 1:
                raise TritonError(
                    Code.INTERNAL,
                    f"Triton only supports 1 dimensional List of String as {kind} for '{item['name']}' for model "
                    f"'{model.name}'",
                )


# -- the instance ----------------------------------------------------------------------------------
def _device(torch: Any, instance: ModelInstance) -> Any:
    if instance.kind != "KIND_GPU":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise TritonError(
            Code.UNAVAILABLE,
            f"model '{instance.model.name}' has a KIND_GPU instance, but this torch ({torch.__version__}) "
            "cannot use CUDA (a CPU-only build, or no GPU or driver here): install a CUDA build of torch on a "
            "machine with an NVIDIA GPU, or use KIND_CPU",
        )
    if instance.device_id >= torch.cuda.device_count():
        raise TritonError(
            Code.UNAVAILABLE,
            f"model '{instance.model.name}': GPU {instance.device_id} does not exist "
            f"(torch sees {torch.cuda.device_count()})",
        )
    return torch.device(f"cuda:{instance.device_id}")


def _apply_threads(torch: Any, settings: dict[str, Any]) -> None:
    if settings["intra_threads"] > 0:
        torch.set_num_threads(settings["intra_threads"])
    if settings["inter_threads"] > 0:
        try:
            torch.set_num_interop_threads(settings["inter_threads"])
        except RuntimeError:  # already set in this process (a second model instance initialize)
            pass
    for key, on in settings["jit"].items():
        if key == "ENABLE_JIT_EXECUTOR":
            torch._C._jit_set_profiling_executor(on)
        elif key == "ENABLE_JIT_PROFILING":
            torch._C._jit_set_profiling_mode(on)
        else:
            torch._C._jit_set_texpr_fuser_enabled(on)


def _load(torch: Any, model: Model, device: Any) -> tuple[Any, list[tuple[str, str]]]:
    """The callable and the ``(name, kind)`` of its arguments (without ``self``)."""
    path = model.state["path"]
    try:
        with torch.inference_mode(model.state["settings"]["inference_mode"]):
            if model.state["exported"]:
                program = torch.export.load(path)
                module = program.module().to(device)
                arguments = [(name, "TensorType") for name in program.graph_signature.user_inputs]
                return module, arguments
            module = torch.jit.load(path, map_location=device)
            module.eval()
    except TritonError:
        raise
    except Exception as exc:
        raise TritonError(Code.INTERNAL, f"failed to load model '{model.name}': {exc}") from None
    schema = module.forward.schema
    arguments = [(a.name, a.type.kind()) for a in schema.arguments]
    if arguments and arguments[0][1] == "ClassType":
        arguments = arguments[1:]
    return module, arguments


def TRITONBACKEND_ModelInstanceInitialize(instance: ModelInstance) -> None:
    model = instance.model
    torch = _torch()
    settings = model.state["settings"]
    device = _device(torch, instance)
    _apply_threads(torch, settings)
    if settings["weight_sharing"]:  # the instances of this model on this device in this process: one module
        with model.state["lock"]:
            shared = model.state["shared"].get(str(device))
            if shared is None:
                shared = model.state["shared"][str(device)] = _load(torch, model, device)
        module, arguments = shared
    else:
        module, arguments = _load(torch, model, device)
    if not model.config.get("input"):
        raise TritonError(Code.INTERNAL, "model configuration must contain at least one input, none were specified.")
    if not model.config.get("output"):
        raise TritonError(Code.INTERNAL, "model configuration must contain at least one output, none were specified.")
    is_dict, inputs = _input_map(model, arguments)
    _check_strings(model)
    instance.state = {
        "torch": torch,
        "module": module,
        "device": device,
        "dict_input": is_dict,
        "inputs": inputs,
        "outputs": _output_map(model),
        "string_inputs": {i["name"] for i in model.config.get("input", []) if i["data_type"] == "TYPE_STRING"},
        "bf16_inputs": {i["name"] for i in model.config.get("input", []) if i["data_type"] == "TYPE_BF16"},
        "batching": int(model.config.get("max_batch_size", 0)) > 0,
        "config_outputs": [str(o["name"]) for o in model.config.get("output", [])],
        "settings": settings,
        "layout": BatchIO.from_config(model.config),
    }


def _to_torch(state: dict[str, Any], name: str, array: np.ndarray) -> Any:
    torch = state["torch"]
    if name in state["string_inputs"] or array.dtype == object:
        return [x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x) for x in array.reshape(-1)]
    if name in state["bf16_inputs"]:
        tensor = torch.from_numpy(array).view(torch.bfloat16)
    else:
        tensor = torch.from_numpy(array)
    if state["device"].type != "cpu":
        tensor = tensor.to(state["device"], non_blocking=False)
    return tensor


def _to_numpy(torch: Any, value: Any, name: str) -> np.ndarray:
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return np.array([v.encode("utf-8") for v in value], dtype=object)
    if not isinstance(value, torch.Tensor):
        raise TritonError(
            Code.INTERNAL, f"output '{name}' is a {type(value).__name__}, expected a Tensor or a List[str]"
        )
    value = value.detach()
    if value.device.type != "cpu":
        value = value.cpu()
    if value.dtype == torch.bfloat16:
        return value.contiguous().view(torch.int16).numpy().view(np.uint16)
    return value.contiguous().numpy()


def _forward(state: dict[str, Any], inputs: dict[str, np.ndarray], wanted: list[str]) -> dict[str, np.ndarray]:
    torch = state["torch"]
    settings = state["settings"]
    converted = {name: _to_torch(state, name, array) for name, array in inputs.items()}
    if state["dict_input"]:
        args: list[Any] = [converted]
    else:
        args = [None] * len(state["inputs"])
        for name, position in state["inputs"].items():
            if name not in converted:
                raise TritonError(Code.INVALID_ARG, f"request has no input '{name}'")
            args[position] = converted[name]
    with torch.inference_mode(settings["inference_mode"]), torch.jit.optimized_execution(settings["optimized"]):
        result = state["module"](*args)
    results = list(result) if isinstance(result, (tuple, list)) and not _is_strings(result) else [result]
    outputs = {}
    for name in wanted:
        position = state["outputs"].get(name)
        if position is None:
            continue  # not an output of this model: the worker drops it
        if position >= len(results):
            raise TritonError(
                Code.INVALID_ARG,
                f"The output {name} in the model configuration refers to an output index which doesn't exist. "
                f"This model has {len(results)} outputs",
            )
        outputs[name] = _to_numpy(torch, results[position], name)
    return outputs


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def TRITONBACKEND_ModelInstanceExecute(instance: ModelInstance, requests: list[Request]) -> None:
    state = instance.state
    torch = state["torch"]

    def run(inputs: dict[str, np.ndarray], wanted: list[str]) -> dict[str, np.ndarray]:
        return _forward(state, inputs, wanted)

    try:  # torch.jit.Error carries the TorchScript traceback in its message
        results = run_batched(
            requests, state["batching"], run, state["config_outputs"], "PyTorch execute failure", state["layout"]
        )
    finally:
        if state["settings"]["cache_cleaning"] and state["device"].type == "cuda":
            torch.cuda.empty_cache()
    for request, outputs in zip(requests, results):
        request.respond(outputs)


def TRITONBACKEND_ModelInstanceFinalize(instance: ModelInstance) -> None:
    instance.state = None
