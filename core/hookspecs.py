"""Hook specifications for endpoint plugins (pluggy), the contract a frontend package implements.

A frontend package registers a module under the ``tritium.frontends``
entry-point group (``[project.entry-points."tritium.frontends"] myproto =
"mypkg.frontend"``) and enables it in ``plugins.toml`` (``[frontends.myproto]
enabled = true``). The module defines the hook below, marked with
:data:`hookimpl`; it runs in the core process, on the event loop, while the
server starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from .server_api import ServerAPI

PROJECT = "tritium"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["hookspec", "hookimpl", "Frontend", "FrontendSpec"]


class Frontend(Protocol):
    """An endpoint: translates a wire protocol into calls on the server API (:class:`~.server_api.ServerAPI`).

    ``start`` binds and begins serving; ``stop`` stops accepting, lets
    in-flight calls finish for up to ``grace`` seconds, then closes.
    A frontend that listens on a TCP port also sets ``port`` (int) and
    ``host`` or ``address`` (str): the server then checks that port before
    any model loads (a taken port fails the start-up at once) and names it
    in its options table.
    """

    name: str

    async def start(self) -> None: ...

    async def stop(self, grace: float) -> None: ...


class FrontendSpec:
    """The hooks a frontend plugin implements."""

    @hookspec
    def tritium_frontend(self, name: str, server: ServerAPI, settings: Mapping[str, Any]) -> Frontend | None:
        """Create the frontend called ``name`` if this plugin provides it, else return None.

        :param name: the frontend's name in ``plugins.toml`` (``"http"``).
        :param server: the server to serve, through the typed server API
            (:class:`tritium.core.api.ServerAPI`; its options hold the flags: ``server.options.http_port``, ...).
        :param settings: the ``[frontends.<name>]`` table of ``plugins.toml``.
        """
