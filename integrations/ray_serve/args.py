"""The application's arguments: ``serve run ... key=value`` pairs or a Serve config file's ``args:``.

Runs in the process that builds the application (the ``serve run`` driver, or
the Serve controller for a config file). Every value may come as a string
(``serve run`` passes ``key=value`` text); lists may also be written as
comma-separated strings (``load_model=add_sub,efficientnet_lite0_onnx``).
The server settings are ``tritium-server``'s own flags: they are checked
here with its parser, so a bad flag fails the deployment before any replica
starts, with the message ``tritium-server`` prints.

This module does not use ``from __future__ import annotations``: Serve reads
the builder's parameter annotation at run time to validate the arguments.
"""

import contextlib
import io
import os
import shlex
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["TritiumArgs", "Settings"]


def _split(value: Any) -> Any:
    """``"a,b"`` -> ``["a", "b"]``; lists and None pass through."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class Settings(BaseModel):
    """What every replica and the coordinator need besides the server flags (picklable).

    :ivar query_timeout_s: how long a cluster-wide query (readiness, statistics,
        metrics) waits for the replicas' answers, seconds.
    :ivar repository_timeout_s: how long a model load or unload waits for every replica, seconds.
    :ivar poll_s: how long one poll of a replica for commands waits on the coordinator, seconds.
    :ivar stale_s: a replica that has not polled for this long is taken as gone, seconds.
    """

    query_timeout_s: float = 10.0
    repository_timeout_s: float = 600.0
    poll_s: float = 1.0
    stale_s: float = 30.0


class TritiumArgs(BaseModel):
    """Arguments of ``tritium.integrations.ray_serve:app``.

    Server (``tritium-server``'s flags, the same meaning):

    :ivar model_repository: model repository folders or URLs (``--model-repository``,
        repeatable); each must be readable from every node that runs a replica.
    :ivar model_control_mode: ``none``, ``poll`` or ``explicit`` (``--model-control-mode``).
    :ivar load_model: models loaded at start-up in explicit mode (``--load-model``).
    :ivar server_args: any other ``tritium-server`` flags, as a list or one
        shell-quoted string (``"--strict-readiness=false --log-verbose=1"``).

    Replicas (Ray Serve's deployment options for the ``TritiumServer`` deployment):

    :ivar num_replicas: a fixed number of replicas (default 1; not with autoscaling).
    :ivar min_replicas / max_replicas / initial_replicas: autoscaling bounds; giving
        ``max_replicas`` turns autoscaling on.
    :ivar target_ongoing_requests: the ongoing requests per replica autoscaling aims at.
    :ivar upscale_delay_s / downscale_delay_s: how long the autoscaler waits
        before it adds / removes a replica, seconds.
    :ivar look_back_period_s: the window over which ongoing requests are averaged, seconds.
    :ivar num_cpus / num_gpus / memory: Ray resources reserved per replica (memory in
        bytes). A replica's GPUs are its ``CUDA_VISIBLE_DEVICES``: GPU ``0`` of a
        model's ``instance_group`` is the replica's first GPU.
    :ivar max_ongoing_requests: requests one replica runs at once (Serve queues the rest).
    :ivar health_check_period_s / health_check_timeout_s: Serve's replica health checks.
    :ivar graceful_shutdown_timeout_s: how long a stopping replica may drain, seconds.
    :ivar access_log: Serve's access log line per request in the replica's log (Serve's
        ``logging_config.enable_access_log``); off by default, as ``tritium-server`` logs no
        line per request (on, it costs each request about 0.5 ms here: docs/performance.md).
    :ivar separate_thread: run tritium on Serve's separate user-code thread (Serve's
        ``RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD``, set in the replica's ``runtime_env``).
        Off by default: tritium's server runs on the replica's own event loop, a thread hop
        less each way per request; tritium does not block its event loop.
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model_repository: list[str]
    model_control_mode: Literal["none", "poll", "explicit"] = "none"
    load_model: list[str] = Field(default_factory=list)
    server_args: list[str] = Field(default_factory=list)

    num_replicas: int | None = Field(default=None, ge=1)
    min_replicas: int | None = Field(default=None, ge=0)
    max_replicas: int | None = Field(default=None, ge=1)
    initial_replicas: int | None = Field(default=None, ge=0)
    target_ongoing_requests: float = Field(default=2.0, gt=0)
    upscale_delay_s: float = Field(default=30.0, ge=0)
    downscale_delay_s: float = Field(default=600.0, ge=0)
    look_back_period_s: float = Field(default=30.0, gt=0)

    num_cpus: float = Field(default=1.0, ge=0)
    num_gpus: float = Field(default=0.0, ge=0)
    memory: int | None = Field(default=None, ge=0)
    max_ongoing_requests: int = Field(default=100, ge=1)
    health_check_period_s: float = Field(default=10.0, gt=0)
    health_check_timeout_s: float = Field(default=30.0, gt=0)
    graceful_shutdown_timeout_s: float = Field(default=30.0, ge=0)
    access_log: bool = False
    separate_thread: bool = False

    query_timeout_s: float = Field(default=10.0, gt=0)
    repository_timeout_s: float = Field(default=600.0, gt=0)

    @field_validator("model_repository", "load_model", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        return _split(value)

    @field_validator("server_args", mode="before")
    @classmethod
    def _shell_words(cls, value: Any) -> Any:
        return shlex.split(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check(self) -> "TritiumArgs":
        if not self.model_repository:
            raise ValueError("model_repository: at least one model repository is required")
        if self.autoscaling and self.num_replicas is not None:
            raise ValueError("num_replicas cannot be combined with autoscaling (max_replicas)")
        low = self.min_replicas if self.min_replicas is not None else 1
        if self.autoscaling and low > int(self.max_replicas or 0):
            raise ValueError(f"min_replicas ({low}) is more than max_replicas ({self.max_replicas})")
        options = self.server_options()  # the flags must parse, as tritium-server parses them
        if options.http_restricted_api or options.grpc_restricted_protocol:
            raise ValueError(
                "--http-restricted-api / --grpc-restricted-protocol are not applied through Ray Serve's proxies; "
                "protect the Serve address instead (docs/deploy.md)"
            )
        return self

    @property
    def autoscaling(self) -> bool:
        """Whether the replica count is left to Serve's autoscaler."""
        return self.max_replicas is not None

    def server_argv(self) -> list[str]:
        """The ``tritium-server`` command line every replica's server is built from.

        Local repository folders are made absolute here, in the process that
        builds the application (a replica's working folder is Ray's, not yours).
        """
        argv = []
        for repository in self.model_repository:
            local = "://" not in repository
            argv.append(f"--model-repository={os.path.abspath(repository) if local else repository}")
        argv.append(f"--model-control-mode={self.model_control_mode}")
        argv.extend(f"--load-model={name}" for name in self.load_model)
        argv.extend(self.server_args)
        return argv

    def server_options(self) -> Any:
        """The :class:`~tritium.core.settings.options.ServerOptions` of :meth:`server_argv`.

        :raises ValueError: with ``tritium-server``'s message for a flag it refuses.
        """
        return parse_server_argv(self.server_argv())

    def settings(self) -> Settings:
        """The coordinator's and replicas' timing settings."""
        return Settings(query_timeout_s=self.query_timeout_s, repository_timeout_s=self.repository_timeout_s)

    def deployment_options(self) -> dict:
        """Keyword arguments of ``Deployment.options`` for the ``TritiumServer`` deployment."""
        thread = "1" if self.separate_thread else "0"
        actor_options: dict = {
            "num_cpus": self.num_cpus,
            "num_gpus": self.num_gpus,
            "runtime_env": {"env_vars": {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": thread}},
        }
        if self.memory is not None:
            actor_options["memory"] = self.memory
        options: dict = {
            "ray_actor_options": actor_options,
            "max_ongoing_requests": self.max_ongoing_requests,
            "health_check_period_s": self.health_check_period_s,
            "health_check_timeout_s": self.health_check_timeout_s,
            "graceful_shutdown_timeout_s": self.graceful_shutdown_timeout_s,
            "logging_config": {"enable_access_log": self.access_log},
        }
        if self.autoscaling:
            autoscaling: dict = {
                "min_replicas": self.min_replicas if self.min_replicas is not None else 1,
                "max_replicas": self.max_replicas,
                "target_ongoing_requests": self.target_ongoing_requests,
                "upscale_delay_s": self.upscale_delay_s,
                "downscale_delay_s": self.downscale_delay_s,
                "look_back_period_s": self.look_back_period_s,
            }
            if self.initial_replicas is not None:
                autoscaling["initial_replicas"] = self.initial_replicas
            options["autoscaling_config"] = autoscaling
        else:
            options["num_replicas"] = self.num_replicas or 1
        return options


def parse_server_argv(argv: list[str]) -> Any:
    """``tritium-server``'s parser over ``argv``: its :class:`~tritium.core.settings.options.ServerOptions`.

    :raises ValueError: with the parser's message (it would exit with status 2).
    """
    return parse_server_command(argv)[0]


def parse_server_command(argv: list[str]) -> tuple[Any, Any]:
    """``tritium-server``'s parser over ``argv``: its ``ServerOptions`` and the parsed flags (``--log-*``...).

    :raises ValueError: with the parser's message (it would exit with status 2).
    """
    from ...cli import parse_args

    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            options, args = parse_args(argv)
    except SystemExit:
        message = errors.getvalue().strip().splitlines()
        reason = next((line for line in message if ": error: " in line), message[-1] if message else "")
        raise ValueError(reason or f"tritium-server refused {argv}") from None
    return options, args
