"""The ``tensorflow`` backend: SavedModels (``tensorflow_savedmodel``) and frozen GraphDefs (``tensorflow_graphdef``).

Behaves like Triton's TensorFlow backend where it matters to users:

* ``tensorflow_savedmodel``: the folder ``<version>/model.savedmodel`` (or
  ``default_model_filename``), the MetaGraph tagged ``TF_GRAPH_TAG`` (default
  ``serve``; the first one when the model has no ``serve`` graph) and its
  signature ``TF_SIGNATURE_DEF`` (default ``serving_default``). Config inputs
  and outputs are the signature's input and output keys, as Triton maps them.
  Auto-complete fills inputs, outputs, datatypes and dims from the signature,
  and ``max_batch_size`` (``default-max-batch-size``, 4) with
  ``dynamic_batching {}`` when every tensor's first dimension is unknown;
* ``tensorflow_graphdef``: the frozen TF1 graph ``<version>/model.graphdef``,
  config names are the graph's tensor names (``name`` or ``name:<index>``);
  no auto-complete (a GraphDef carries no signature, as in Triton);
* both run in a ``tf.compat.v1.Session`` per model instance, as Triton's
  backend runs a TensorFlow session: a batch of requests is one
  ``Session.run`` (each input one array holding every request's rows);
  BYTES tensors are ``tf.string``;
* model-config ``parameters`` (Triton's names): ``TF_NUM_INTRA_THREADS``,
  ``TF_NUM_INTER_THREADS``, ``TF_USE_PER_SESSION_THREADS``, ``TF_GRAPH_TAG``,
  ``TF_SIGNATURE_DEF``, ``MAX_SESSION_SHARE_COUNT`` (instances of the model on
  one device in one worker share a session, that many to a session);
  ``TF_INIT_OPS_FILE`` is refused; ``optimization { graph { level } }`` is
  TensorFlow's XLA ``global_jit_level`` (-1 off, 1 ON_1, 2 ON_2), as in Triton;
  ``model_operations { op_library_filename }`` loads custom-op libraries;
* ``--backend-config=tensorflow,...``: ``allow-soft-placement``,
  ``gpu-memory-fraction`` (0: grow as needed), ``default-max-batch-size``,
  ``version`` (2; 1 and others refused with Triton's messages);
* KIND_GPU instances run on ``/device:GPU:<id>`` when this TensorFlow sees a
  GPU, else the load fails saying what is missing; execution accelerators:
  ``auto_mixed_precision`` (GPU), ``gpu_io`` (a hint); TF-TRT (``tensorrt``)
  is refused, as are CPU accelerators (Triton's message);
* an error raised inside TensorFlow fails the batch's requests with
  ``TensorFlow execute failure for model '<name>': <TensorFlow's message>``.

Runs in the worker process; tensorflow is imported only here.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from tritium.core.backend.api import Backend, Model, ModelInstance, Request
from tritium.core.backend.framework import (
    autocomplete_io,
    bool_parameter,
    check_io,
    import_framework,
    int_parameter,
    model_file,
    op_libraries,
    output_names,
    refuse_parameters,
    run_batched,
    state_names,
)
from tritium.core.errors import Code, TritonError

log = logging.getLogger("tritium.backend.tensorflow")

#: TensorFlow dtype names -> model-config datatypes
_TF_TO_CONFIG = {
    "bool": "TYPE_BOOL",
    "uint8": "TYPE_UINT8",
    "uint16": "TYPE_UINT16",
    "uint32": "TYPE_UINT32",
    "uint64": "TYPE_UINT64",
    "int8": "TYPE_INT8",
    "int16": "TYPE_INT16",
    "int32": "TYPE_INT32",
    "int64": "TYPE_INT64",
    "float16": "TYPE_FP16",
    "float32": "TYPE_FP32",
    "float64": "TYPE_FP64",
    "string": "TYPE_STRING",
    "bfloat16": "TYPE_BF16",
}

_UNSUPPORTED = {
    "TF_INIT_OPS_FILE": "initialization operations from a JSON file are not run by tritium's tensorflow backend "
    "(put them in the SavedModel's main_op / init op)",
}
_INSTALL = "pip install 'tritium[tensorflow]' (or 'tritium[tensorflow-gpu]' for GPUs)"
_SAVEDMODEL = "tensorflow_savedmodel"
_GRAPHDEF = "tensorflow_graphdef"
_DEFAULT_FILES = {_SAVEDMODEL: "model.savedmodel", _GRAPHDEF: "model.graphdef"}


def _tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ info lines; the worker hosts only TF
    return import_framework("tensorflow", "tensorflow", _INSTALL)


# -- the backend: --backend-config=tensorflow,... (Triton's names) ---------------------------------
def _backend_settings(config: dict[str, str]) -> dict[str, Any]:
    """``--backend-config=tensorflow,...`` checked, with Triton's messages.

    :raises TritonError: INVALID_ARG for ``version`` other than 2 (Triton's
        messages) and for values that do not parse.
    """
    version = config.get("version", "2").strip()
    if version == "1":
        raise TritonError(
            Code.INVALID_ARG,
            "starting from 23.04, Triton no longer supports Tensorflow 1. Please switch to Tensorflow 2.",
        )
    if version != "2":
        raise TritonError(Code.INVALID_ARG, f"unexpected TensorFlow library version '{version}', expects 2.")
    soft = config.get("allow-soft-placement", "true").strip().lower()
    if soft not in ("true", "false", "1", "0", "on", "off", "yes", "no"):
        raise TritonError(
            Code.INVALID_ARG,
            f"failed to convert 'allow-soft-placement' of the tensorflow backend to a boolean: '{soft}'",
        )
    text = config.get("gpu-memory-fraction", "0").strip()
    try:
        fraction = float(text)
    except ValueError:
        raise TritonError(
            Code.INVALID_ARG, f"failed to convert 'gpu-memory-fraction' of the tensorflow backend to a number: '{text}'"
        ) from None
    if not 0.0 <= fraction <= 1.0:
        raise TritonError(Code.INVALID_ARG, f"'gpu-memory-fraction' must be between 0 and 1, got {fraction}")
    return {"allow_soft_placement": soft in ("true", "1", "on", "yes"), "gpu_memory_fraction": fraction}


def TRITONBACKEND_Initialize(backend: Backend) -> None:
    settings = _backend_settings(backend.config)
    tf = _tf()
    settings["version"] = tf.__version__
    settings["gpus"] = len(tf.config.list_physical_devices("GPU"))
    backend.state = settings


# -- the model -------------------------------------------------------------------------------------
def _config_type(tf: Any, dtype: Any) -> str:
    return _TF_TO_CONFIG.get(tf.dtypes.as_dtype(dtype).name, "TYPE_INVALID")


def _shape(proto: Any) -> list[int]:
    if proto.unknown_rank:
        return [-1]
    return [int(d.size) if d.size >= 0 else -1 for d in proto.dim]


def _meta_graph(model: Model, path: Path, tag: str) -> Any:
    """The SavedModel's MetaGraphDef tagged ``tag`` (or the first, when no tag was configured)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    try:
        saved.ParseFromString((path / "saved_model.pb").read_bytes())
    except Exception as exc:
        raise TritonError(
            Code.INVALID_ARG, f"unable to load model '{model.name}': cannot read the SavedModel at '{path}': {exc}"
        ) from None
    for meta in saved.meta_graphs:
        if (tag or "serve") in meta.meta_info_def.tags:
            return meta
    if not tag and saved.meta_graphs:
        return saved.meta_graphs[0]
    raise TritonError(
        Code.INVALID_ARG,
        f"unable to load model '{model.name}': the SavedModel has no graph tagged '{tag or 'serve'}' (it has "
        + ", ".join(",".join(m.meta_info_def.tags) for m in saved.meta_graphs)
        + ")",
    )


def _signature(model: Model, meta: Any) -> Any:
    name = model.state["signature"]
    if name not in meta.signature_def:
        available = sorted(k for k in meta.signature_def if not k.startswith("__"))
        raise TritonError(
            Code.INVALID_ARG,
            f"unable to load model '{model.name}': the SavedModel has no signature '{name}' (it has "
            f"{', '.join(available) or 'none'}; parameter TF_SIGNATURE_DEF names the one to serve)",
        )
    return meta.signature_def[name]


def _signature_io(tf: Any, items: Any) -> list[tuple[str, str, list[int]]]:
    return [(key, _config_type(tf, info.dtype), _shape(info.tensor_shape)) for key, info in sorted(items.items())]


def _platform(model: Model) -> str:
    platform = str(model.config.get("platform") or "")
    if platform not in _DEFAULT_FILES:
        raise TritonError(
            Code.INVALID_ARG,
            f"platform {platform or '(none)'} not supported for TensorFlow model '{model.name}' "
            f"(tensorflow_savedmodel or tensorflow_graphdef)",
        )
    return platform


def _model_settings(model: Model) -> dict[str, Any]:
    """The model's ``parameters`` (Triton's names) and ``optimization``, checked."""
    refuse_parameters(model, "tensorflow", _UNSUPPORTED)
    intra = int_parameter(model, "TF_NUM_INTRA_THREADS", 0)
    if intra < 0:
        raise TritonError(
            Code.INVALID_ARG,
            f"parameter 'TF_NUM_INTRA_THREADS' must be non-negative number for TensorFlow model '{model.name}'",
        )
    share = int_parameter(model, "MAX_SESSION_SHARE_COUNT", 1)
    if share <= 0:
        raise TritonError(
            Code.INVALID_ARG,
            f"parameter 'MAX_SESSION_SHARE_COUNT' must be positive number for TensorFlow model '{model.name}'",
        )
    optimization = model.config.get("optimization") or {}
    level = int((optimization.get("graph") or {}).get("level", 0))
    if level not in (-1, 0, 1, 2):
        raise TritonError(
            Code.INVALID_ARG,
            f"optimization graph level {level} of model '{model.name}' is not a TensorFlow XLA global_jit_level "
            "(-1 off, 0 default, 1 ON_1, 2 ON_2)",
        )
    accelerators = optimization.get("execution_accelerators") or {}
    if accelerators.get("cpu_execution_accelerator"):
        raise TritonError(Code.INVALID_ARG, "CPU Execution Accelerator is not supported in TensorFlow backend")
    gpu_accelerators = [str(a.get("name", "")) for a in accelerators.get("gpu_execution_accelerator", [])]
    for name in gpu_accelerators:
        if name == "tensorrt":
            raise TritonError(
                Code.UNSUPPORTED,
                f"unable to load model '{model.name}': the tensorflow backend does not run the TensorRT execution "
                "accelerator (TF-TRT); convert the model with TF-TRT beforehand, or serve a TensorRT plan",
            )
        if name not in ("gpu_io", "auto_mixed_precision"):
            raise TritonError(Code.INVALID_ARG, f"unknown Execution Accelerator '{name}' is requested")
    return {
        "intra_threads": intra,
        "inter_threads": int_parameter(model, "TF_NUM_INTER_THREADS", 0),
        "per_session_threads": bool_parameter(model, "TF_USE_PER_SESSION_THREADS", False),
        "graph_tag": model.parameter("TF_GRAPH_TAG") or "",
        "share": share,
        "jit_level": level,
        "mixed_precision": "auto_mixed_precision" in gpu_accelerators,
        "gpu_accelerators": gpu_accelerators,
    }


def _load_op_libraries(tf: Any, model: Model) -> None:
    """Load the config's custom-op libraries (``tf.load_op_library``), each a file under the model's
    folder (:func:`~tritium.core.backend.framework.op_libraries`).

    :raises TritonError: INVALID_ARG naming the field and the library.
    """
    for filename, path in op_libraries(model):
        try:
            tf.load_op_library(str(path))
        except Exception as exc:
            raise TritonError(
                Code.INVALID_ARG, f"model '{model.name}': cannot load the custom-op library '{filename}': {exc}"
            ) from None


def TRITONBACKEND_ModelInitialize(model: Model) -> None:
    platform = _platform(model)
    settings = _model_settings(model)
    path = model_file(model, _DEFAULT_FILES[platform])
    model.state = {
        "platform": platform,
        "path": path,
        "settings": settings,
        "signature": model.parameter("TF_SIGNATURE_DEF") or "serving_default",
        "sessions": {},  # device -> [[session, users]]: MAX_SESSION_SHARE_COUNT's shared sessions
        "lock": threading.Lock(),
    }
    tf = _tf()
    _load_op_libraries(tf, model)
    if platform == _SAVEDMODEL:
        meta = _meta_graph(model, path, settings["graph_tag"])
        model.state["tags"] = list(meta.meta_info_def.tags)
        signature = _signature(model, meta)
        model.state["inputs"] = {k: v.name for k, v in signature.inputs.items()}
        model.state["outputs"] = {k: v.name for k, v in signature.outputs.items()}
        if model.auto_complete_config and not (model.config.get("input") and model.config.get("output")):
            autocomplete_io(model, _signature_io(tf, signature.inputs), _signature_io(tf, signature.outputs))
        check_io(model, "input", {k: _config_type(tf, v.dtype) for k, v in signature.inputs.items()})
        check_io(model, "output", {k: _config_type(tf, v.dtype) for k, v in signature.outputs.items()})


# -- the instance ----------------------------------------------------------------------------------
def _device(model: Model, instance: ModelInstance) -> str:
    if instance.kind != "KIND_GPU":
        if model.state["settings"]["gpu_accelerators"]:
            log.warning("model '%s': GPU Execution Accelerator will be ignored for model instance on CPU", model.name)
        if model.state["settings"]["jit_level"] > 0 and "--tf_xla_cpu_global_jit" not in os.environ.get(
            "TF_XLA_FLAGS", ""
        ):
            log.warning(
                "model '%s': XLA global_jit_level %d is set, but TensorFlow clusters CPU operations for XLA only "
                "with TF_XLA_FLAGS=--tf_xla_cpu_global_jit in the server's environment",
                model.name,
                model.state["settings"]["jit_level"],
            )
        return "/device:CPU:0"
    gpus = model.backend.state["gpus"]
    if gpus == 0:
        raise TritonError(
            Code.UNAVAILABLE,
            f"model '{model.name}' has a KIND_GPU instance, but this TensorFlow ({model.backend.state['version']}) "
            "sees no GPU (the tensorflow-cpu package, or no NVIDIA GPU, driver or CUDA libraries here): "
            "pip install 'tritium[tensorflow-gpu]' on a machine with an NVIDIA GPU, or use KIND_CPU",
        )
    if instance.device_id >= gpus:
        raise TritonError(
            Code.UNAVAILABLE, f"model '{model.name}': GPU {instance.device_id} does not exist (TensorFlow sees {gpus})"
        )
    return f"/device:GPU:{instance.device_id}"


def _session_config(tf: Any, model: Model) -> Any:
    """A ConfigProto from the model's parameters and the backend config, as Triton's backend builds it."""
    settings = model.state["settings"]
    backend = model.backend.state
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=settings["intra_threads"],
        inter_op_parallelism_threads=settings["inter_threads"],
        use_per_session_threads=settings["per_session_threads"],
        allow_soft_placement=backend["allow_soft_placement"],
    )
    if backend["gpu_memory_fraction"] > 0:
        config.gpu_options.per_process_gpu_memory_fraction = backend["gpu_memory_fraction"]
    else:
        config.gpu_options.allow_growth = True
    if settings["jit_level"]:
        config.graph_options.optimizer_options.global_jit_level = settings["jit_level"]
    if settings["mixed_precision"]:
        config.graph_options.rewrite_options.auto_mixed_precision = 1  # RewriterConfig.ON
    return config


def _load(tf: Any, model: Model, device: str) -> tuple[Any, dict[str, str], dict[str, str]]:
    """A session holding the model on ``device``, and config name -> tensor name for inputs and outputs."""
    graph = tf.Graph()
    session = tf.compat.v1.Session(graph=graph, config=_session_config(tf, model))
    path = str(model.state["path"])
    try:
        with graph.as_default(), graph.device(device):
            if model.state["platform"] == _SAVEDMODEL:
                logger = tf.get_logger()
                level = logger.level
                logger.setLevel(logging.ERROR)  # the TF1 loader is "deprecated": TF Serving's way all the same
                try:
                    tf.compat.v1.saved_model.loader.load(session, model.state["tags"], path)
                finally:
                    logger.setLevel(level)
                return session, model.state["inputs"], model.state["outputs"]
            graph_def = tf.compat.v1.GraphDef()
            graph_def.ParseFromString(Path(path).read_bytes())
            tf.graph_util.import_graph_def(graph_def, name="")
    except TritonError:
        session.close()
        raise
    except Exception as exc:
        session.close()
        raise TritonError(
            Code.INTERNAL, f"tensorflow failed to load model '{model.name}' from '{path}': {exc}"
        ) from None
    return session, *_graph_io(tf, model, graph)


def _graph_io(tf: Any, model: Model, graph: Any) -> tuple[dict[str, str], dict[str, str]]:
    """GraphDef config names -> tensor names (``name`` is ``name:0``), datatypes checked."""
    placeholders = sorted(op.name for op in graph.get_operations() if op.type == "Placeholder")
    maps: dict[str, dict[str, str]] = {"input": {}, "output": {}}
    states_in, states_out = state_names(model.config)
    controls = [str(c["name"]) for c in (model.config.get("sequence_batching") or {}).get("control_input", [])]
    extra = {"input": states_in + controls, "output": states_out}
    for kind in ("input", "output"):
        items = [(str(i["name"]), str(i["data_type"])) for i in model.config.get(kind, [])]
        items += [(name, "") for name in extra[kind]]
        for name, datatype in items:
            tensor_name = name if ":" in name else f"{name}:0"
            try:
                tensor = graph.get_tensor_by_name(tensor_name)
            except (KeyError, ValueError):
                allowed = placeholders if kind == "input" else ["any tensor of the graph"]
                raise TritonError(
                    Code.INVALID_ARG,
                    f"unable to load model '{model.name}', unexpected inference {kind} '{name}', allowed {kind}s are: "
                    + ", ".join(allowed),
                ) from None
            actual = _config_type(tf, tensor.dtype)
            if datatype and actual != datatype:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"unable to load model '{model.name}', unexpected datatype {datatype} for inference {kind} "
                    f"'{name}', expecting {actual}",
                )
            maps[kind][name] = tensor_name
    return maps["input"], maps["output"]


def _shared_session(tf: Any, model: Model, device: str) -> tuple[Any, dict[str, str], dict[str, str]]:
    """A session for one more instance: a loaded one with room (MAX_SESSION_SHARE_COUNT), else a new one."""
    share = model.state["settings"]["share"]
    with model.state["lock"]:
        for entry in model.state["sessions"].setdefault(device, []):
            if entry[1] < share:
                entry[1] += 1
                return entry[0]
    loaded = _load(tf, model, device)
    with model.state["lock"]:
        model.state["sessions"][device].append([loaded, 1])
    return loaded


def TRITONBACKEND_ModelInstanceInitialize(instance: ModelInstance) -> None:
    model = instance.model
    tf = _tf()
    device = _device(model, instance)
    session, inputs, outputs = _shared_session(tf, model, device)
    if model.state["platform"] == _SAVEDMODEL:
        for name in state_names(model.config)[0]:
            _require(model, "input", name, inputs)
        for name in state_names(model.config)[1]:
            _require(model, "output", name, outputs)
    bf16 = {str(i["name"]) for i in model.config.get("input", []) if i["data_type"] == "TYPE_BF16"}
    instance.state = {
        "session": session,
        "inputs": inputs,
        "outputs": outputs,
        "callables": {},
        "batching": int(model.config.get("max_batch_size", 0)) > 0,
        "config_outputs": output_names(model.config),
        "bf16_inputs": bf16,
        "bf16": tf.bfloat16.as_numpy_dtype,
    }


def _require(model: Model, kind: str, name: str, provided: dict[str, str]) -> None:
    if name not in provided:
        raise TritonError(
            Code.INVALID_ARG,
            f"unable to load model '{model.name}', unexpected inference {kind} '{name}', allowed {kind}s are: "
            + ", ".join(sorted(provided)),
        )


def _feed(state: dict[str, Any], name: str, array: np.ndarray) -> np.ndarray:
    if name in state["bf16_inputs"]:
        return array.view(state["bf16"])
    return array


def _fetched(value: Any) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.name == "bfloat16":
        return array.view(np.uint16)
    return array


def _run(state: dict[str, Any], inputs: dict[str, np.ndarray], wanted: list[str]) -> dict[str, np.ndarray]:
    names = sorted(inputs)
    fetch = [name for name in wanted if name in state["outputs"]]
    key = (tuple(names), tuple(fetch))
    run = state["callables"].get(key)
    if run is None:
        for name in names:
            if name not in state["inputs"]:
                raise TritonError(Code.INVALID_ARG, f"unexpected inference input '{name}'")
        run = state["session"].make_callable([state["outputs"][n] for n in fetch], [state["inputs"][n] for n in names])
        state["callables"][key] = run
    values = run(*[_feed(state, name, inputs[name]) for name in names])
    return {name: _fetched(value) for name, value in zip(fetch, values)}


def TRITONBACKEND_ModelInstanceExecute(instance: ModelInstance, requests: list[Request]) -> None:
    state = instance.state

    def run(inputs: dict[str, np.ndarray], wanted: list[str]) -> dict[str, np.ndarray]:
        try:
            return _run(state, inputs, wanted)
        except TritonError:
            raise
        except Exception as exc:  # tf.errors.OpError: its message without the Python traceback TF appends
            message = getattr(exc, "message", None) or str(exc)
            raise RuntimeError(message) from None

    failure = f"TensorFlow execute failure for model '{instance.model.name}'"
    results = run_batched(requests, state["batching"], run, state["config_outputs"], failure)
    for request, outputs in zip(requests, results):
        request.respond(outputs)


def TRITONBACKEND_ModelInstanceFinalize(instance: ModelInstance) -> None:
    instance.state = None


def TRITONBACKEND_ModelFinalize(model: Model) -> None:
    for entries in (model.state or {}).get("sessions", {}).values():
        for (session, _inputs, _outputs), _users in entries:
            session.close()
    model.state = None
