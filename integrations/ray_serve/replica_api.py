"""The server API of one replica as Serve's proxies reach it: the KServe handlers' view of the cluster.

Serve's proxies send each request to one replica, where the HTTP endpoint's
handlers (:mod:`tritium.frontends.kserve_http.routes`) and the gRPC servicer
(:mod:`tritium.frontends.kserve_grpc.servicer`) answer it, as they do in
``tritium-server``. They call :class:`ReplicaServer`, the replica's
:class:`~tritium.core.api.ServerAPI` with what differs through Serve:

- model load and unload reach every live replica (:class:`~.agent.ReplicaAgent`);
  server and model readiness and statistics do too, through the agent as the
  handlers' :class:`~tritium.frontends.base.ClusterView`;
- system and CUDA shared memory are refused (UNSUPPORTED: HTTP 501, gRPC
  UNIMPLEMENTED): a region registered through the proxy would exist on one
  replica, and the next request may reach another one. So are the trace and
  logging settings, which would change one replica only;
- server metadata does not list the extensions that are not served
  (:data:`UNAVAILABLE_EXTENSIONS`).

Everything else is the replica's own server. Runs on the replica's event loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core.api import Code, ServerAPI, TritonError
from .agent import ReplicaAgent

__all__ = ["ReplicaServer", "UNAVAILABLE_EXTENSIONS", "REFUSED_GROUPS", "shared_memory_unavailable", "unavailable"]

#: extensions of ``tritium-server`` that are not available through Serve
UNAVAILABLE_EXTENSIONS = ("system_shared_memory", "cuda_shared_memory", "generate")


def shared_memory_unavailable() -> TritonError:
    """The answer to every shared-memory call (and an inference naming a region)."""
    return TritonError(
        Code.UNSUPPORTED,
        "shared memory is not available through Ray Serve: each request may reach another replica "
        "(send tensors in the request body)",
    )


def unavailable(extension: str) -> TritonError:
    """The answer to the ``trace`` or ``logging`` extension's settings."""
    return TritonError(
        Code.UNSUPPORTED,
        f"the {extension} extension is not available through Ray Serve: its settings would change one replica only",
    )


#: the HTTP endpoint's API groups (:func:`~tritium.frontends.kserve_http.restricted.api_group`) whose
#: URLs are refused before their handlers read the body, and the error each answers with
REFUSED_GROUPS = {
    "shared-memory": shared_memory_unavailable,
    "trace": lambda: unavailable("trace"),
    "logging": lambda: unavailable("logging"),
}


class ReplicaServer:
    """The replica's :class:`~tritium.core.api.ServerAPI` behind Serve's proxies (see the module).

    :param server: the replica's started server.
    :param agent: the replica's member of the coordinator.
    """

    def __init__(self, server: ServerAPI, agent: ReplicaAgent) -> None:
        self._server = server
        self._agent = agent

    def __getattr__(self, name: str) -> Any:
        """Every other call: the replica's own server."""
        return getattr(self._server, name)

    def metadata(self) -> dict[str, Any]:
        meta = dict(self._server.metadata())
        meta["extensions"] = [e for e in meta["extensions"] if e not in UNAVAILABLE_EXTENSIONS]
        return meta

    # -- the model repository: every replica --------------------------------------------------
    async def load_model(
        self, name: str, config: str | None = None, files: dict[str, bytes] | None = None, folder: Path | None = None
    ) -> None:
        if folder is not None:  # SageMaker's model folders: not an endpoint of Serve's proxies
            raise TritonError(Code.UNSUPPORTED, "loading a model folder is not available through Ray Serve")
        await self._agent.load_model(name, config, files)

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        await self._agent.unload_model(name, unload_dependents)

    # -- not available through Serve ------------------------------------------------------------
    def shared_memory_status(self, kind: Any, name: str = "") -> list[dict[str, Any]]:
        raise shared_memory_unavailable()

    def register_system_shared_memory(self, name: str, key: str, offset: int, byte_size: int) -> None:
        raise shared_memory_unavailable()

    def register_cuda_shared_memory(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        raise shared_memory_unavailable()

    def unregister_shared_memory(self, kind: Any, name: str = "") -> None:
        raise shared_memory_unavailable()

    def resolve_shared_memory(self, name: str, offset: int, byte_size: int | None) -> Any:
        raise shared_memory_unavailable()

    def trace_settings(self, model: str = "") -> dict[str, Any]:
        raise unavailable("trace")

    def update_trace_settings(self, model: str, changes: Any) -> dict[str, Any]:
        raise unavailable("trace")

    def log_settings(self) -> dict[str, Any]:
        raise unavailable("logging")

    def update_log_settings(self, changes: dict[str, Any]) -> dict[str, Any]:
        raise unavailable("logging")
