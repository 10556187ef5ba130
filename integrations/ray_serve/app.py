"""The application builder: ``serve run tritium.integrations.ray_serve:app model_repository=/models``.

:func:`app` is a Serve application builder (Serve calls it with the
``key=value`` arguments of ``serve run``, or a config file's ``args:``,
validated as :class:`~.args.TritiumArgs`). It returns an application of two
deployments: ``TritiumServer`` (the ingress: the replicas that serve models)
and ``TritiumCoordinator`` (one small replica that keeps the others in step).
Both names can be used in a config file's ``deployments:`` section to
override Serve options.

This module does not use ``from __future__ import annotations``: Serve reads
:func:`app`'s parameter annotation at run time.
"""

from typing import Any

from ray import serve
from ray.serve import Application

from .args import TritiumArgs
from .coordinator import Coordinator
from .replica import TritiumServer

__all__ = ["app", "build_app", "SERVER_DEPLOYMENT", "COORDINATOR_DEPLOYMENT"]

SERVER_DEPLOYMENT = "TritiumServer"
COORDINATOR_DEPLOYMENT = "TritiumCoordinator"

# The coordinator answers every replica's long poll at once: it needs many concurrent calls and no CPU.
_COORDINATOR_OPTIONS: dict = {
    "num_replicas": 1,
    "max_ongoing_requests": 10_000,
    "ray_actor_options": {"num_cpus": 0},
    "health_check_period_s": 5.0,
    "logging_config": {"enable_access_log": False},  # a line per poll (each replica, every second) is noise
}


def app(args: TritiumArgs) -> Application:
    """Build the tritium application from its arguments (Serve's application builder).

    :raises ValueError: for arguments that do not validate, or ``tritium-server``
        flags that it refuses (with its message).
    """
    settings = args.settings().model_dump()
    coordinator = serve.deployment(name=COORDINATOR_DEPLOYMENT, **_COORDINATOR_OPTIONS)(Coordinator).bind(settings)
    server = serve.deployment(name=SERVER_DEPLOYMENT, **args.deployment_options())(TritiumServer)
    return server.bind(args.server_argv(), coordinator, settings)


def build_app(**kwargs: Any) -> Application:
    """:func:`app` from keyword arguments, for Python callers: ``serve.run(build_app(model_repository=...))``."""
    return app(TritiumArgs(**kwargs))
