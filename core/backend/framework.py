"""Helpers that the framework backends share (onnxruntime, pytorch, openvino, fil, tensorrt, tensorflow).

None of them imports a framework: they read the model config, find the model
file, parse Triton's string parameters with Triton's messages, and run a batch
of requests as one array per input and split the outputs back per request
(checking that the batch size was kept, as Triton's backends do). They run in
the worker process, on the executing thread.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import Code, TritonError
from ..model_repository.paths import check_relative_file, safe_join
from .api import Model, Request, batch_input
from .batch_io import BatchIO

__all__ = [
    "OP_LIBRARY_FIELD",
    "autocomplete_io",
    "bool_parameter",
    "check_io",
    "import_framework",
    "int_parameter",
    "model_file",
    "op_libraries",
    "output_names",
    "refuse_parameters",
    "run_batched",
    "state_names",
    "wanted_outputs",
]

_TRUE = ("true", "1", "on", "yes")
_FALSE = ("false", "0", "off", "no")


#: ``(name, config datatype, dims with -1 for a dynamic dimension)`` of a model's tensor
TensorInfo = tuple[str, str, list[int]]


def import_framework(module: str, backend: str, install: str) -> Any:
    """Import a framework package in the worker; a clear load error when it is missing.

    :param install: what to install, e.g. ``"pip install 'tritium[pytorch]'"``.
    :raises TritonError: UNAVAILABLE naming the package and how to install it.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise TritonError(
            Code.UNAVAILABLE, f"the {backend} backend needs the {module} package: {install} ({exc})"
        ) from None


def autocomplete_io(
    model: Model, inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo], max_batch_size: int | None = None
) -> None:
    """Complete the config's missing inputs and outputs from the model's own, as Triton's backends do.

    When every tensor's first dimension is dynamic the model batches: a config
    ``max_batch_size`` of 0 becomes ``max_batch_size`` (default: the backend's
    ``default-max-batch-size``, 4) and ``dynamic_batching {}`` is added when it
    is above 1; the batch dimension is then left out of the dims (a tensor
    with no other dimension gets dims ``[1]`` and ``reshape { shape: [] }``).

    :raises TritonError: INVALID_ARG when the model cannot batch but the config's
        ``max_batch_size`` is not 0 (Triton's "autofill failed" message).
    """
    config = dict(model.config)
    batching = all(dims and dims[0] == -1 for _n, _t, dims in [*inputs, *outputs])
    max_batch = int(config.get("max_batch_size", 0))
    if batching:
        if max_batch == 0:
            if max_batch_size is None:
                max_batch_size = max(int(model.backend.config.get("default-max-batch-size", "4")), 0)
            max_batch = max_batch_size
            config["max_batch_size"] = max_batch
        if max_batch > 1 and "dynamic_batching" not in config and "sequence_batching" not in config:
            config["dynamic_batching"] = {}
    elif max_batch != 0:
        raise TritonError(
            Code.INVALID_ARG,
            f"autofill failed for model '{model.name}': model does not support batching while non-zero "
            "max_batch_size is specified",
        )

    def describe(items: Sequence[TensorInfo]) -> list[dict[str, Any]]:
        out = []
        for name, datatype, dims in items:
            entry: dict[str, Any] = {"name": name, "data_type": datatype}
            tail = list(dims[1:]) if max_batch > 0 else list(dims)
            entry["dims"] = tail or [1]
            if not tail and max_batch > 0:
                entry["reshape"] = {"shape": []}
            out.append(entry)
        return out

    if not config.get("input"):
        config["input"] = describe(inputs)
    if not config.get("output"):
        config["output"] = describe(outputs)
    model.set_config(config)


def check_io(model: Model, kind: str, provided: Mapping[str, str]) -> None:
    """Every config ``kind`` (``"input"``/``"output"``) must be a tensor of the model, with its datatype.

    :param provided: the model's tensor names -> config datatypes (``"TYPE_FP32"``).
    :raises TritonError: INVALID_ARG with Triton's messages (unexpected name, listing
        the allowed ones; unexpected datatype).
    """
    for item in model.config.get(kind, []):
        name = str(item["name"])
        if name not in provided:
            raise TritonError(
                Code.INVALID_ARG,
                f"unable to load model '{model.name}', unexpected inference {kind} '{name}', "
                f"allowed {kind}s are: " + ", ".join(sorted(provided)),
            )
        if provided[name] != item["data_type"]:
            raise TritonError(
                Code.INVALID_ARG,
                f"unable to load model '{model.name}', unexpected datatype {item['data_type']} for inference "
                f"{kind} '{name}', expecting {provided[name]}",
            )


def model_file(model: Model, default: str, *, alternatives: Sequence[str] = ()) -> Path:
    """The model file in the version folder: ``default_model_filename`` or ``default``.

    :param alternatives: other default names tried in order when ``default`` is
        absent and the config names no file (``model.pt2`` after ``model.pt``).
    :raises TritonError: NOT_FOUND naming the path when the file does not
        exist; INVALID_ARG for a name that leaves the version folder.
    """
    version_dir = safe_join(model.repository_path, str(model.version), what="version")
    configured = model.config.get("default_model_filename") or ""
    names = [configured] if configured else [default, *alternatives]
    for name in names:
        path = safe_join(version_dir, name, what="default_model_filename")
        if path.exists():
            return path
    first = safe_join(version_dir, names[0], what="default_model_filename")
    raise TritonError(Code.NOT_FOUND, f"unable to find '{first}' for model '{model.name}' version {model.version}")


#: the config field that names custom operation libraries
OP_LIBRARY_FIELD = "model_operations.op_library_filename"


def op_libraries(model: Model) -> list[tuple[str, Path]]:
    """The custom operation libraries the config names (``model_operations.op_library_filename``), in
    order, as ``(the config's file name, its path)``.

    Unlike Triton, which loads any path, each must be a file under the model's
    folder: a config may come from a load request, and a library runs native
    code as it loads (docs/compatibility.md).

    :raises TritonError: INVALID_ARG naming the field for a path that leaves the model folder.
    """
    paths = []
    for filename in (model.config.get("model_operations") or {}).get("op_library_filename", []):
        check_relative_file(model.repository_path, filename, OP_LIBRARY_FIELD)
        paths.append((filename, safe_join(model.repository_path, filename, what=OP_LIBRARY_FIELD)))
    return paths


def bool_parameter(model: Model, key: str, default: bool) -> bool:
    """Config ``parameters[key]`` as a boolean (``true/false``, ``1/0``, ``on/off``, ``yes/no``).

    :raises TritonError: INVALID_ARG for any other text.
    """
    text = model.parameter(key)
    if text is None:
        return default
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise TritonError(Code.INVALID_ARG, f"failed to convert '{key}' of model '{model.name}' to a boolean: '{text}'")


def int_parameter(model: Model, key: str, default: int, *, minimum: int | None = None) -> int:
    """Config ``parameters[key]`` as an integer (empty text: ``default``).

    :raises TritonError: INVALID_ARG for text that is not an integer or is below ``minimum``.
    """
    text = model.parameter(key)
    if text is None or text.strip() == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise TritonError(
            Code.INVALID_ARG, f"failed to convert '{key}' of model '{model.name}' to an integer: '{text}'"
        ) from None
    if minimum is not None and value < minimum:
        raise TritonError(
            Code.INVALID_ARG, f"parameter '{key}' of model '{model.name}' must be >= {minimum}, got {value}"
        )
    return value


def refuse_parameters(model: Model, backend: str, unsupported: Mapping[str, str]) -> None:
    """Refuse the parameters of Triton's backend that this one does not implement.

    :param unsupported: Triton's parameter names it does not implement -> why (the error says so).
    :raises TritonError: UNSUPPORTED for a parameter in ``unsupported``. Other
        keys are left alone (a config may carry parameters for other tools, as in Triton).
    """
    for key in model.config.get("parameters") or {}:
        if key in unsupported:
            raise TritonError(
                Code.UNSUPPORTED,
                f"unable to load model '{model.name}': the {backend} backend does not support parameter "
                f"'{key}': {unsupported[key]}",
            )


def output_names(config: Mapping[str, Any]) -> list[str]:
    """The config's output names, in config order."""
    return [str(o["name"]) for o in config.get("output", [])]


def state_names(config: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The sequence batcher's implicit-state ``(input names, output names)``, in config order."""
    states = (config.get("sequence_batching") or {}).get("state", [])
    return [str(s["input_name"]) for s in states], [str(s["output_name"]) for s in states]


def wanted_outputs(requests: Sequence[Request], default: Sequence[str]) -> list[str]:
    """Every output some request of the batch asks for (``default`` for a request that names none).

    The core always names the implicit-state outputs of a sequence model, so
    they are computed whether or not the client asked for any output.
    """
    wanted: list[str] = []
    for request in requests:
        for name in request.requested_output_names or default:
            if name not in wanted:
                wanted.append(name)
    return wanted


def run_batched(
    requests: Sequence[Request],
    batching: bool,
    run: Callable[[dict[str, np.ndarray], list[str]], Mapping[str, np.ndarray]],
    default_outputs: Sequence[str],
    failure: str = "execute failure",
    layout: BatchIO | None = None,
) -> list[dict[str, np.ndarray]]:
    """Run ``requests`` and return each request's outputs.

    A batching model (``max_batch_size > 0``) gets the whole batch at once:
    one array per input, concatenated along dim 0 (a view of the arena when the
    dynamic batcher laid it out contiguously), and each output is split back by
    the requests' batch sizes. A model that does not batch runs each request
    on its own. With ``layout`` (the config's ragged inputs, batch inputs and
    batch outputs, :class:`~.batch_io.BatchIO`) ragged inputs are flattened,
    the batch inputs added and batch outputs scattered, as Triton's backends do.

    :param run: ``run(inputs, wanted_output_names) -> {name: array}``.
    :param failure: what an exception from ``run`` other than a TritonError
        becomes: INTERNAL ``"<failure>: <exception>"`` (``"PyTorch execute failure"``).
    :raises TritonError: INTERNAL when an output's dim 0 is not the batch's total size
        (Triton: the backend must keep the batch size), or as ``failure`` says.
    """
    try:
        return _run_batched(requests, batching, run, default_outputs, layout)
    except TritonError:
        raise
    except Exception as exc:
        raise TritonError(Code.INTERNAL, f"{failure}: {exc}") from None


def _run_batched(
    requests: Sequence[Request],
    batching: bool,
    run: Callable[[dict[str, np.ndarray], list[str]], Mapping[str, np.ndarray]],
    default_outputs: Sequence[str],
    layout: BatchIO | None,
) -> list[dict[str, np.ndarray]]:
    if not batching or len(requests) == 1:
        results = []
        for request in requests:
            wanted = wanted_outputs([request], default_outputs)
            if layout is None:
                results.append(dict(run(dict(request.inputs), wanted)))
                continue
            single = dict(run(layout.inputs([request]), wanted))
            for name, value in single.items():
                parts = layout.scatter([request], name, value)
                if parts is not None:
                    single[name] = parts[0]
            results.append(single)
        return results
    sizes = [int(next(iter(r.inputs.values())).shape[0]) if r.inputs else 1 for r in requests]
    if layout is None:
        inputs = {name: batch_input(requests, name) for name in requests[0].inputs}
    else:
        inputs = layout.inputs(requests)
    wanted = wanted_outputs(requests, default_outputs)
    outputs = run(inputs, wanted)
    total = sum(sizes)
    split: list[dict[str, np.ndarray]] = [{} for _ in requests]
    for name, value in outputs.items():
        parts = layout.scatter(requests, name, value) if layout is not None else None
        if parts is not None:
            for i, part in enumerate(parts):
                split[i][name] = part
            continue
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
