"""The ``openvino`` backend: OpenVINO IR (``model.xml`` + ``model.bin``) and ONNX models on OpenVINO's CPU plugin.

Behaves like Triton's OpenVINO backend where it matters to users:

* model file ``<version>/model.xml`` with its weights ``model.bin`` beside it
  (or ``default_model_filename``: an ONNX file ``model.onnx`` is read too, as
  Triton's OpenVINO backend reads the formats OpenVINO's frontends accept);
  when the config names no file and there is no ``model.xml``, ``model.onnx``;
* config ``parameters`` (string values, Triton's names): ``NUM_STREAMS``,
  ``PERFORMANCE_HINT`` (``LATENCY``/``THROUGHPUT``), ``INFERENCE_NUM_THREADS``
  (passed to ``compile_model``), beyond Triton's list ``INFERENCE_PRECISION_HINT``
  (``f32``/``bf16``/``f16``: OpenVINO's CPU plugin computes in bf16 by default
  on CPUs with bf16 instructions), ``ENABLE_BATCH_PADDING`` (``YES``: a model
  whose batch dimension is fixed at ``max_batch_size`` gets smaller batches
  padded with zeros and the padding cut from its outputs), ``RESHAPE_IO_LAYERS``
  (``YES``: the model's inputs are reshaped to the config's dims with a
  dynamic batch dimension before compiling);
* auto-complete (when the config lacks inputs or outputs): names, datatypes
  and dims from the model; ``max_batch_size`` (``default-max-batch-size``, 4)
  and ``dynamic_batching {}`` when every input and output has a dynamic first
  dimension;
* one compiled model and infer request per instance; a batch of requests is
  one inference (each input one array holding every request's rows).

Config names match any of an input's or output's tensor names. Runs in the
worker process; openvino is imported only here, through :func:`import_openvino`:
with OpenVINO's usage telemetry off (``import openvino`` otherwise sends a Google
Analytics event from a forked process) and with model reading, inspection and
compiling done one model at a time (concurrent first use of OpenVINO's Python
bindings from several loader threads deadlocks inside pybind11's numpy glue).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np

from tritium.core.backend.api import Model, ModelInstance, Request
from tritium.core.backend.batch_io import BatchIO
from tritium.core.backend.framework import (
    autocomplete_io,
    check_io,
    import_framework,
    int_parameter,
    model_file,
    run_batched,
)
from tritium.core.errors import Code, TritonError
from tritium.core.inference.types import from_numpy

_HINTS = ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT")
_PRECISIONS = ("f32", "bf16", "f16")


#: held while a model is read, inspected, reshaped and compiled (see the module docstring)
_LOAD_LOCK = threading.Lock()


def import_openvino() -> Any:
    """Import ``openvino`` with its usage telemetry off and its numpy glue initialised.

    ``import openvino`` imports ``openvino.tools.ovc``, which sends a usage event
    to Google Analytics through ``openvino_telemetry`` unless the user opted out;
    tritium never talks to a network it was not asked to, so that package is
    hidden from this process (``openvino`` then uses its own no-op stub). The
    first conversion between an OpenVINO element type and a numpy dtype is done
    here, once, under a lock: done first by two threads at once it deadlocks.

    :raises TritonError: UNAVAILABLE when ``openvino`` is not installed.
    """
    if "openvino" not in sys.modules:
        sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type]
    ov = import_framework("openvino", "openvino", "pip install 'tritium[openvino]'")
    with _LOAD_LOCK:
        np.dtype(ov.Type.f32.to_dtype())
    return ov


def _yes_no(model: Model, key: str) -> bool:
    text = model.parameter(key)
    if text is None or text.strip() == "":
        return False
    value = text.strip().upper()
    if value not in ("YES", "NO"):
        raise TritonError(
            Code.INVALID_ARG, f"parameter '{key}' of model '{model.name}' must be YES or NO, got '{text}'"
        )
    return value == "YES"


def _compile_options(model: Model) -> dict[str, str]:
    """``compile_model`` properties from Triton's parameter names (checked)."""
    options: dict[str, str] = {}
    streams = model.parameter("NUM_STREAMS")
    if streams is not None and streams.strip():
        if streams.strip().upper() != "AUTO":
            int_parameter(model, "NUM_STREAMS", 0, minimum=1)
        options["NUM_STREAMS"] = streams.strip().upper()
    hint = model.parameter("PERFORMANCE_HINT")
    if hint is not None and hint.strip():
        if hint.strip().upper() not in _HINTS:
            raise TritonError(
                Code.INVALID_ARG,
                f"parameter 'PERFORMANCE_HINT' of model '{model.name}' must be one of {', '.join(_HINTS)}, got '{hint}'",
            )
        options["PERFORMANCE_HINT"] = hint.strip().upper()
    threads = int_parameter(model, "INFERENCE_NUM_THREADS", 0, minimum=0)
    if threads > 0:
        options["INFERENCE_NUM_THREADS"] = str(threads)
    precision = model.parameter("INFERENCE_PRECISION_HINT")
    if precision is not None and precision.strip():
        if precision.strip().lower() not in _PRECISIONS:
            raise TritonError(
                Code.INVALID_ARG,
                f"parameter 'INFERENCE_PRECISION_HINT' of model '{model.name}' must be one of "
                f"{', '.join(_PRECISIONS)}, got '{precision}'",
            )
        options["INFERENCE_PRECISION_HINT"] = precision.strip().lower()
    return options


def _dims(shape: Any) -> list[int]:
    return [d.get_length() if d.is_static else -1 for d in shape]


def _config_type(port: Any) -> str:
    dt = from_numpy(np.dtype(port.get_element_type().to_dtype()))
    return dt.config_name if dt is not None else "TYPE_INVALID"


def _read(model: Model, ov: Any) -> Any:
    path = model_file(model, "model.xml", alternatives=("model.onnx",))
    if path.suffix == ".xml" and not path.with_suffix(".bin").exists():
        raise TritonError(
            Code.NOT_FOUND,
            f"unable to find '{path.with_suffix('.bin')}' (the weights of '{path.name}') for model '{model.name}'",
        )
    try:
        return ov.Core().read_model(str(path))
    except Exception as exc:
        raise TritonError(Code.INTERNAL, f"openvino failed to read model '{model.name}' from '{path}': {exc}") from None


def _auto_complete(model: Model, ov_model: Any) -> None:
    def info(ports: Any) -> list[tuple[str, str, list[int]]]:
        return [(p.get_any_name(), _config_type(p), _dims(p.get_partial_shape())) for p in ports]

    autocomplete_io(model, info(ov_model.inputs), info(ov_model.outputs))


def TRITONBACKEND_ModelInitialize(model: Model) -> None:
    options = _compile_options(model)
    pad = _yes_no(model, "ENABLE_BATCH_PADDING")
    reshape = _yes_no(model, "RESHAPE_IO_LAYERS")
    model.state = {"options": options, "pad": pad, "reshape": reshape}
    if model.auto_complete_config and not (model.config.get("input") and model.config.get("output")):
        ov = import_openvino()
        with _LOAD_LOCK:
            _auto_complete(model, _read(model, ov))


def _port(model: Model, ports: Any, name: str, kind: str) -> Any:
    for port in ports:
        if name in port.get_names():
            return port
    allowed = sorted(port.get_any_name() for port in ports)
    raise TritonError(
        Code.INVALID_ARG,
        f"unable to load model '{model.name}', unexpected inference {kind} '{name}', allowed {kind}s are: "
        + ", ".join(allowed),
    )


def TRITONBACKEND_ModelInstanceInitialize(instance: ModelInstance) -> None:
    model = instance.model
    if instance.kind == "KIND_GPU":
        raise TritonError(Code.UNSUPPORTED, f"model '{model.name}': the openvino backend runs on the CPU; use KIND_CPU")
    ov = import_openvino()
    with _LOAD_LOCK:
        instance.state = _compile(model, ov)


def _compile(model: Model, ov: Any) -> dict[str, Any]:
    """Read, check, reshape and compile the model for one instance: the instance's state."""
    ov_model = _read(model, ov)
    max_batch = int(model.config.get("max_batch_size", 0))
    if model.state["reshape"]:
        shapes = {}
        for item in model.config.get("input", []):
            port = _port(model, ov_model.inputs, str(item["name"]), "input")
            dims = [int(d) for d in item.get("dims", [])]
            shapes[port.get_any_name()] = ov.PartialShape(([-1] if max_batch > 0 else []) + dims)
        try:
            ov_model.reshape(shapes)
        except Exception as exc:
            raise TritonError(Code.INVALID_ARG, f"RESHAPE_IO_LAYERS failed for model '{model.name}': {exc}") from None
    check_io(model, "input", {name: _config_type(p) for p in ov_model.inputs for name in p.get_names()})
    check_io(model, "output", {name: _config_type(p) for p in ov_model.outputs for name in p.get_names()})
    inputs = {
        str(i["name"]): _port(model, ov_model.inputs, str(i["name"]), "input").get_any_name()
        for i in model.config.get("input", [])
    }
    outputs = {
        str(o["name"]): _port(model, ov_model.outputs, str(o["name"]), "output") for o in model.config.get("output", [])
    }
    for name in _state_outputs(model):  # implicit-state outputs are model outputs too
        outputs.setdefault(name, _port(model, ov_model.outputs, name, "output"))
    static_batch = None
    if model.state["pad"] and max_batch > 0:
        first = ov_model.inputs[0].get_partial_shape()
        static_batch = first[0].get_length() if first.rank.is_static and first[0].is_static else None
    try:
        compiled = ov.Core().compile_model(ov_model, "CPU", model.state["options"])
    except Exception as exc:
        raise TritonError(Code.INTERNAL, f"openvino failed to compile model '{model.name}': {exc}") from None
    return {
        "request": compiled.create_infer_request(),
        "compiled": compiled,
        "inputs": inputs,
        "outputs": {name: compiled.output(port.get_any_name()) for name, port in outputs.items()},
        "batching": max_batch > 0,
        "layout": BatchIO.from_config(model.config),
        "config_outputs": [str(o["name"]) for o in model.config.get("output", [])],
        "static_batch": static_batch,
    }


def _state_outputs(model: Model) -> list[str]:
    return [str(s["output_name"]) for s in (model.config.get("sequence_batching") or {}).get("state", [])]


def _pad(state: dict[str, Any], inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int]:
    """Pad every input to the model's fixed batch size with zeros (ENABLE_BATCH_PADDING)."""
    target = state["static_batch"]
    rows = next(iter(inputs.values())).shape[0] if inputs else 0
    if target is None or rows >= target:
        return inputs, rows
    padded = {}
    for name, array in inputs.items():
        fill = np.zeros((target - rows, *array.shape[1:]), array.dtype)
        padded[name] = np.concatenate([array, fill], axis=0)
    return padded, rows


def TRITONBACKEND_ModelInstanceExecute(instance: ModelInstance, requests: list[Request]) -> None:
    state = instance.state
    infer = state["request"]

    def run(inputs: dict[str, np.ndarray], wanted: list[str]) -> dict[str, np.ndarray]:
        feeds, rows = _pad(state, inputs)
        results = infer.infer({state["inputs"].get(name, name): array for name, array in feeds.items()})
        outputs = {}
        for name in wanted:
            port = state["outputs"].get(name)
            if port is None:
                continue
            value = np.asarray(results[port])
            outputs[name] = value[:rows] if state["static_batch"] is not None else value
        return outputs

    failure = f"openvino execute failure for model '{instance.model.name}'"
    results = run_batched(requests, state["batching"], run, state["config_outputs"], failure, state["layout"])
    for request, outputs in zip(requests, results):
        request.respond(outputs)


def TRITONBACKEND_ModelInstanceFinalize(instance: ModelInstance) -> None:
    instance.state = None
