"""The objects Triton's python backend implements natively (its ``c_python_backend_utils`` module).

Model code reaches them through ``triton_python_backend_utils`` (``pb_utils``),
which re-exports them, exactly as in Triton: :class:`Tensor`,
:class:`InferenceRequest`, :class:`InferenceResponse`,
:class:`InferenceResponseSender`, :class:`ResponseIterator`,
:class:`TritonError`, :class:`TritonModelException`, :class:`Logger`,
:class:`MetricFamily`, :class:`PreferredMemory`, :class:`InferenceTrace` and
the functions ``get_model_dir``, ``is_model_ready``, ``load_model``,
``unload_model``.

This module only gathers them; each part lives in its own module next to it:

* ``python_backend_errors``: :class:`TritonModelException`, :class:`TritonError`;
* ``python_backend_tensors``: :class:`Tensor` and DLPack;
* ``python_backend_responses``: :class:`InferenceResponse`, the response
  sender, BLS responses and :class:`ResponseIterator`;
* ``python_backend_requests``: :class:`InferenceRequest` (incoming and BLS),
  :class:`PreferredMemory`, :class:`InferenceTrace`;
* ``python_backend_logger``: :class:`Logger`;
* ``python_backend_metrics``: :class:`MetricFamily`, :class:`Metric`;
* ``python_backend_model_control``: ``get_model_dir`` and the model loading
  API, and the per-instance context (:func:`_set_context`).

Their classes report this module as their ``__module__``, as Triton's do
(``c_python_backend_utils.Tensor``).

Runs only inside a tritium worker process hosting a ``python`` model: the
backend (``libtriton_python.py``) puts this folder on ``sys.path`` there and
installs the per-instance context with :func:`_set_context`. Frames of these
files are left out of the tracebacks model errors carry, as Triton's C++ frames
are.
"""

from __future__ import annotations

from python_backend_errors import TritonError, TritonModelException, _ErrorCode
from python_backend_logger import Logger, _LogLevel
from python_backend_metrics import Metric, MetricFamily, _MetricKind
from python_backend_model_control import (
    _set_context,  # noqa: F401  (the backend installs the instance context with it)
    get_model_dir,
    is_model_ready,
    load_model,
    unload_model,
)
from python_backend_requests import (
    TRITONSERVER_MEMORY_CPU,
    TRITONSERVER_MEMORY_GPU,
    TRITONSERVER_REQUEST_RELEASE_ALL,  # noqa: F401  (module attributes, as in Triton)
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,  # noqa: F401
    InferenceRequest,
    InferenceTrace,
    PreferredMemory,
)
from python_backend_responses import (
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,  # noqa: F401
    InferenceResponse,
    InferenceResponseSender,
    ResponseIterator,
    _RequestState,
)
from python_backend_tensors import Tensor, _Capsule, _DLManagedTensorHead

__all__ = [
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "InferenceTrace",
    "Logger",
    "Metric",
    "MetricFamily",
    "PreferredMemory",
    "ResponseIterator",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "get_model_dir",
    "is_model_ready",
    "load_model",
    "unload_model",
]

for _class in (
    TritonModelException,
    _ErrorCode,
    TritonError,
    Tensor,
    _DLManagedTensorHead,
    _Capsule,
    InferenceResponse,
    _RequestState,
    InferenceResponseSender,
    ResponseIterator,
    InferenceTrace,
    PreferredMemory,
    InferenceRequest,
    _LogLevel,
    Logger,
    _MetricKind,
    Metric,
    MetricFamily,
):
    _class.__module__ = __name__  # pickles and reprs name this module, as Triton's classes do
del _class
