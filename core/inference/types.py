"""The datatype vocabulary: KServe names, model-config names, numpy dtypes.

One table, used by every module that converts between the three spellings of
a tensor datatype:

========  ===========  ==================  ==========
KServe    config       numpy               bytes/elem
========  ===========  ==================  ==========
BOOL      TYPE_BOOL    bool                1
UINT8     TYPE_UINT8   uint8               1
...       ...          ...                 ...
BF16      TYPE_BF16    uint16 (raw bits)   2
BYTES     TYPE_STRING  object (bytes)      variable
========  ===========  ==================  ==========

BF16 has no numpy dtype: tritium carries it as its raw 16-bit patterns in a
``uint16`` array; backends that compute in bfloat16 reinterpret the bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DataType",
    "DATATYPES",
    "by_name",
    "by_config_name",
    "from_numpy",
    "element_count",
    "BYTES",
]


@dataclass(frozen=True, slots=True)
class DataType:
    """One tensor datatype.

    :param name: the KServe v2 name (``"FP32"``).
    :param config_name: the model-config enum name (``"TYPE_FP32"``).
    :param config_value: the model-config enum number (11 for FP32).
    :param numpy: the numpy dtype tensors of this type are held in.
    :param itemsize: bytes per element; 0 for BYTES (variable length).
    """

    name: str
    config_name: str
    config_value: int
    numpy: np.dtype
    itemsize: int
    #: True for BYTES, whose elements are length-prefixed byte strings (itemsize 0)
    is_bytes: bool = False


def _dt(name: str, config_name: str, value: int, dtype: object) -> DataType:
    np_dtype = np.dtype(dtype)  # type: ignore[call-overload]
    itemsize = 0 if np_dtype == np.dtype(object) else np_dtype.itemsize
    return DataType(name, config_name, value, np_dtype, itemsize, itemsize == 0)


DATATYPES: tuple[DataType, ...] = (
    _dt("BOOL", "TYPE_BOOL", 1, np.bool_),
    _dt("UINT8", "TYPE_UINT8", 2, np.uint8),
    _dt("UINT16", "TYPE_UINT16", 3, np.uint16),
    _dt("UINT32", "TYPE_UINT32", 4, np.uint32),
    _dt("UINT64", "TYPE_UINT64", 5, np.uint64),
    _dt("INT8", "TYPE_INT8", 6, np.int8),
    _dt("INT16", "TYPE_INT16", 7, np.int16),
    _dt("INT32", "TYPE_INT32", 8, np.int32),
    _dt("INT64", "TYPE_INT64", 9, np.int64),
    _dt("FP16", "TYPE_FP16", 10, np.float16),
    _dt("FP32", "TYPE_FP32", 11, np.float32),
    _dt("FP64", "TYPE_FP64", 12, np.float64),
    _dt("BYTES", "TYPE_STRING", 13, object),
    _dt("BF16", "TYPE_BF16", 14, np.uint16),
)

_BY_NAME = {dt.name: dt for dt in DATATYPES}
_BY_CONFIG = {dt.config_name: dt for dt in DATATYPES}
_BY_NUMPY = {dt.numpy: dt for dt in DATATYPES if dt.name != "BF16"}
_BY_NUMPY[np.dtype("S")] = _BY_NAME["BYTES"]

BYTES = _BY_NAME["BYTES"]


def by_name(name: str) -> DataType | None:
    """Return the datatype with KServe name ``name`` (``"FP32"``), or None."""
    return _BY_NAME.get(name)


def by_config_name(config_name: str) -> DataType | None:
    """Return the datatype with model-config name ``config_name`` (``"TYPE_FP32"``), or None."""
    return _BY_CONFIG.get(config_name)


def from_numpy(dtype: np.dtype) -> DataType | None:
    """Return the datatype numpy ``dtype`` maps to (bytes/str/object -> BYTES), or None."""
    dtype = np.dtype(dtype)
    if dtype.kind in ("S", "U", "O"):
        return BYTES
    return _BY_NUMPY.get(dtype)


def element_count(shape: Sequence[int]) -> int:
    """Number of elements of a tensor of ``shape`` (1 for a scalar shape ``[]``)."""
    return math.prod(map(int, shape))
