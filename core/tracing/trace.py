"""One traced request's timestamps and tensors, and the JSON trace file Triton writes.

Timestamps are ``time.perf_counter_ns()`` values (the monotonic clock, as
Triton's steady clock), under Triton's names: ``HTTP_RECV_START`` /
``HTTP_RECV_END`` (or ``GRPC_``), ``REQUEST_START``, ``QUEUE_START``,
``COMPUTE_START``, ``COMPUTE_INPUT_END``, ``COMPUTE_OUTPUT_START``,
``COMPUTE_END``, ``INFER_RESPONSE_COMPLETE``, ``REQUEST_END``,
``HTTP_SEND_START`` / ``HTTP_SEND_END``. A trace file is a JSON array of
Triton's trace objects: ``{"id", "model_name", "model_version",
"request_id"}`` once, then one ``{"id", "timestamps": [{"name", "ns"}]}`` per
timestamp and, at level ``TENSORS``, ``{"id", "activity":
"TENSOR_QUEUE_INPUT" | "TENSOR_BACKEND_OUTPUT", "tensor": {"name", "data",
"shape", "dtype"}}`` per tensor. Everything here runs on the core's event loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..inference.tensor import deserialize_bytes
from ..inference.types import by_name

__all__ = ["Trace", "tensor_json"]


#: the most elements of one tensor a trace writes (the rest is left out: the text is built on
#: the event loop)
MAX_TRACE_ELEMENTS = 1 << 16


def tensor_json(name: str, datatype: str, shape: Sequence[int], data: Any) -> dict[str, Any]:
    """A tensor as Triton's trace file writes it: data and shape as comma-separated text
    (at most :data:`MAX_TRACE_ELEMENTS` elements of the data)."""
    text = ""
    dt = by_name(datatype)
    if data is not None and dt is not None:
        try:
            if dt.is_bytes:
                values = [
                    v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                    for v in deserialize_bytes(bytes(data)).reshape(-1)[:MAX_TRACE_ELEMENTS]
                ]
            else:
                count = min(len(data) // dt.numpy.itemsize, MAX_TRACE_ELEMENTS) if hasattr(data, "__len__") else -1
                values = [str(v) for v in np.frombuffer(data, dtype=dt.numpy, count=count).tolist()]
            text = ",".join(values)
        except (ValueError, TypeError):
            text = ""
    return {"name": name, "data": text, "shape": ",".join(str(d) for d in shape), "dtype": datatype}


class Trace:
    """The record of one traced request.

    :param trace_id: Triton's trace id (1, 2, ... per server).
    :param model_name: the model the request names.
    :param model_version: its version (-1 until the model is known).
    :param request_id: the client's request id ("" when none).
    :param protocol: ``HTTP`` or ``GRPC`` (the receive/send timestamps' prefix).
    :param settings: the :class:`~.settings.TraceSettings` it was sampled under.
    :param parent: the client's W3C ``traceparent`` header, if any (OpenTelemetry mode).
    """

    __slots__ = (
        "id",
        "model_name",
        "model_version",
        "request_id",
        "protocol",
        "settings",
        "timestamps",
        "tensors",
        "parent",
        "error",
        "expects_model",
        "model_done",
        "finisher",
    )

    def __init__(
        self,
        trace_id: int,
        model_name: str,
        model_version: int,
        request_id: str,
        protocol: str,
        settings: Any,
        parent: str | None = None,
    ) -> None:
        self.id = trace_id
        self.model_name = model_name
        self.model_version = model_version
        self.request_id = request_id
        self.protocol = protocol
        self.settings = settings
        self.timestamps: list[tuple[str, int]] = []
        self.tensors: list[tuple[str, dict[str, Any]]] = []
        self.parent = parent
        self.error = ""
        #: set by the model that takes the request: its queue and compute times are to come
        self.expects_model = False
        self.model_done = False
        #: called once both the model's times and the answer are in (set by the frontend)
        self.finisher: Any = None

    def stamp(self, name: str, ns: int | None = None) -> None:
        """Record timestamp ``name`` (now, when ``ns`` is None)."""
        self.timestamps.append((name, time.perf_counter_ns() if ns is None else ns))

    def tensor(self, activity: str, name: str, datatype: str, shape: Sequence[int], data: Any) -> None:
        """Record a tensor (level TENSORS): ``activity`` is ``TENSOR_QUEUE_INPUT`` or ``TENSOR_BACKEND_OUTPUT``."""
        if self.settings.tensors:
            self.tensors.append((activity, tensor_json(name, datatype, shape, data)))

    def model_times(
        self, version: int, queue_ns: int, dispatch_ns: int, timings: Sequence[int] | None, done_ns: int
    ) -> None:
        """The model's part (called by the model when it accounts the request)."""
        self.model_version = version
        self.stamp("QUEUE_START", queue_ns)
        if dispatch_ns:
            self.stamp("COMPUTE_START", dispatch_ns)
            if timings:
                input_end = dispatch_ns + max(0, int(timings[0]))
                output_start = input_end + max(0, int(timings[1]))
                self.stamp("COMPUTE_INPUT_END", input_end)
                self.stamp("COMPUTE_OUTPUT_START", output_start)
                self.stamp("COMPUTE_END", output_start + max(0, int(timings[2])))
        if done_ns:
            self.stamp("INFER_RESPONSE_COMPLETE", done_ns)
        self.model_done = True
        if self.finisher is not None:
            finisher, self.finisher = self.finisher, None
            finisher()

    def records(self) -> list[dict[str, Any]]:
        """Triton's trace objects for this request (see the module docstring)."""
        head: dict[str, Any] = {"id": self.id, "model_name": self.model_name, "model_version": self.model_version}
        if self.request_id:
            head["request_id"] = self.request_id
        stamps = sorted(self.timestamps, key=lambda item: item[1]) if self.settings.timestamps else []
        out: list[dict[str, Any]] = []
        placed = False
        for name, ns in stamps:
            if not placed and not name.endswith("_RECV_START") and not name.endswith("_RECV_END"):
                out.append(head)
                placed = True
            out.append({"id": self.id, "timestamps": [{"name": name, "ns": ns}]})
        if not placed:
            out.append(head)
        for activity, tensor in self.tensors:
            out.append({"id": self.id, "activity": activity, "tensor": tensor})
        return out


def dump_traces(traces: Sequence[Trace]) -> str:
    """A trace file's text: one JSON array of every trace's objects."""
    return json.dumps([record for trace in traces for record in trace.records()], separators=(",", ":"))
