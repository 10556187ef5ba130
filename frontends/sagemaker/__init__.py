"""The SageMaker endpoint: Triton's ``--allow-sagemaker`` endpoint, as an endpoint plugin.

Serves what Amazon SageMaker calls in a model container: ``GET /ping``,
``POST /invocations`` and the multi-model ``/models`` routes (:mod:`.routes`,
:mod:`.multi_model`), on its own port, with the KServe HTTP endpoint's handlers,
limits and timeouts behind them. Off by default; ``tritium-server
--allow-sagemaker=true`` enables it (``--sagemaker-port``, default 8080, or
``$SAGEMAKER_BIND_TO_PORT``). ``[frontends.sagemaker]`` in ``plugins.toml``::

    [frontends.sagemaker]
    enabled = true
    port = 8080
    address = "0.0.0.0"                 # tritium: --sagemaker-address
    multi_model_root = "/opt/ml/models" # tritium: the folder multi-model loads must come from

Read from the environment when the endpoint starts, as Triton reads them:
``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` (the model ``/invocations`` serves; unset:
the repository's only model), ``SAGEMAKER_TRITON_PING_MODE`` (``ready``, the
default, or ``live``; ``live`` by default when ``SAGEMAKER_MULTI_MODEL=true``) and
``SAGEMAKER_TRITON_INFERENCE_TYPE`` (``infer``, ``generate`` or ``generate_stream``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...core.api import Code, TritonError, hookimpl
from ..kserve_http.adapter import PreparedFrontend, check_settings, cloud_frontend
from .multi_model import DEFAULT_ROOT, MultiModel
from .routes import INFERENCE_TYPES, PING_MODES, UNSPECIFIED_MODEL, SageMakerRoutes

if TYPE_CHECKING:  # pragma: no cover
    from ...core.api import ServerAPI

log = logging.getLogger("tritium.sagemaker")

__all__ = ["tritium_frontend", "sagemaker_frontend", "DEFAULT_PORT", "SETTINGS"]

DEFAULT_PORT = 8080
#: the keys ``[frontends.sagemaker]`` may hold
SETTINGS = ("enabled", "module", "port", "address", "multi_model_root")


def _environment(env: Mapping[str, str]) -> tuple[str, str]:
    """``(ping mode, inference type)`` from the environment.

    :raises TritonError: INVALID_ARG naming the variable for a value Triton has no meaning for.
    """
    multi = env.get("SAGEMAKER_MULTI_MODEL", "").lower() == "true"
    ping = env.get("SAGEMAKER_TRITON_PING_MODE") or ("live" if multi else "ready")
    if ping not in PING_MODES:
        raise TritonError(Code.INVALID_ARG, f"SAGEMAKER_TRITON_PING_MODE must be 'ready' or 'live', not '{ping}'")
    kind = env.get("SAGEMAKER_TRITON_INFERENCE_TYPE") or "infer"
    if kind not in INFERENCE_TYPES:
        raise TritonError(
            Code.INVALID_ARG,
            f"Invalid SAGEMAKER_TRITON_INFERENCE_TYPE '{kind}'. Must be one of: infer, generate, generate_stream.",
        )
    return ping, kind


def sagemaker_frontend(
    server: ServerAPI, settings: Mapping[str, Any], env: Mapping[str, str] = os.environ
) -> PreparedFrontend:
    """The SageMaker endpoint for ``server`` (see the module's description).

    :param settings: ``[frontends.sagemaker]`` with the command line's settings laid over it.
    :param env: the environment to read ``SAGEMAKER_*`` from.
    :raises TritonError: INVALID_ARG for an unknown setting or a bad environment value.
    """
    check_settings("sagemaker", settings, SETTINGS)
    ping, kind = _environment(env)
    restrictions = dict(server.options.http_restricted_api)
    multi_model = MultiModel(server, str(settings.get("multi_model_root", DEFAULT_ROOT)), restrictions)
    default = env.get("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", "")
    routes = SageMakerRoutes(default or UNSPECIFIED_MODEL, ping, kind, restrictions, multi_model)

    def prepare() -> None:
        if default:
            return
        names = sorted({m["name"] for m in server.repository_index()})
        if len(names) == 1:  # as Triton's SageMaker container does for a repository of one model
            routes.default_model = names[0]
            log.info("SageMaker: /invocations serves model '%s' (the repository's only model)", names[0])
        elif names:
            log.warning(
                "SageMaker: the repository has %d models and SAGEMAKER_TRITON_DEFAULT_MODEL_NAME is not set: "
                "/invocations answers 'unknown model'",
                len(names),
            )

    return cloud_frontend(
        server, "sagemaker", "Sagemaker HTTPService", settings, routes.router(), prepare, DEFAULT_PORT
    )


@hookimpl
def tritium_frontend(name: str, server: ServerAPI, settings: Mapping[str, Any]) -> PreparedFrontend | None:
    """Create the ``sagemaker`` frontend (plugin hook); None for any other name."""
    if name != "sagemaker":
        return None
    return sagemaker_frontend(server, settings)
