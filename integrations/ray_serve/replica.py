"""The ``TritiumServer`` deployment: one tritium server per Serve replica.

Each replica is a Ray actor process that runs its own
:class:`~tritium.core.api.ServerAPI` (its own model instances in
worker processes, its own shared-memory arenas) on the replica's event loop,
with no endpoint of its own: Serve's HTTP proxy calls :meth:`TritiumServer.__call__`
(:class:`~.http_proxy.HttpAdapter`), its gRPC proxy calls the RPC-named methods of
:class:`~.grpc_proxy.GrpcAdapter`. Both hand each request to the handlers of
``tritium-server``'s own endpoints, over the replica's :class:`~.replica_api.ReplicaServer`.

Lifecycle (Serve calls each of these on the replica's event loop):
``__init__`` starts the server (every model loaded, as ``tritium-server``
does), joins the coordinator and replays its repository log, then starts
polling; only then does Serve route requests to the replica. ``check_health``
fails when the polling loop has stopped (Serve then replaces the
replica). ``__del__`` (a graceful stop: scale-down, redeploy, shutdown)
leaves the coordinator and drains the server (``--exit-timeout-secs``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...core.api import Code, TritonError
from ...frontends.kserve_grpc.servicer import HealthServicer, InferenceServicer
from .agent import ReplicaAgent
from .args import Settings, parse_server_command
from .grpc_proxy import GrpcAdapter
from .http_proxy import HttpAdapter
from .replica_api import ReplicaServer

log = logging.getLogger("tritium.ray_serve")

__all__ = ["TritiumServer"]


def _replica_identity() -> tuple[str, Any]:
    """This replica's Serve id and its Ray actor handle (outside Serve: the process id, no handle)."""
    try:
        import ray
        from ray import serve

        return serve.get_replica_context().replica_tag, ray.get_runtime_context().current_actor
    except Exception:  # not in a Serve replica (tests of the class itself)
        return f"pid-{os.getpid()}", None


def load_failure_message(failures: list[str]) -> str:
    """The error a replica fails with when models did not load: its first line names a model and the reason.

    ``failures`` are the repository's ``"<model> version <n>: <reason>"`` entries
    (a reason may span lines: a Python traceback). The first line is what Serve's
    deployment error and ``serve status`` end with, so it is the first model's
    name and the first line of its reason; every failure follows in full.
    """
    name, _, reason = failures[0].partition(": ")
    model, _, version = name.partition(" version ")
    which = f"model '{model}'" + (f" version {version}" if version else "")
    first = f"{which} failed to load: {reason.splitlines()[0] if reason else 'no reason given'}"
    if len(failures) > 1:
        first += f" (and {len(failures) - 1} more)"
    return "\n".join([first, "failed to load all models (--exit-on-error=true):", *failures])


class TritiumServer(GrpcAdapter):
    """A tritium server in one Serve replica.

    :param server_argv: ``tritium-server`` flags (see :meth:`~.args.TritiumArgs.server_argv`).
    :param coordinator: a deployment handle on the application's ``TritiumCoordinator``.
    :param settings: the application's :class:`~.args.Settings` (or a dict of them).
    :raises TritonError: from the constructor when a model fails to load with
        ``--exit-on-error`` (the default: INTERNAL, its first line naming the model and
        the reason, see :func:`load_failure_message`), or the coordinator cannot be reached.
    """

    async def __init__(self, server_argv: list[str], coordinator: Any, settings: Any = None) -> None:
        from ...cli import install_logging
        from ...core.api import InferenceServer

        os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")  # workers start while gRPC runs
        settings = Settings.model_validate(settings or {})
        options, args = parse_server_command(list(server_argv))
        # tritium's own log, as tritium-server writes it (--log-* flags): on the replica's stderr,
        # which Ray shows in `serve run`'s console and keeps in the node's worker-*.err file
        install_logging(args)
        options.http = options.grpc = options.metrics = False  # Serve's proxies are the endpoints
        exit_on_error, options.exit_on_error = options.exit_on_error, False  # checked below, naming the model
        self.replica_id, actor = _replica_identity()
        self.server = InferenceServer(options)
        await self.server.start(frontends=False)
        failures = self.server.load_failures()
        if failures and exit_on_error:
            await self.server.stop()
            error = TritonError(Code.INTERNAL, load_failure_message(failures))
            log.error("replica %s cannot serve: %s", self.replica_id, error.message.split("\n", 1)[0])
            raise error from None
        self.agent = ReplicaAgent(self.server, coordinator, self.replica_id, actor, settings)
        try:
            await self.agent.join()
        except BaseException:
            await self.server.stop()
            raise
        self.agent.start()
        api = ReplicaServer(self.server, self.agent)
        self.http = HttpAdapter(api, self.agent, self.agent.metrics)
        self.servicer = InferenceServicer(api, self.agent)
        self.health = HealthServicer(api, self.agent)
        log.info("replica %s serving (pid %d)", self.replica_id, os.getpid())

    async def __call__(self, request: Request) -> Response:
        """One HTTP request from Serve's proxy (KServe v2 and Triton's extensions)."""
        return await self.http.handle(request)

    async def check_health(self) -> None:
        """Serve's periodic health check.

        :raises RuntimeError: when the polling loop has stopped (the replica then
            no longer hears of model loads and unloads).
        """
        if not self.agent.healthy:
            raise RuntimeError("the replica's coordinator polling loop has stopped")

    async def __del__(self) -> None:
        """Graceful stop: leave the coordinator, then drain and stop the server."""
        agent = getattr(self, "agent", None)
        if agent is not None:
            await agent.stop()
        server = getattr(self, "server", None)
        if server is not None:
            await server.stop()
