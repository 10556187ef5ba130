"""The tritium core: model repository, model config, backend loader, workers, schedulers, errors.

The in-process API every frontend (and any embedding application) uses::

    from tritium.core import InferenceServer, ServerOptions, InferenceRequest, InferInput

    server = InferenceServer(ServerOptions(model_repositories=["models"]))
    await server.start(frontends=False)
    response = await server.infer(InferenceRequest("m", inputs=[InferInput.from_numpy("INPUT0", x)]))
    y = response.outputs[0].as_numpy().copy()
    response.release()
    await server.stop()

Names are imported on first use, so that worker processes (which import
``tritium.core.worker``) load none of the server's machinery.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Code",
    "TritonError",
    "ServerOptions",
    "InferenceRequest",
    "InferInput",
    "RequestedOutput",
    "InferenceResponse",
    "OutputTensor",
    "InferenceServer",
    # what the frontends use besides the server (tests/unit/test_import_rules.py: they import
    # nothing else of the core)
    "clip",
    "hookimpl",
    "CudaRef",
    "ShmRef",
    "RegionKind",
    "TlsFiles",
    "BodyBudget",
    "serialize_bytes",
    "join_bytes_elements",
    "deserialize_bytes",
    "begin_trace",
    "traced_done",
    "by_name",
    "by_config_name",
    "MetricsSnapshot",
    "ModelMetrics",
    "MemoryMetrics",
    "LatencySummary",
    "Cancellable",
]

_WHERE = {
    "Code": ".errors",
    "TritonError": ".errors",
    "ServerOptions": ".options",
    "InferenceRequest": ".request",
    "InferInput": ".request",
    "RequestedOutput": ".request",
    "InferenceResponse": ".response",
    "OutputTensor": ".response",
    "InferenceServer": ".server",
    "clip": ".errors",
    "hookimpl": ".hookspecs",
    "CudaRef": ".memory.cuda",
    "ShmRef": ".memory.regions",
    "RegionKind": ".memory.regions",
    "TlsFiles": ".network",
    "BodyBudget": ".network",
    "serialize_bytes": ".tensor",
    "join_bytes_elements": ".tensor",
    "deserialize_bytes": ".tensor",
    "begin_trace": ".tracing.requests",
    "traced_done": ".tracing.requests",
    "by_name": ".types",
    "by_config_name": ".types",
    "MetricsSnapshot": ".stats",
    "ModelMetrics": ".stats",
    "MemoryMetrics": ".stats",
    "LatencySummary": ".stats",
    "Cancellable": ".servable",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
