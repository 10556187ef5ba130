"""The sequence batcher's server-supplied inputs: control inputs and implicit state, from the config to bytes.

:func:`parse_controls` reads ``sequence_batching.control_input`` (Triton's
``CONTROL_SEQUENCE_START`` / ``_END`` / ``_READY`` with their
``int32_false_true`` / ``fp32_false_true`` / ``bool_false_true`` values, and
``CONTROL_SEQUENCE_CORRID`` with its ``data_type``); :func:`control_bytes`
gives one control's value for a request. :func:`parse_state` reads one
``sequence_batching.state`` entry and its initial value (zeros, empty
strings, or ``initial_state.data_file`` under the model's ``initial_state/``
folder). Pure functions over the config, apart from reading that file.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import Code, TritonError
from ..inference.tensor import serialize_bytes
from ..inference.types import by_config_name
from ..model_repository.paths import safe_join

__all__ = ["Control", "StateSpec", "parse_controls", "parse_state", "control_bytes"]

_START, _END = 1, 2  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_START / _END
_FALSE_TRUE = ("int32_false_true", "fp32_false_true", "bool_false_true")
_FALSE_TRUE_TYPE = {
    "int32_false_true": "INT32",
    "fp32_false_true": "FP32",
    "bool_false_true": "BOOL",
}

#: ``(input name, kind, KServe datatype, (false, true) values or None)`` of one control input
Control = tuple[str, str, str, Any]


class StateSpec:
    """One implicit state: the input that carries it, the output that updates it, its initial bytes.

    :ivar shape: the state input's shape (``[1, ...]`` for a model that batches; -1 dims as 1).
    """

    __slots__ = ("datatype", "initial", "input_name", "output_name", "shape")

    def __init__(self, input_name: str, output_name: str, datatype: str, shape: list[int], initial: bytes) -> None:
        self.input_name = input_name
        self.output_name = output_name
        self.datatype = datatype
        self.shape = shape
        self.initial = initial


def parse_controls(model_name: str, controls: list[dict[str, Any]]) -> list[Control]:
    """The :data:`Control` of every ``control_input`` entry of a config.

    :raises TritonError: INVALID_ARG for a bad CORRID data type, or a control without false/true values.
    """
    out: list[Control] = []
    for item in controls:
        for control in item.get("control", []):
            kind = str(control.get("kind", "CONTROL_SEQUENCE_START"))
            if kind == "CONTROL_SEQUENCE_CORRID":
                dt = by_config_name(str(control.get("data_type", "TYPE_UINT64")))
                if dt is None:
                    raise TritonError(Code.INVALID_ARG, f"model '{model_name}': bad CORRID data type")
                out.append((str(item["name"]), kind, dt.name, None))
                continue
            for field in _FALSE_TRUE:
                values = control.get(field)
                if values:
                    out.append(
                        (
                            str(item["name"]),
                            kind,
                            _FALSE_TRUE_TYPE[field],
                            (values[0], values[1]),
                        )
                    )
                    break
            else:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"sequence batching control '{item['name']}' of model '{model_name}' must specify "
                    "int32_false_true, fp32_false_true or bool_false_true",
                )
    return out


def parse_state(model_name: str, st: dict[str, Any], batching: bool, model_path: str) -> StateSpec:
    """One ``state`` entry of a config, with its initial value.

    :param batching: whether the model batches (the state gets a leading batch dimension of 1).
    :param model_path: the model's folder (``initial_state/`` is under it).
    :raises TritonError: INVALID_ARG for a state without a data type, a ``data_file``
        outside ``initial_state/``, or one that cannot be read.
    """
    dt = by_config_name(str(st.get("data_type", "")))
    if dt is None:
        raise TritonError(
            Code.INVALID_ARG,
            f"model '{model_name}': state '{st.get('input_name')}' has no data type",
        )
    init = st.get("initial_state") or []
    init = init[0] if isinstance(init, list) and init else (init if isinstance(init, dict) else {})
    dims = [int(d) for d in (init.get("dims") or st.get("dims") or [])]
    shape = ([1] if batching else []) + [d if d > 0 else 1 for d in dims]
    count = int(np.prod(shape)) if shape else 1
    if init.get("data_file"):
        path = safe_join(
            os.path.join(model_path, "initial_state"),
            str(init["data_file"]),
            what="data_file",
        )
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TritonError(Code.INVALID_ARG, f"failed to read initial state file '{path}': {exc}") from exc
    elif dt.is_bytes:
        data = serialize_bytes(np.array([b""] * count, dtype=object))
    else:
        data = bytes(count * dt.itemsize)
    return StateSpec(str(st["input_name"]), str(st["output_name"]), dt.name, shape, bytes(data))


def control_bytes(control: Control, corr: int | str, flags: int, ready: bool) -> bytes:
    """The value of one control input for a request of sequence ``corr`` with ``flags`` (START 1, END 2).

    :param ready: CONTROL_SEQUENCE_READY's value (False for a null request).
    """
    _name, kind, datatype, values = control
    if kind == "CONTROL_SEQUENCE_CORRID":
        return _corrid_bytes(corr, datatype)
    on = {
        "CONTROL_SEQUENCE_START": bool(flags & _START),
        "CONTROL_SEQUENCE_END": bool(flags & _END),
        "CONTROL_SEQUENCE_READY": ready,
    }.get(kind, False)
    return _scalar_bytes(values[1] if on else values[0], datatype)


def _scalar_bytes(value: Any, datatype: str) -> bytes:
    dtype = {"INT32": np.int32, "FP32": np.float32, "BOOL": np.bool_}[datatype]
    return np.array([value], dtype=dtype).tobytes()


def _corrid_bytes(corr: int | str, datatype: str) -> bytes:
    """The CORRID control value: the id itself (a string id in a numeric CORRID gives 0)."""
    if datatype == "BYTES":
        return bytes(serialize_bytes(np.array([str(corr).encode()], dtype=object)))
    dt = {"UINT64": np.uint64, "INT64": np.int64, "UINT32": np.uint32, "INT32": np.int32}.get(datatype, np.uint64)
    value = corr if isinstance(corr, int) else 0
    return np.array([value], dtype=dt).tobytes()
