"""``tritium-server``: the command line, with ``tritonserver``'s flag names.

Every flag of ``tritonserver`` that tritium implements is accepted with the
same name and value syntax (``--http-port=8000``, ``--allow-grpc=false``,
``--backend-config=onnxruntime,default-max-batch-size=8``). A ``tritonserver``
flag for a feature tritium does not have yet is refused with a clear error,
never ignored; an unknown flag is an error too.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__
from .cli_cloud import add_cloud_flags, cloud_settings, default_model_repositories
from .cli_network import add_network_flags, network_settings
from .cli_triton import add_triton_flags, non_negative, triton_notes
from .core.settings.network import DEFAULT_MAX_REQUEST_BYTES

log = logging.getLogger("tritium.server")

__all__ = ["main", "parse_args", "build_parser"]

_TRUE = {"true", "1", "on", "yes"}
_FALSE = {"false", "0", "off", "no"}

# refused tritonserver flags whose feature tritium has under another flag: what to use instead
INSTEAD = {
    "--cache-directory": "tritium's caches (local, redis) are built in and chosen with --cache-config",
}

# tritonserver flags of features tritium does not implement yet: refused, never ignored.
NOT_YET = {
    "--http-header-forward-pattern": "header forwarding",
    "--grpc-header-forward-pattern": "header forwarding",
    "--grpc-max-connection-age": "gRPC connection ages",
    "--grpc-max-connection-age-grace": "gRPC connection ages",
    "--sagemaker-thread-count": "SageMaker thread counts",
    "--vertex-ai-thread-count": "Vertex AI thread counts",
    "--model-load-gpu-limit": "GPU memory limits on model loads",
    "--cache-directory": "cache libraries",
    "--repoagent-directory": "repository agents",
    "--host-policy": "host policies",
    "--min-supported-compute-capability": "GPU compute-capability filtering",
}


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value '{text}' (expected true or false)")


def _port(text: str) -> int:
    """A TCP port number, 0-65535 (Triton 2.51 takes any integer and binds it modulo 65536)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port '{text}' (expected a number from 0 to 65535)") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {value} (expected a number from 0 to 65535)")
    return value


def _cache_config(text: str) -> tuple[str, dict[str, str]]:
    from .core.cache import parse_cache_setting

    try:
        return parse_cache_setting(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _backend_config(text: str) -> tuple[str, str, str]:
    head, sep, setting = text.partition(",")
    if not sep:
        backend, setting = "", head
    else:
        backend = head
    key, eq, value = setting.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(
            f"--backend-config option format is '<backend name>,<setting>=<value>'. Got {text}"
        )
    if key == "worker-isolation":  # tritium's own setting: checked now rather than at each model's load
        from tritium.core.worker.placement import ISOLATION_MODES, PYTHON_BACKEND

        if value not in ISOLATION_MODES:
            raise argparse.ArgumentTypeError(
                f"--backend-config {text}: worker-isolation must be one of {', '.join(ISOLATION_MODES)}"
            )
        if backend == PYTHON_BACKEND and value != "instance":
            raise argparse.ArgumentTypeError(
                f"--backend-config {text}: python models run in a worker process per instance, as in Triton"
            )
    return backend, key, value


#: API groups Triton's restricted-API options accept
RESTRICTABLE = (
    "health",
    "metadata",
    "inference",
    "shared-memory",
    "model-config",
    "model-repository",
    "statistics",
    "trace",
    "logging",
)


def _restricted(text: str) -> tuple[list[str], str, str]:
    """``<api-list>:<header>=<value>`` -> (apis, header, value)."""
    apis, colon, rest = text.rpartition(":")
    key, eq, value = rest.partition("=")
    if not colon or not eq or not key or not apis:
        raise argparse.ArgumentTypeError(
            f"restricted api option format is '<API_1>,<API_2>,...:<restricted-key>=<restricted-value>'. Got {text}"
        )
    names = [a.strip() for a in apis.split(",")]
    for name in names:
        if name not in RESTRICTABLE:
            raise argparse.ArgumentTypeError(
                f"unknown restricted api '{name}' in '{text}' (known: {', '.join(RESTRICTABLE)})"
            )
    return names, key, value


def _restrictions(parser: argparse.ArgumentParser, flag: str, items: list[tuple[list[str], str, str]]):  # type: ignore[no-untyped-def]
    out: dict[str, tuple[str, str]] = {}
    for apis, key, value in items:
        for api in apis:
            if api in out:
                parser.error(f"{flag}: api '{api}' can only be restricted once")
            out[api] = (key, value)
    return out


def _metrics_config(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"--metrics-config option format is '<setting>=<value>'. Got {text}")
    return key, value


def _rate_limit_resource(text: str) -> tuple[str, int, int | None]:
    from .core.scheduler.rate_limiter import parse_resource_flag

    try:
        return parse_resource_flag(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Show a flag's default, except when it has none worth printing or its help says it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, [], False) or action.help is argparse.SUPPRESS or "(default" in text:
            return text
        return super()._get_help_string(action) or ""


class _Parser(argparse.ArgumentParser):
    """Refusals on one line, then a one-line pointer to ``--help`` (no usage block)."""

    def error(self, message: str) -> Any:  # argparse's hook: print and exit 2
        if message.startswith(_UNRECOGNIZED):
            known = [
                o for o, a in self._option_string_actions.items() if o.startswith("--") and not isinstance(a, _NotYet)
            ]
            message += _suggestions(message[len(_UNRECOGNIZED) :].split(), known)
        self.exit(2, f"{self.prog}: error: {message}\nRun '{self.prog} --help' for the flags.\n")


_UNRECOGNIZED = "unrecognized arguments: "


def _suggestions(words: list[str], known: list[str]) -> str:
    """`` (did you mean --x?)`` for each unknown ``--flag`` in ``words`` close to a ``known`` one, or ``""``."""
    found = []
    for word in words:
        flag = word.split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.8) if flag.startswith("--") else []
        if close:
            found.append((flag, close[0]))
    if not found:
        return ""
    if len(found) == 1:
        return f" (did you mean {found[0][1]}?)"
    return " (did you mean " + ", ".join(f"{right} for {wrong}" for wrong, right in found) + "?)"


class _NotYet(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs["nargs"] = "?"
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: str | None = None) -> None:
        if option in INSTEAD:
            parser.error(f"{option} is not supported: {INSTEAD[option]}")
        parser.error(f"{option} is a tritonserver flag for {NOT_YET[option or '']}, which tritium does not support yet")


class _Version(argparse.Action):
    """``--version``: the tritium version, then the backends and endpoints this server has."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: str | None = None) -> None:
        from .core.errors import TritonError
        from .core.settings.composition import describe, read_composition
        from .core.settings.options import default_backend_directory
        from .core.settings.plugins import default_plugins_file, load_plugin_settings

        try:
            composition = read_composition(load_plugin_settings(), default_plugins_file().parent)
            directory = composition.backend_directory or default_backend_directory()
            text = f"tritium {__version__}\n{describe(composition, directory)}\n"
        except TritonError as exc:
            parser.exit(1, f"tritium {__version__}\nerror: {exc.message}\n")
        sys.stdout.write(text)
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (tritonserver's flag names)."""
    p = _Parser(
        prog="tritium-server",
        description="tritium: a Triton-compatible inference server. Flags follow tritonserver's.",
        allow_abbrev=False,
        formatter_class=_HelpFormatter,
    )
    p.add_argument(
        "--version", action=_Version, help="print the version and the backends and endpoints of this server, then exit"
    )
    p.add_argument(
        "--model-repository",
        "--model-store",
        dest="model_repository",
        action="append",
        default=[],
        metavar="PATH",
        help="model repository folder (repeatable)",
    )
    p.add_argument(
        "--backend-directory",
        metavar="PATH",
        help="global backend directory (default: the backends/ folder of this installation)",
    )
    p.add_argument(
        "--backend-config",
        action="append",
        type=_backend_config,
        default=[],
        metavar="<backend>,<setting>=<value>",
        help="a setting given to a backend (repeatable)",
    )
    p.add_argument(
        "--rate-limit",
        type=str.lower,
        choices=["off", "execution_count"],
        default="off",
        help="rate limiter mode: 'execution_count' applies the instance groups' rate_limiter sections",
    )
    p.add_argument(
        "--rate-limit-resource",
        action="append",
        type=_rate_limit_resource,
        default=[],
        metavar="<name>:<count>[:<device>]",
        help="count of a rate-limiter resource (repeatable)",
    )
    p.add_argument(
        "--disable-auto-complete-config",
        action="store_true",
        help="backends do not complete model configs (a model then needs a full config.pbtxt)",
    )
    p.add_argument("--strict-model-config", type=_bool, metavar="BOOL", help="true = --disable-auto-complete-config")
    p.add_argument(
        "--strict-readiness",
        type=_bool,
        default=True,
        metavar="BOOL",
        help="ready only while every loaded model is ready",
    )
    p.add_argument(
        "--exit-on-error",
        type=_bool,
        default=True,
        metavar="BOOL",
        help="exit when a model fails to load at start-up",
    )
    p.add_argument(
        "--exit-timeout-secs",
        type=int,
        default=30,
        metavar="SECONDS",
        help="how long shutdown waits for in-flight requests",
    )
    p.add_argument(
        "--model-control-mode",
        choices=["none", "poll", "explicit"],
        default="none",
        help="none: load every model at start-up; poll: also follow repository changes; "
        "explicit: load and unload on request",
    )
    p.add_argument(
        "--load-model",
        action="append",
        default=[],
        metavar="NAME",
        help="explicit mode: a model to load at start-up (repeatable; '*' = every model)",
    )
    p.add_argument(
        "--repository-poll-secs",
        type=int,
        default=15,
        metavar="SECONDS",
        help="poll mode: seconds between repository polls (0: never)",
    )
    p.add_argument(
        "--model-load-allow-file-override",
        type=_bool,
        default=False,
        metavar="BOOL",
        help="tritium: accept 'file:' model files in load requests (runs uploaded code; off by default)",
    )
    p.add_argument(
        "--model-cache-directory",
        metavar="PATH",
        help="tritium: folder for downloads of remote repositories and 'file:' uploads",
    )
    p.add_argument(
        "--http-restricted-api",
        action="append",
        type=_restricted,
        default=[],
        metavar="<api-list>:<header>=<value>",
        help="APIs that need the header (repeatable)",
    )
    p.add_argument(
        "--grpc-restricted-protocol",
        action="append",
        type=_restricted,
        default=[],
        metavar="<protocol-list>:<header>=<value>",
        help="gRPC protocols that need the header (repeatable)",
    )
    p.add_argument("--model-load-thread-count", type=int, default=4, metavar="N", help="models loaded at once")
    p.add_argument("--log-verbose", type=int, default=0, metavar="LEVEL", help="> 0 logs verbose (debug) lines")
    p.add_argument("--log-info", type=_bool, default=True, metavar="BOOL", help="log information lines")
    p.add_argument("--log-warning", type=_bool, default=True, metavar="BOOL", help="log warnings")
    p.add_argument("--log-error", type=_bool, default=True, metavar="BOOL", help="log errors")
    p.add_argument("--log-file", default="", metavar="PATH", help="write the log to this file instead of stderr")
    p.add_argument(
        "--log-format",
        choices=["default", "ISO8601", "json"],
        default=None,
        metavar="FORMAT",
        help="log line format: default (Triton's glog lines), ISO8601, or json (tritium's: one object a line)",
    )
    p.add_argument(
        "--trace-config",
        action="append",
        default=[],
        metavar="[<mode>,]<setting>=<value>",
        help="trace setting (repeatable): level=TIMESTAMPS, rate=N, count=N, log_frequency=N, "
        "mode=triton|opentelemetry, triton,file=PATH, opentelemetry,url=URL",
    )
    p.add_argument("--trace-file", metavar="PATH", help="deprecated form of --trace-config triton,file=PATH")
    p.add_argument(
        "--trace-level",
        action="append",
        default=[],
        metavar="LEVEL",
        help="deprecated form of --trace-config level=LEVEL",
    )
    p.add_argument("--trace-rate", metavar="N", help="deprecated form of --trace-config rate=N")
    p.add_argument("--trace-count", metavar="N", help="deprecated form of --trace-config count=N")
    p.add_argument("--trace-log-frequency", metavar="N", help="deprecated form of --trace-config log_frequency=N")
    p.add_argument("--allow-cpu-metrics", type=_bool, default=True, metavar="BOOL", help="report CPU metrics")
    p.add_argument("--allow-gpu-metrics", type=_bool, default=True, metavar="BOOL", help="report GPU metrics (NVML)")
    p.add_argument(
        "--metrics-interval-ms",
        type=int,
        default=2000,
        metavar="MS",
        help="how often the CPU and GPU metrics are sampled, milliseconds",
    )
    p.add_argument(
        "--metrics-config",
        action="append",
        type=_metrics_config,
        default=[],
        metavar="<setting>=<value>",
        help="metrics setting (repeatable): summary_latencies=true, summary_quantiles=0.5:0.05,0.9:0.01, "
        "histogram_latencies=true",
    )
    for proto, port, what in (
        ("http", 8000, "the HTTP/REST endpoint"),
        ("grpc", 8001, "the gRPC endpoint"),
        ("metrics", 8002, "the Prometheus metrics endpoint"),
    ):
        p.add_argument(f"--allow-{proto}", type=_bool, default=True, metavar="BOOL", help=f"serve {what}")
        p.add_argument(f"--{proto}-port", type=_port, default=port, metavar="PORT", help=f"port of {what}")
        p.add_argument(f"--{proto}-address", default="0.0.0.0", metavar="ADDRESS", help=f"address {what} binds")
    p.add_argument(
        "--openai-port",
        type=_port,
        metavar="PORT",
        help="tritium: serve the OpenAI-compatible endpoint (the 'openai' plugin) on this port (default: "
        "off, or as plugins.toml says)",
    )
    p.add_argument(
        "--openai-address",
        metavar="ADDRESS",
        help="tritium: address the OpenAI-compatible endpoint binds (enables it too; default port 9000)",
    )
    p.add_argument(
        "--cache-config",
        action="append",
        type=_cache_config,
        default=[],
        metavar="<cache>,<setting>=<value>",
        help="the response cache: local,size=<bytes> or redis,host=<host>,port=<port> (repeatable)",
    )
    p.add_argument(
        "--max-request-bytes",
        type=int,
        default=DEFAULT_MAX_REQUEST_BYTES,
        metavar="BYTES",
        help="tritium: the largest request body accepted over HTTP and gRPC (default 512 MiB)",
    )
    add_cloud_flags(p, _bool, _port)
    add_network_flags(p, _bool)
    add_triton_flags(p)
    p.add_argument(
        "--arena-dir",
        metavar="PATH",
        help="tritium: place shared-memory arena segments in this folder (file-backed) instead of memory",
    )
    p.add_argument(
        "--reply-poll-us",
        type=non_negative("reply poll window"),
        metavar="MICROSECONDS",
        help="tritium: while a single batch is in flight in the server, the core polls its worker for the reply this "
        "long before sleeping (faster small requests at low concurrency, at the cost of core CPU; 0: never; "
        "default 300 where the server may use two CPUs or more, by affinity and cgroup CPU limit, else 0)",
    )
    for flag in NOT_YET:
        p.add_argument(flag, action=_NotYet, help=argparse.SUPPRESS)
    return p


def parse_args(argv: Sequence[str] | None = None):  # type: ignore[no-untyped-def]
    """Parse the command line into :class:`~tritium.core.settings.options.ServerOptions`.

    Exits with status 2 and a message for unknown flags, bad values and
    flags of features not built yet.
    """
    from .core.settings.options import ServerOptions, default_reply_poll_us

    parser = build_parser()
    args = parser.parse_args(argv)
    args.model_repository = args.model_repository or default_model_repositories()
    if not args.model_repository:
        parser.error("--model-repository must be specified")
    if "*" in args.load_model and len(args.load_model) > 1:
        parser.error("Wildcard model name '*' must be the ONLY startup model if specified at all.")
    if args.load_model and args.model_control_mode != "explicit":
        log.warning("--load-model is used only in model control mode 'explicit'")
    if args.repository_poll_secs < 0:
        parser.error("--repository-poll-secs must be >= 0")
    if args.model_load_thread_count < 1:
        parser.error("--model-load-thread-count must be >= 1")
    auto_complete = not args.disable_auto_complete_config
    if args.strict_model_config is not None:
        auto_complete = auto_complete and not args.strict_model_config
    backend_config: dict[str, dict[str, str]] = {}
    for backend, key, value in args.backend_config:
        backend_config.setdefault(backend, {})[key] = value
    cache_config: dict[str, dict[str, str]] = {}
    for cache, settings in args.cache_config:
        cache_config.setdefault(cache, {}).update(settings)
    from .core.tracing import parse_trace_config

    trace_items = list(args.trace_config)
    if args.trace_file:
        trace_items.append(f"triton,file={args.trace_file}")
    trace_items += [f"level={level}" for level in args.trace_level]
    if args.trace_rate is not None:
        trace_items.append(f"rate={args.trace_rate}")
    if args.trace_count is not None:
        trace_items.append(f"count={args.trace_count}")
    if args.trace_log_frequency is not None:
        trace_items.append(f"log_frequency={args.trace_log_frequency}")
    try:
        trace, trace_otel = parse_trace_config(trace_items)
    except ValueError as exc:
        parser.error(str(exc))
    if args.metrics_interval_ms < 1:
        parser.error("--metrics-interval-ms must be >= 1")
    from .core.observability.stats import parse_metrics_config

    try:
        parse_metrics_config(dict(args.metrics_config))
    except ValueError as exc:
        parser.error(str(exc))
    options = ServerOptions(
        trace=trace,
        trace_otel=trace_otel,
        metrics_interval_ms=args.metrics_interval_ms,
        metrics_config=dict(args.metrics_config),
        cpu_metrics=args.allow_cpu_metrics,
        gpu_metrics=args.allow_gpu_metrics,
        cache_config=cache_config,
        model_repositories=list(args.model_repository),
        backend_config=backend_config,
        auto_complete=auto_complete,
        exit_on_error=args.exit_on_error,
        strict_readiness=args.strict_readiness,
        log_verbose=args.log_verbose,
        exit_timeout_s=float(args.exit_timeout_secs),
        model_load_threads=args.model_load_thread_count,
        arena_dir=args.arena_dir,
        reply_poll_us=default_reply_poll_us() if args.reply_poll_us is None else args.reply_poll_us,
        max_request_bytes=args.max_request_bytes,
        model_control_mode=args.model_control_mode,
        startup_models=list(args.load_model),
        repository_poll_s=float(args.repository_poll_secs),
        allow_file_override=args.model_load_allow_file_override,
        model_cache_dir=os.path.abspath(args.model_cache_directory) if args.model_cache_directory else None,
        http_restricted_api=_restrictions(parser, "--http-restricted-api", args.http_restricted_api),
        grpc_restricted_protocol=_restrictions(parser, "--grpc-restricted-protocol", args.grpc_restricted_protocol),
        http=args.allow_http,
        http_address=args.http_address,
        http_port=args.http_port,
        grpc=args.allow_grpc,
        grpc_address=args.grpc_address,
        grpc_port=args.grpc_port,
        metrics=args.allow_metrics,
        metrics_address=args.metrics_address,
        metrics_port=args.metrics_port,
        rate_limit=args.rate_limit,
        rate_limit_resources=list(args.rate_limit_resource),
        network=network_settings(parser, args),
        ping_interval_s=float(args.worker_ping_interval_secs),
        ping_timeout_s=float(args.worker_ping_timeout_secs),
        server_id=args.server_id,
        model_load_retries=args.model_load_retry_count,
        model_config_name=args.model_config_name,
    )
    openai = {"port": args.openai_port, "address": args.openai_address}
    if any(v is not None for v in openai.values()):
        options.frontend_settings["openai"] = {"enabled": True, **{k: v for k, v in openai.items() if v is not None}}
    options.frontend_settings.update(cloud_settings(parser, args, _port))
    if args.backend_directory:  # absolute: workers run in their model's folder
        options.backend_directory = os.path.abspath(args.backend_directory)
    return options, args


async def _serve(options: Any) -> int:
    from .core.errors import TritonError
    from .core.server import InferenceServer

    try:
        server = InferenceServer(options)
    except TritonError as exc:
        log.error("error: creating server: %s - %s", exc.code.text, exc.message)
        return 1
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
    except TritonError as exc:
        log.error("error: creating server: %s - %s", exc.code.text, exc.message)
        return 1
    except OSError as exc:
        log.error("error: creating server: %s", exc)
        await server.stop()
        return 1
    await stop.wait()
    log.info("shutting down")
    await server.stop()
    return 0


def install_logging(args: Any) -> None:
    """Set up tritium's log as ``tritium-server`` does, from the parsed ``--log-*`` flags (:func:`parse_args`).

    :raises TritonError: INVALID_ARG for a log file that cannot be opened.
    """
    from .core.observability.logging import LogManager

    LogManager.from_args(args).install()


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``tritium-server`` and ``python -m tritium``."""
    # Workers are started (fork + exec) while the gRPC endpoint serves (live reload, restarts).
    # gRPC's own fork handlers then run in the child and can abort it ("Check failed:
    # next_worker->state == KICKED"); the child execs at once and needs none of gRPC's state.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    from .core.errors import TritonError

    options, args = parse_args(argv)
    try:
        install_logging(args)
    except TritonError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        sys.exit(1)
    for note in triton_notes(args):
        log.info(note)
    try:
        import uvloop  # noqa: F401  (optional: a faster event loop)

        runner = uvloop.run  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        runner = asyncio.run
    sys.exit(runner(_serve(options)))
