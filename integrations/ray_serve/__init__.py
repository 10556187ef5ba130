"""tritium on Ray Serve: a model repository served by tritium servers in Serve replicas.

::

    serve start --http-host 127.0.0.1 --grpc-port 9000 \\
        --grpc-servicer-functions tritium.proto.grpc_service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server
    serve run tritium.integrations.ray_serve:app model_repository=/models num_replicas=2

Clients (``tritonclient.http``/``.grpc``, ``perf_analyzer``) then talk KServe v2
to Serve's HTTP proxy (port 8000) and gRPC proxy. Each replica runs its own
:class:`~tritium.core.api.ServerAPI`; readiness, statistics, metrics
and model load/unload cover every replica (see docs/deploy.md).

Public names: :func:`app` (the application builder), :func:`build_app`,
:class:`TritiumArgs` (its arguments), :data:`SERVICER_FUNCTIONS` (what Serve's
gRPC proxy needs), and the two deployment names. Needs ``pip install 'tritium[ray]'``.
Names are imported on first use, so that reading :data:`SERVICER_FUNCTIONS`
or :class:`TritiumArgs` does not import Ray.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["app", "build_app", "TritiumArgs", "SERVICER_FUNCTIONS", "SERVER_DEPLOYMENT", "COORDINATOR_DEPLOYMENT"]

_WHERE = {
    "app": ".app",
    "build_app": ".app",
    "SERVER_DEPLOYMENT": ".app",
    "COORDINATOR_DEPLOYMENT": ".app",
    "TritiumArgs": ".args",
    "SERVICER_FUNCTIONS": ".grpc_proxy",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
