"""``triton_python_backend_utils`` for tritium: what ``import triton_python_backend_utils as pb_utils`` gives model code.

The same names as Triton's python backend (2.51): the helper functions and
:class:`ModelConfig` of Triton's pure-Python module, plus the natively
implemented objects (``Tensor``, ``InferenceRequest``, ``InferenceResponse``,
``TritonError``, ``TritonModelException``, ``Logger``, ...) from
:mod:`c_python_backend_utils`. Importable only inside a tritium worker that
hosts a ``python`` model: the backend puts this folder on ``sys.path`` there,
nowhere else.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
from c_python_backend_utils import (  # noqa: F401  (re-exported for model code)
    TRITONSERVER_MEMORY_CPU,
    TRITONSERVER_MEMORY_GPU,
    InferenceRequest,
    InferenceResponse,
    Logger,
    MetricFamily,
    PreferredMemory,
    Tensor,
    TritonError,
    TritonModelException,
    get_model_dir,
    is_model_ready,
    load_model,
    unload_model,
)

from tritium.core.errors import TritonError as _CodecError
from tritium.core.inference.tensor import TRUNCATED_PREFIX, deserialize_bytes, join_bytes_elements, scan_bytes_elements

TRITON_STRING_TO_NUMPY = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2


def serialize_byte_tensor(input_tensor: np.ndarray) -> Any:
    """Length-prefixed serialization of a BYTES tensor (object or ``np.bytes_`` array), row-major.

    Returns ``()`` for an empty tensor and None for other dtypes, as Triton's does; object
    elements other than ``bytes`` are written as ``str(element)`` UTF-8 encoded.
    """
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype == np.object_:
        items = [item if type(item) is bytes else str(item).encode("utf-8") for item in input_tensor.flat]
    elif input_tensor.dtype.type == np.bytes_:
        items = [bytes(item) for item in input_tensor.flat]
    else:
        return None
    return join_bytes_elements(items)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray:
    """Parse length-prefixed elements into a 1-D object array of ``bytes``.

    :raises struct.error: for a length prefix or an element cut short by the
        end of the buffer, with the message Triton's ``struct.unpack_from`` gives.
    """
    try:
        return deserialize_bytes(encoded_tensor)
    except _CodecError:
        pass
    _count, status, available, size = scan_bytes_elements(encoded_tensor)
    end = memoryview(encoded_tensor).nbytes
    offset, wanted = end - available, (4 if status == TRUNCATED_PREFIX else size)
    raise struct.error(
        f"unpack_from requires a buffer of at least {offset + wanted} bytes for unpacking {wanted} bytes "
        f"at offset {offset} (actual buffer size is {end})"
    )


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    """The input tensor ``name`` of a request, or None."""
    for tensor in inference_request._tensors():
        if tensor._name == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    """The output tensor ``name`` of a response, or None."""
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The config entry of input ``name`` (``model_config`` is the parsed ``args["model_config"]``), or None."""
    for entry in model_config.get("input", []):
        if entry["name"] == name:
            return entry
    return None


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The config entry of output ``name``, or None."""
    for entry in model_config.get("output", []):
        if entry["name"] == name:
            return entry
    return None


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    """True when the config sets ``model_transaction_policy { decoupled: true }``."""
    if "model_transaction_policy" in model_config:
        return bool(model_config["model_transaction_policy"].get("decoupled", False))
    return False


_TRITON_TO_NUMPY = {
    1: np.bool_,
    2: np.uint8,
    3: np.uint16,
    4: np.uint32,
    5: np.uint64,
    6: np.int8,
    7: np.int16,
    8: np.int32,
    9: np.int64,
    10: np.float16,
    11: np.float32,
    12: np.float64,
    13: np.object_,
}


def triton_to_numpy_type(data_type: int) -> Any:
    """The numpy type of a ``TRITONSERVER_DataType`` value (13, BYTES, is ``np.object_``); None if unknown."""
    return _TRITON_TO_NUMPY.get(data_type)


def numpy_to_triton_type(data_type: Any) -> int | None:
    """The ``TRITONSERVER_DataType`` value of a numpy type (``np.float32`` -> 11); None if unsupported."""
    for value, np_type in _TRITON_TO_NUMPY.items():
        if data_type == np_type:
            return value
    if data_type == np.bytes_:
        return 13
    return None


def triton_string_to_numpy(triton_type_string: str) -> Any:
    """The numpy type of a config datatype (``"TYPE_FP32"`` -> ``np.float32``)."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


class ModelConfig:
    """The model configuration given to ``auto_complete_config``; return it (changed) from there.

    Only ``max_batch_size``, inputs, outputs, the dynamic batcher and the
    transaction policy can be changed, as in Triton.
    """

    def __init__(self, model_config: str | dict[str, Any]) -> None:
        self._model_config = json.loads(model_config) if isinstance(model_config, str) else model_config

    def as_dict(self) -> dict[str, Any]:
        """The configuration, as a dict in the JSON form of Triton's ModelConfig."""
        return self._model_config

    def max_batch_size(self) -> int:
        """The configured ``max_batch_size`` (a tritium addition)."""
        return int(self._model_config.get("max_batch_size", 0))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        """Set ``max_batch_size``.

        :raises ValueError: when the configuration already specifies a larger one.
        """
        if self._model_config["max_batch_size"] > max_batch_size:
            raise ValueError(
                "configuration specified max_batch_size "
                + str(self._model_config["max_batch_size"])
                + ", but in auto-complete-config function for model '"
                + self._model_config["name"]
                + "' specified max_batch_size "
                + str(max_batch_size)
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        """Use the dynamic batcher unless the configuration names another scheduler.

        :raises ValueError: when ``sequence_batching`` or ``ensemble_scheduling`` is set.
        """
        found = None
        if "sequence_batching" in self._model_config:
            found = "sequence_batching"
        elif "ensemble_scheduling" in self._model_config:
            found = "ensemble_scheduling"
        if found is not None:
            raise ValueError(
                "Configuration specified scheduling_choice as '"
                + found
                + "', but auto-complete-config function for model '"
                + self._model_config["name"]
                + "' tries to set scheduling_choice as 'dynamic_batching'"
            )
        if "dynamic_batching" not in self._model_config:
            self._model_config["dynamic_batching"] = {}

    def add_input(self, input: dict[str, Any]) -> None:
        """Add an input (``{"name", "data_type", "dims", "optional"}``), or complete the configured one.

        :raises ValueError: for other properties, a missing one, or one that
            contradicts the configuration.
        """
        self._add("input", input, ["name", "data_type", "dims", "optional"])

    def add_output(self, output: dict[str, Any]) -> None:
        """Add an output (``{"name", "data_type", "dims"}``), or complete the configured one.

        :raises ValueError: for other properties, a missing one, or one that
            contradicts the configuration.
        """
        self._add("output", output, ["name", "data_type", "dims"])

    def _add(self, kind: str, tensor: dict[str, Any], valid: list[str]) -> None:
        model = self._model_config["name"]
        for prop in tensor:
            if prop not in valid:
                allowed = (
                    "'name', 'data_type', 'dims' and 'optional'"
                    if kind == "input"
                    else "'name', 'data_type' and 'dims'"
                )
                raise ValueError(
                    f"{kind} '{tensor.get('name', '')}' in auto-complete-config function for model '{model}' "
                    f"contains property other than {allowed}."
                )
        if "name" not in tensor:
            raise ValueError(f"{kind} in auto-complete-config function for model '{model}' is missing 'name' property.")
        for prop in ("data_type", "dims"):
            if prop not in tensor:
                raise ValueError(
                    f"{kind} '{tensor['name']}' in auto-complete-config function for model '{model}' is missing "
                    f"'{prop}' property."
                )
        entries = self._model_config.setdefault(kind, [])
        for current in entries:
            if current["name"] != tensor["name"]:
                continue
            if (
                current.get("data_type", "TYPE_INVALID") != "TYPE_INVALID"
                and current["data_type"] != tensor["data_type"]
            ):
                raise ValueError(
                    f"unable to load model '{model}', configuration expects datatype {current['data_type']} for "
                    f"{kind} '{tensor['name']}', model provides {tensor['data_type']}"
                )
            if current.get("dims") and current["dims"] != tensor["dims"]:
                raise ValueError(
                    f"model '{model}', tensor '{tensor['name']}': the model expects dims {tensor['dims']} but the "
                    f"model configuration specifies dims {current['dims']}"
                )
            if (
                kind == "input"
                and "optional" in current
                and "optional" in tensor
                and current["optional"] != tensor["optional"]
            ):
                raise ValueError(
                    f"model '{model}', tensor '{tensor['name']}': the model expects optional {tensor['optional']} "
                    f"but the model configuration specifies optional {current['optional']}"
                )
            current["data_type"] = tensor["data_type"]
            current["dims"] = tensor["dims"]
            if kind == "input" and "optional" in tensor:
                current["optional"] = tensor["optional"]
            return
        entries.append(tensor)

    def set_model_transaction_policy(self, transaction_policy_dict: dict[str, Any]) -> None:
        """Set ``model_transaction_policy`` (only ``decoupled``).

        :raises ValueError: for other properties, or when it would change a
            configured ``decoupled``.
        """
        model = self._model_config["name"]
        for prop in transaction_policy_dict:
            if prop != "decoupled":
                raise ValueError(
                    "model transaction property in auto-complete-config function for model '"
                    + model
                    + "' contains property other than 'decoupled'."
                )
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            if "decoupled" in policy and policy["decoupled"] != transaction_policy_dict["decoupled"]:
                raise ValueError(
                    "trying to change decoupled property in auto-complete-config for model '"
                    + model
                    + "', which is already set to '"
                    + str(policy["decoupled"])
                    + "'."
                )
            policy["decoupled"] = transaction_policy_dict["decoupled"]
