"""``tritium-server``'s flags for limits, timeouts, worker health checks, gRPC keepalive and TLS (:class:`~tritium.core.settings.network.NetworkSettings`).

The gRPC flags are Triton's (same names, units and defaults: keepalive in
milliseconds, ``--grpc-use-ssl`` and its certificate flags); the HTTP ones
are tritium's (Triton's HTTP endpoint has neither timeouts nor TLS).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from .core.settings.network import (
    DEFAULT_HTTP_MAX_CONNECTIONS,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_JSON_BYTES,
    NetworkSettings,
    TlsFiles,
)

__all__ = ["add_network_flags", "network_settings"]

# Triton's flag -> (gRPC channel argument, default)
_GRPC_KEEPALIVE = {
    "--grpc-keepalive-time": ("grpc.keepalive_time_ms", 7_200_000),
    "--grpc-keepalive-timeout": ("grpc.keepalive_timeout_ms", 20_000),
    "--grpc-http2-max-pings-without-data": ("grpc.http2.max_pings_without_data", 2),
    "--grpc-http2-min-recv-ping-interval-without-data": ("grpc.http2.min_ping_interval_without_data_ms", 300_000),
    "--grpc-http2-max-ping-strikes": ("grpc.http2.max_ping_strikes", 2),
}


def add_network_flags(p: argparse.ArgumentParser, to_bool: Callable[[str], bool]) -> None:
    """Add the flags to ``p`` (``to_bool`` reads Triton's boolean values)."""
    p.add_argument(
        "--max-inflight-request-bytes",
        type=int,
        default=0,
        metavar="BYTES",
        help=(
            "tritium: bytes of request bodies held at once, HTTP and gRPC together; more get HTTP 503 / "
            "gRPC UNAVAILABLE (default 4 x --max-request-bytes)"
        ),
    )
    p.add_argument(
        "--max-json-request-bytes",
        type=int,
        default=DEFAULT_MAX_JSON_BYTES,
        metavar="BYTES",
        help="tritium: the largest JSON part of an HTTP inference request (413 past it) and the largest part of a "
        "gRPC ModelInferRequest besides its raw_input_contents (RESOURCE_EXHAUSTED) (default 32 MiB)",
    )
    p.add_argument(
        "--max-decompressed-request-bytes",
        type=int,
        default=DEFAULT_MAX_DECOMPRESSED_BYTES,
        metavar="BYTES",
        help="tritium: the most a compressed (gzip, deflate) HTTP request body may inflate to; 413 past it "
        "(default 64 MiB, never above --max-request-bytes)",
    )
    p.add_argument(
        "--http-max-connections",
        type=int,
        default=DEFAULT_HTTP_MAX_CONNECTIONS,
        metavar="N",
        help="tritium: the most HTTP connections open at once; one more is answered 503 and closed (default 10000)",
    )
    for flag, default, what in (
        ("--http-header-timeout-secs", 30.0, "a request head must be complete this long after its first byte"),
        ("--http-body-timeout-secs", 60.0, "a request body or an unread response may stall this long"),
        ("--http-idle-timeout-secs", 300.0, "a keep-alive connection may wait this long for its next request"),
    ):
        p.add_argument(
            flag, type=float, default=default, metavar="SECONDS", help=f"tritium: {what} (default {default:g})"
        )
    for flag, (_arg, default) in _GRPC_KEEPALIVE.items():
        p.add_argument(
            flag, type=int, default=default, metavar="INT", help=f"gRPC channel argument (default {default})"
        )
    p.add_argument(
        "--grpc-keepalive-permit-without-calls",
        type=to_bool,
        default=False,
        metavar="BOOL",
        help="allow keepalive pings on connections without calls (default false)",
    )
    p.add_argument(
        "--grpc-max-connection-idle-secs",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="tritium: a gRPC connection with no call for this long is closed with GOAWAY (0 = never)",
    )
    p.add_argument(
        "--worker-ping-interval-secs",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="tritium: how often each worker process is health-checked, idle or executing (default 5)",
    )
    p.add_argument(
        "--worker-ping-timeout-secs",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="tritium: a worker that does not answer a health check this long is killed and restarted (default 10)",
    )
    for endpoint in ("grpc", "http"):
        extra = "" if endpoint == "grpc" else "tritium: "
        p.add_argument(
            f"--{endpoint}-use-ssl",
            type=to_bool,
            default=False,
            metavar="BOOL",
            help=f"{extra}serve the {endpoint} endpoint over TLS",
        )
        p.add_argument(
            f"--{endpoint}-use-ssl-mutual",
            type=to_bool,
            default=False,
            metavar="BOOL",
            help=f"{extra}TLS with client certificates (checked against --{endpoint}-root-cert)",
        )
        p.add_argument(
            f"--{endpoint}-server-cert", default=None, metavar="PEM", help="the server's certificate (chain)"
        )
        p.add_argument(f"--{endpoint}-server-key", default=None, metavar="PEM", help="the server's private key")
        p.add_argument(f"--{endpoint}-root-cert", default=None, metavar="PEM", help="the CA of client certificates")


def _tls(parser: argparse.ArgumentParser, args: Any, endpoint: str) -> TlsFiles | None:
    """The endpoint's TLS files (None: plaintext); ``parser.error`` for a missing flag or file."""
    mutual = bool(getattr(args, f"{endpoint}_use_ssl_mutual"))
    if not (mutual or getattr(args, f"{endpoint}_use_ssl")):
        return None
    flags = [f"--{endpoint}-server-cert", f"--{endpoint}-server-key"] + ([f"--{endpoint}-root-cert"] if mutual else [])
    paths = []
    for flag in flags:
        path = getattr(args, flag[2:].replace("-", "_"))
        if not path:
            parser.error(f"--{endpoint}-use-ssl{'-mutual' if mutual else ''} needs {flag}")
        if not os.path.isfile(path):
            parser.error(f"{flag}: no such file: {path}")
        paths.append(path)
    return TlsFiles(paths[0], paths[1], paths[2] if mutual else "", mutual)


def network_settings(parser: argparse.ArgumentParser, args: Any) -> NetworkSettings:
    """The settings the parsed ``args`` give (``parser.error`` for inconsistent ones)."""
    for flag in ("--grpc-max-connection-idle-secs", "--max-inflight-request-bytes"):
        if getattr(args, flag[2:].replace("-", "_")) < 0:
            parser.error(f"{flag} must be >= 0")
    for flag in (
        "--max-json-request-bytes",
        "--max-decompressed-request-bytes",
        "--http-max-connections",
        "--worker-ping-interval-secs",
        "--worker-ping-timeout-secs",
        "--http-header-timeout-secs",
        "--http-body-timeout-secs",
        "--http-idle-timeout-secs",
    ):
        if getattr(args, flag[2:].replace("-", "_")) <= 0:
            parser.error(f"{flag} must be > 0")
    channel = {arg: int(getattr(args, flag[2:].replace("-", "_"))) for flag, (arg, _d) in _GRPC_KEEPALIVE.items()}
    channel["grpc.keepalive_permit_without_calls"] = int(bool(args.grpc_keepalive_permit_without_calls))
    if args.grpc_max_connection_idle_secs > 0:
        channel["grpc.max_connection_idle_ms"] = int(args.grpc_max_connection_idle_secs * 1000)
    return NetworkSettings(
        max_inflight_request_bytes=int(args.max_inflight_request_bytes),
        max_json_request_bytes=int(args.max_json_request_bytes),
        max_decompressed_request_bytes=int(args.max_decompressed_request_bytes),
        http_max_connections=int(args.http_max_connections),
        http_header_timeout_s=float(args.http_header_timeout_secs),
        http_body_timeout_s=float(args.http_body_timeout_secs),
        http_idle_timeout_s=float(args.http_idle_timeout_secs),
        grpc_channel_args=channel,
        grpc_tls=_tls(parser, args, "grpc"),
        http_tls=_tls(parser, args, "http"),
    )
