"""What a frontend does for a traced request: start its trace, stamp it, finish it.

Called only while :attr:`~tritium.core.tracing.Tracer.enabled`; runs on the core's event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..inference.request import InferenceRequest
from . import Tracer
from .trace import Trace

__all__ = ["begin_trace", "traced_done"]

_Done = Callable[[Any, BaseException | None], None]


def begin_trace(
    tracer: Tracer, request: InferenceRequest, protocol: str, recv_start_ns: int, parent: str | None = None
) -> Trace | None:
    """Sample ``request``; when traced, stamp its receive and start times and attach the trace to it.

    :param protocol: ``HTTP`` or ``GRPC``.
    :param recv_start_ns: when the frontend began handling the request (``perf_counter_ns``).
    :param parent: the client's W3C ``traceparent`` header, if any.
    """
    trace = tracer.sample(request.model_name, request.id, protocol, parent)
    if trace is None:
        return None
    trace.stamp(f"{protocol}_RECV_START", recv_start_ns)
    trace.stamp(f"{protocol}_RECV_END")
    trace.stamp("REQUEST_START")
    if trace.settings.tensors:
        for inp in request.inputs:
            trace.tensor("TENSOR_QUEUE_INPUT", inp.name, inp.datatype, inp.shape, inp.data)
    request.trace = trace
    return trace


def traced_done(tracer: Tracer, trace: Trace, done: _Done) -> _Done:
    """``done`` wrapped so that the response's end and send times, and its outputs, are recorded."""
    protocol = trace.protocol

    def finished(response: Any, error: BaseException | None) -> None:
        trace.stamp("REQUEST_END")
        if response is not None and trace.settings.tensors:
            for out in response.outputs:
                trace.tensor("TENSOR_BACKEND_OUTPUT", out.name, out.datatype, out.shape, out.data)
        if error is not None:
            trace.error = str(getattr(error, "message", error))
        trace.stamp(f"{protocol}_SEND_START")
        try:
            done(response, error)
        finally:
            trace.stamp(f"{protocol}_SEND_END", time.perf_counter_ns())
            if trace.expects_model and not trace.model_done:  # its execution's times come later
                trace.finisher = lambda: tracer.finish(trace)
            else:
                tracer.finish(trace)

    return finished
