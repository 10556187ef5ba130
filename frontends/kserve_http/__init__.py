"""The HTTP/REST endpoint: KServe v2 (Open Inference Protocol) plus Triton's HTTP extensions.

Enabled as ``[frontends.http]`` in ``plugins.toml``; serves on
``--http-address``/``--http-port`` in the core process. See :mod:`.app`
(dispatch and start/stop), :mod:`.connection` (HTTP/1.1 on ``httptools``),
:mod:`.router` (the URL table), :mod:`.routes` (one handler per endpoint) and
:mod:`.codec` (JSON and binary tensor data, with :mod:`._rapidjson` for the
JSON text as Triton reads and writes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...core.api import hookimpl
from .app import HTTPFrontend, create_router, frontend_from_options

if TYPE_CHECKING:  # pragma: no cover
    from ...core.api import ServerAPI

__all__ = ["HTTPFrontend", "create_router", "tritium_frontend"]


@hookimpl
def tritium_frontend(name: str, server: ServerAPI, settings: Mapping[str, Any]) -> HTTPFrontend | None:
    """Create the ``http`` frontend (plugin hook); None for any other name."""
    del settings
    if name != "http":
        return None
    return frontend_from_options(server)
