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
import logging
import signal
import sys
from typing import Any, Sequence

from . import __version__

log = logging.getLogger("tritium.server")

__all__ = ["main", "parse_args", "build_parser"]

_TRUE = {"true", "1", "on", "yes"}
_FALSE = {"false", "0", "off", "no"}

# tritonserver flags of features tritium does not implement yet: refused, never ignored.
NOT_YET = {
    "--repository-poll-secs": "model control mode 'poll'",
    "--load-model": "model control mode 'explicit'",
    "--model-load-retry-count": "model load retries",
    "--model-namespacing": "model namespacing",
    "--http-restricted-api": "restricted APIs",
    "--grpc-restricted-protocol": "restricted APIs",
    "--http-header-forward-pattern": "header forwarding",
    "--grpc-header-forward-pattern": "header forwarding",
    "--grpc-use-ssl": "gRPC over TLS",
    "--grpc-use-ssl-mutual": "gRPC over TLS",
    "--grpc-server-cert": "gRPC over TLS",
    "--grpc-server-key": "gRPC over TLS",
    "--grpc-root-cert": "gRPC over TLS",
    "--grpc-infer-allocation-pool-size": "gRPC allocation pools",
    "--grpc-keepalive-time": "gRPC keepalive settings",
    "--grpc-keepalive-timeout": "gRPC keepalive settings",
    "--allow-sagemaker": "the SageMaker endpoint",
    "--sagemaker-port": "the SageMaker endpoint",
    "--allow-vertex-ai": "the Vertex AI endpoint",
    "--vertex-ai-port": "the Vertex AI endpoint",
    "--trace-config": "request tracing",
    "--trace-file": "request tracing",
    "--trace-level": "request tracing",
    "--trace-rate": "request tracing",
    "--cache-config": "the response cache",
    "--cache-directory": "the response cache",
    "--response-cache-byte-size": "the response cache",
    "--repoagent-directory": "repository agents",
    "--host-policy": "host policies",
    "--pinned-memory-pool-byte-size": "pinned memory pools",
    "--cuda-memory-pool-byte-size": "CUDA memory pools",
    "--cuda-virtual-address-size": "CUDA memory pools",
    "--min-supported-compute-capability": "GPU compute-capability filtering",
    "--buffer-manager-thread-count": "buffer manager threads",
    "--metrics-config": "metrics configuration",
    "--metrics-interval-ms": "metrics configuration",
    "--allow-gpu-metrics": "GPU metrics",
    "--allow-cpu-metrics": "CPU metrics",
    "--log-file": "log files",
    "--log-format": "log formats",
    "--http-thread-count": "HTTP thread counts",
    "--id": "server ids",
}


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value '{text}' (expected true or false)")


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
    return backend, key, value


def _rate_limit_resource(text: str) -> tuple[str, int, int | None]:
    from .core.scheduler.rate_limiter import parse_resource_flag

    try:
        return parse_resource_flag(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Show a flag's default, except when it has none worth printing."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default in (None, [], False) or action.help is argparse.SUPPRESS:
            return action.help or ""
        return super()._get_help_string(action) or ""


class _NotYet(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs["nargs"] = "?"
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: str | None = None) -> None:
        parser.error(f"{option} is a tritonserver flag for {NOT_YET[option or '']}, which tritium does not support yet")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (tritonserver's flag names)."""
    p = argparse.ArgumentParser(
        prog="tritium-server",
        description="tritium: a Triton-compatible inference server. Flags follow tritonserver's.",
        allow_abbrev=False,
        formatter_class=_HelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"tritium {__version__}")
    p.add_argument(
        "--model-repository", "--model-store", dest="model_repository", action="append", default=[],
        metavar="PATH", help="model repository folder (repeatable)",
    )
    p.add_argument(
        "--backend-directory", metavar="PATH",
        help="global backend directory (default: the backends/ folder of this installation)",
    )
    p.add_argument(
        "--backend-config", action="append", type=_backend_config, default=[],
        metavar="<backend>,<setting>=<value>", help="a setting given to a backend (repeatable)",
    )
    p.add_argument(
        "--rate-limit", type=str.lower, choices=["off", "execution_count"], default="off",
        help="rate limiter mode: 'execution_count' applies the instance groups' rate_limiter sections",
    )
    p.add_argument(
        "--rate-limit-resource", action="append", type=_rate_limit_resource, default=[],
        metavar="<name>:<count>[:<device>]", help="count of a rate-limiter resource (repeatable)",
    )
    p.add_argument(
        "--disable-auto-complete-config", action="store_true",
        help="backends do not complete model configs (a model then needs a full config.pbtxt)",
    )
    p.add_argument("--strict-model-config", type=_bool, metavar="BOOL", help="true = --disable-auto-complete-config")
    p.add_argument(
        "--strict-readiness", type=_bool, default=True, metavar="BOOL",
        help="ready only while every loaded model is ready",
    )
    p.add_argument(
        "--exit-on-error", type=_bool, default=True, metavar="BOOL",
        help="exit when a model fails to load at start-up",
    )
    p.add_argument(
        "--exit-timeout-secs", type=int, default=30, metavar="SECONDS",
        help="how long shutdown waits for in-flight requests",
    )
    p.add_argument(
        "--model-control-mode", choices=["none", "poll", "explicit"], default="none",
        help="only 'none' is supported in this release",
    )
    p.add_argument("--model-load-thread-count", type=int, default=4, metavar="N", help="models loaded at once")
    p.add_argument("--log-verbose", type=int, default=0, metavar="LEVEL", help="> 0 logs verbose (debug) lines")
    p.add_argument("--log-info", type=_bool, default=True, metavar="BOOL", help="log information lines")
    p.add_argument("--log-warning", type=_bool, default=True, metavar="BOOL", help="log warnings")
    p.add_argument("--log-error", type=_bool, default=True, metavar="BOOL", help="log errors")
    for proto, port, what in (("http", 8000, "the HTTP/REST endpoint"), ("grpc", 8001, "the gRPC endpoint"),
                              ("metrics", 8002, "the Prometheus metrics endpoint")):
        p.add_argument(f"--allow-{proto}", type=_bool, default=True, metavar="BOOL", help=f"serve {what}")
        p.add_argument(f"--{proto}-port", type=int, default=port, metavar="PORT", help=f"port of {what}")
        p.add_argument(f"--{proto}-address", default="0.0.0.0", metavar="ADDRESS", help=f"address {what} binds")
    p.add_argument(
        "--max-request-bytes", type=int, default=1 << 31, metavar="BYTES",
        help="tritium: the largest request body accepted over HTTP and gRPC (default 2 GiB)",
    )
    p.add_argument(
        "--arena-dir", metavar="PATH",
        help="tritium: place shared-memory arena segments in this folder (file-backed) instead of memory",
    )
    for flag in NOT_YET:
        p.add_argument(flag, action=_NotYet, help=argparse.SUPPRESS)
    return p


def parse_args(argv: Sequence[str] | None = None):  # type: ignore[no-untyped-def]
    """Parse the command line into :class:`~tritium.core.options.ServerOptions`.

    Exits with status 2 and a message for unknown flags, bad values and
    flags of features not built yet.
    """
    from .core.options import ServerOptions

    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.model_repository:
        parser.error("--model-repository must be specified")
    if args.model_control_mode != "none":
        parser.error(
            f"--model-control-mode={args.model_control_mode} is not supported yet; "
            "this release loads every model at start-up (mode 'none')"
        )
    auto_complete = not args.disable_auto_complete_config
    if args.strict_model_config is not None:
        auto_complete = auto_complete and not args.strict_model_config
    backend_config: dict[str, dict[str, str]] = {}
    for backend, key, value in args.backend_config:
        backend_config.setdefault(backend, {})[key] = value
    options = ServerOptions(
        model_repositories=list(args.model_repository),
        backend_config=backend_config,
        auto_complete=auto_complete,
        exit_on_error=args.exit_on_error,
        strict_readiness=args.strict_readiness,
        log_verbose=args.log_verbose,
        exit_timeout_s=float(args.exit_timeout_secs),
        model_load_threads=args.model_load_thread_count,
        arena_dir=args.arena_dir,
        max_request_bytes=args.max_request_bytes,
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
    )
    if args.backend_directory:
        options.backend_directory = args.backend_directory
    return options, args


async def _serve(options: Any) -> int:
    from .core.errors import TritonError
    from .core.server import InferenceServer

    server = InferenceServer(options)
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


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``tritium-server`` and ``python -m tritium``."""
    from .core.logging import configure_logging

    options, args = parse_args(argv)
    configure_logging(options.log_verbose)
    level = logging.INFO if args.log_info else (logging.WARNING if args.log_warning else logging.ERROR)
    if options.log_verbose > 0:
        level = logging.DEBUG
    logging.getLogger("tritium").setLevel(level)
    try:
        import uvloop  # noqa: F401  (optional: a faster event loop)

        runner = uvloop.run  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        runner = asyncio.run
    sys.exit(runner(_serve(options)))
