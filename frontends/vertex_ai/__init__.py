"""The Vertex AI endpoint: Triton's ``--allow-vertex-ai`` endpoint, as an endpoint plugin.

Serves what Google's Vertex AI calls in a prediction container: the health
route and the predict route that the platform names in ``AIP_HEALTH_ROUTE`` and
``AIP_PREDICT_ROUTE`` (both required, as in Triton), with the KServe HTTP
endpoint's handlers, limits and timeouts behind them (:mod:`.routes`). Off by
default; ``tritium-server --allow-vertex-ai=true`` enables it, and so does
``AIP_MODE=PREDICTION`` (which also turns the HTTP and gRPC endpoints off unless
their flags say otherwise). Port: ``--vertex-ai-port``, default ``$AIP_HTTP_PORT``
or 8080. ``[frontends.vertex_ai]`` in ``plugins.toml``::

    [frontends.vertex_ai]
    enabled = true
    port = 8080
    address = "0.0.0.0"          # tritium: --vertex-ai-address
    default_model = "my_model"   # --vertex-ai-default-model

The predict route serves ``default_model``; without one, the repository must
hold exactly one ready model, which it then serves. Both are checked once the
models are loaded, and a failure stops the start-up, as Triton's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...core.api import Code, TritonError, hookimpl
from ..kserve_http.adapter import PreparedFrontend, check_settings, cloud_frontend
from .routes import VertexAiRoutes

if TYPE_CHECKING:  # pragma: no cover
    from ...core.api import ServerAPI

log = logging.getLogger("tritium.vertex_ai")

__all__ = ["tritium_frontend", "vertex_ai_frontend", "DEFAULT_PORT", "SETTINGS"]

DEFAULT_PORT = 8080
#: the keys ``[frontends.vertex_ai]`` may hold
SETTINGS = ("enabled", "module", "port", "address", "default_model")


def _route(env: Mapping[str, str], variable: str) -> str:
    route = env.get(variable, "")
    if not route:
        raise TritonError(Code.INVALID_ARG, f"{variable} is not defined for Vertex AI endpoint")
    if not route.startswith("/") or "{" in route or "?" in route:
        raise TritonError(Code.INVALID_ARG, f"{variable} must be a URL path starting with '/', not '{route}'")
    return route


def _metrics(server: ServerAPI) -> Any:
    """The per-model Prometheus text for ``metrics`` redirects (None when ``--allow-metrics=false``)."""
    if not server.options.metrics:
        return None
    from ..metrics.collector import TritiumCollector, render

    collector = TritiumCollector(server, None, server.metrics_config["counter_latencies"])
    return lambda: render(collector.collect())


def choose_default_model(index: list[dict[str, str]], default: str) -> str:
    """The model the predict route serves, from the ready models of ``index`` (Triton's rules).

    :raises TritonError: INVALID_ARG with Triton's messages: no default and not exactly one
        ready model; a default that is not ready.
    """
    ready = {m["name"] for m in index}
    if not default:
        if len(ready) != 1:
            raise TritonError(
                Code.INVALID_ARG,
                "Expect the model repository contains only a single model if default model is not specified",
            )
        return next(iter(ready))
    if default not in ready:
        raise TritonError(Code.INVALID_ARG, f"Expect the default model '{default}' is loaded")
    return default


def vertex_ai_frontend(
    server: ServerAPI, settings: Mapping[str, Any], env: Mapping[str, str] = os.environ
) -> PreparedFrontend:
    """The Vertex AI endpoint for ``server`` (see the module's description).

    :param settings: ``[frontends.vertex_ai]`` with the command line's settings laid over it.
    :param env: the environment to read ``AIP_PREDICT_ROUTE`` and ``AIP_HEALTH_ROUTE`` from.
    :raises TritonError: INVALID_ARG for an unknown setting or a missing or bad route.
    """
    check_settings("vertex_ai", settings, SETTINGS)
    predict, health = _route(env, "AIP_PREDICT_ROUTE"), _route(env, "AIP_HEALTH_ROUTE")
    if predict == health:
        raise TritonError(Code.INVALID_ARG, f"AIP_PREDICT_ROUTE and AIP_HEALTH_ROUTE are the same path '{predict}'")
    default = str(settings.get("default_model") or "")
    routes = VertexAiRoutes(predict, health, default, dict(server.options.http_restricted_api), _metrics(server))

    def prepare() -> None:
        routes.default_model = choose_default_model(server.repository_index(ready=True), default)
        log.info("Vertex AI: %s serves model '%s'", predict, routes.default_model)

    return cloud_frontend(
        server, "vertex_ai", "Vertex AI HTTPService", settings, routes.router(), prepare, DEFAULT_PORT
    )


@hookimpl
def tritium_frontend(name: str, server: ServerAPI, settings: Mapping[str, Any]) -> PreparedFrontend | None:
    """Create the ``vertex_ai`` frontend (plugin hook); None for any other name."""
    if name != "vertex_ai":
        return None
    return vertex_ai_frontend(server, settings)
