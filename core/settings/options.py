"""Server options: what ``tritium-server``'s flags (Triton's flag names) set."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..tracing.settings import TraceSettings
from .composition import Composition
from .network import DEFAULT_MAX_REQUEST_BYTES, NetworkSettings

__all__ = ["ServerOptions", "default_backend_directory"]


def default_backend_directory() -> str:
    """The ``backends/`` folder of this installation."""
    from ... import backends

    return str(Path(backends.__file__).resolve().parent)


#: the default reply poll window (µs) on machines with two CPUs or more (see ``--reply-poll-us``)
DEFAULT_REPLY_POLL_US = 300


#: where a container's CPU limit is read: cgroup v2's ``cpu.max``, then cgroup v1's quota and period
CGROUP_CPU_MAX = "/sys/fs/cgroup/cpu.max"
CGROUP_V1_CPU = "/sys/fs/cgroup/cpu"


def cpu_limit() -> float | None:
    """The CPUs this process's cgroup may use (``quota / period``), or None when unlimited or unknown."""
    try:
        with open(CGROUP_CPU_MAX) as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open(f"{CGROUP_V1_CPU}/cpu.cfs_quota_us") as f:
            quota_us = int(f.read())
        with open(f"{CGROUP_V1_CPU}/cpu.cfs_period_us") as f:
            period_us = int(f.read())
    except (OSError, ValueError):
        return None
    return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us


def default_reply_poll_us() -> int:
    """:data:`DEFAULT_REPLY_POLL_US` where this process may run on two CPUs or more (its affinity
    and its cgroup's CPU limit), else 0: on one CPU the core's poll would only hold up the worker
    it waits for, and under a one-CPU quota it would spend the container's CPU time."""
    try:
        cpus: float = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without sched_getaffinity
        cpus = os.cpu_count() or 1
    limit = cpu_limit()
    if limit is not None:
        cpus = min(cpus, limit)
    return DEFAULT_REPLY_POLL_US if cpus >= 2 else 0


@dataclass(slots=True)
class ServerOptions:
    """Settings of one server; frozen once the server starts.

    :ivar model_repositories: model repository folders (``--model-repository``, repeatable).
    :ivar backend_directory: the global backend directory (``--backend-directory``).
    :ivar backend_config: per-backend settings (``--backend-config=<backend>,<key>=<value>``).
    :ivar auto_complete: let backends complete configs (off with ``--disable-auto-complete-config``).
    :ivar exit_on_error: exit when a model fails to load at start-up (``--exit-on-error``).
    :ivar strict_readiness: ready only when every model is ready (``--strict-readiness``).
    :ivar log_verbose: ``--log-verbose`` level.
    :ivar exit_timeout_s: how long shutdown waits for in-flight requests (``--exit-timeout-secs``).
    :ivar model_load_threads: models loaded concurrently (``--model-load-thread-count``).
    :ivar arena_dir: put shared-memory arena segments in this folder instead of memory.
    :ivar reply_poll_us: how long the core polls a fast worker's socket for its reply while only
        one batch is in flight, µs (``--reply-poll-us``; 0: never; by default
        :func:`default_reply_poll_us`; see :mod:`tritium.core.worker.reply_poll`).
    :ivar python: interpreter of the worker processes.
    :ivar http / grpc / metrics: endpoint switches (``--allow-http`` ...), ports and addresses.
    :ivar max_request_bytes: largest request body accepted on HTTP and gRPC, bytes (default 512 MiB).
    :ivar network: body budget, timeouts, gRPC keepalive and TLS (:class:`~.network.NetworkSettings`).
    :ivar model_control_mode: ``none`` / ``poll`` / ``explicit`` (``--model-control-mode``).
    :ivar startup_models: models loaded at start-up in ``explicit`` mode (``--load-model``;
        ``["*"]`` = every model).
    :ivar repository_poll_s: seconds between repository polls in ``poll`` mode
        (``--repository-poll-secs``; 0 = never).
    :ivar allow_file_override: accept ``file:`` contents in load requests
        (``--model-load-allow-file-override``; off by default: it runs uploaded code).
    :ivar model_cache_dir: local folder for remote repositories' downloads and ``file:`` uploads
        (``--model-cache-directory``; default: a folder under the system's temporary folder).
    :ivar http_restricted_api: protected API groups of the HTTP endpoint: group -> (header, value)
        (``--http-restricted-api``).
    :ivar grpc_restricted_protocol: the same for the gRPC endpoint (``--grpc-restricted-protocol``).
    :ivar cache_config: the response cache: cache name -> its settings (``--cache-config``).
    :ivar composition: the backends and endpoints ``build.py`` composed this server with
        (from ``plugins.toml``; not composed by default).
    :ivar frontend_settings: endpoint-plugin settings from the command line, laid over the
        plugin's ``[frontends.<name>]`` table of ``plugins.toml`` (``--openai-port 9000`` gives
        ``{"openai": {"enabled": True, "port": 9000}}``: a flag that configures an endpoint enables it).
    :ivar rate_limit: ``--rate-limit``: ``"off"`` or ``"execution_count"``.
    :ivar rate_limit_resources: ``--rate-limit-resource`` settings, ``(name, count, device or None)``.
    :ivar trace: the trace settings of ``--trace-config`` (Triton's trace extension).
    :ivar trace_otel: ``--trace-config opentelemetry,<key>=<value>`` options.
    :ivar metrics_interval_ms: how often the CPU and GPU metrics are sampled (``--metrics-interval-ms``).
    :ivar metrics_config: ``--metrics-config <key>=<value>`` settings (``summary_latencies``, ...).
    :ivar cpu_metrics / gpu_metrics: ``--allow-cpu-metrics`` / ``--allow-gpu-metrics``.
    :ivar server_id: the server's name in server metadata (``--id``; Triton's default is ``triton``).
    :ivar model_load_retries: how many times a failed model load is tried again (``--model-load-retry-count``).
    :ivar model_config_name: load ``<model>/configs/<name>.pbtxt`` instead of ``config.pbtxt`` where it
        exists (``--model-config-name``; "": always ``config.pbtxt``).
    """

    model_repositories: list[str] = field(default_factory=list)
    backend_directory: str = field(default_factory=default_backend_directory)
    backend_config: dict[str, dict[str, str]] = field(default_factory=dict)
    auto_complete: bool = True
    exit_on_error: bool = True
    strict_readiness: bool = True
    log_verbose: int = 0
    exit_timeout_s: float = 30.0
    model_load_threads: int = 4
    arena_dir: str | None = None
    reply_poll_us: int = field(default_factory=default_reply_poll_us)
    python: str = sys.executable
    http: bool = True
    http_address: str = "0.0.0.0"
    http_port: int = 8000
    grpc: bool = True
    grpc_address: str = "0.0.0.0"
    grpc_port: int = 8001
    metrics: bool = True
    metrics_address: str = "0.0.0.0"
    metrics_port: int = 8002
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    model_control_mode: str = "none"
    startup_models: list[str] = field(default_factory=list)
    repository_poll_s: float = 15.0
    allow_file_override: bool = False
    model_cache_dir: str | None = None
    http_restricted_api: dict[str, tuple[str, str]] = field(default_factory=dict)
    grpc_restricted_protocol: dict[str, tuple[str, str]] = field(default_factory=dict)
    cache_config: dict[str, dict[str, str]] = field(default_factory=dict)
    composition: Composition = Composition(None, ())
    frontend_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    rate_limit: str = "off"
    rate_limit_resources: list[tuple[str, int, int | None]] = field(default_factory=list)
    network: NetworkSettings = field(default_factory=NetworkSettings)
    ping_interval_s: float = 5.0
    ping_timeout_s: float = 10.0
    trace: TraceSettings = field(default_factory=TraceSettings)
    trace_otel: dict[str, str] = field(default_factory=dict)
    metrics_interval_ms: int = 2000
    metrics_config: dict[str, str] = field(default_factory=dict)
    cpu_metrics: bool = True
    gpu_metrics: bool = True
    server_id: str = "tritium"
    model_load_retries: int = 0
    model_config_name: str = ""
