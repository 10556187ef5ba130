"""The server API: what endpoint plugins, integrations and embedding applications program against.

:class:`ServerAPI` is the typed protocol of a running server, the one thing a
frontend (``frontends/``), an integration (``integrations/``, Ray Serve
included) or a pluggy hook is handed; :class:`InferenceServer` implements it
(and is what an embedding application or integration creates). The module also
exports the request, response, error and memory types those callers need, so
that they import nothing else of the core (``tests/unit/test_import_rules.py``
enforces it). Its names are imported eagerly; mypy checks it in strict mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import Code, TritonError, clip
from .hookspecs import hookimpl
from .inference.request import InferenceRequest, InferInput, RequestedOutput
from .inference.response import InferenceResponse, OutputTensor
from .inference.tensor import deserialize_bytes, join_bytes_elements, serialize_bytes
from .inference.types import by_config_name, by_name
from .memory.cuda import CudaRef
from .memory.pool import SharedBlock
from .memory.regions import RegionKind, ShmRef
from .model.servable import Cancellable, Done, Servable, refuse_decoupled
from .observability.custom_metrics import CustomFamily
from .observability.stats import LatencySummary, MemoryMetrics, MetricsSnapshot, ModelMetrics
from .server import InferenceServer
from .server_api import ServerAPI
from .settings.network import BodyBudget, TlsFiles
from .settings.options import ServerOptions
from .tracing.trace import Trace

__all__ = [
    "ServerAPI",
    "InferenceServer",
    "ServerOptions",
    "Servable",
    "Done",
    "Cancellable",
    "refuse_decoupled",
    "Trace",
    "Code",
    "TritonError",
    "clip",
    "InferenceRequest",
    "InferInput",
    "RequestedOutput",
    "InferenceResponse",
    "OutputTensor",
    "SharedBlock",
    "CudaRef",
    "ShmRef",
    "RegionKind",
    "TlsFiles",
    "BodyBudget",
    "serialize_bytes",
    "join_bytes_elements",
    "deserialize_bytes",
    "by_name",
    "by_config_name",
    "CustomFamily",
    "MetricsSnapshot",
    "ModelMetrics",
    "MemoryMetrics",
    "LatencySummary",
    "hookimpl",
]


if TYPE_CHECKING:  # pragma: no cover

    def _implements(server: InferenceServer) -> ServerAPI:
        """mypy checks here that :class:`InferenceServer` implements :class:`ServerAPI`."""
        return server
