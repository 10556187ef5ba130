"""``tritium-server``'s flags of the SageMaker and Vertex AI endpoints, and the environment Triton reads for them.

The flags are Triton's (``--allow-sagemaker``, ``--sagemaker-port``,
``--sagemaker-safe-port-range``, ``--allow-vertex-ai``, ``--vertex-ai-port``,
``--vertex-ai-default-model``) plus tritium's ``--sagemaker-address`` and
``--vertex-ai-address`` (Triton binds both endpoints to 0.0.0.0). They become the
``sagemaker`` and ``vertex_ai`` endpoint plugins' settings
(``ServerOptions.frontend_settings``).

As Triton: ``AIP_MODE=PREDICTION`` turns the Vertex AI endpoint on and the HTTP
and gRPC endpoints off by default, ``AIP_HTTP_PORT`` is the default Vertex AI
port, and ``AIP_STORAGE_URI`` the model repository when no
``--model-repository`` is given. As Triton's SageMaker container passes them on:
``SAGEMAKER_BIND_TO_PORT`` is the default SageMaker port and
``SAGEMAKER_SAFE_PORT_RANGE`` the default safe port range. Triton's check that
no two endpoints share an address and port, and that the others keep to the
SageMaker safe port range, is made here.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["add_cloud_flags", "cloud_settings", "default_model_repositories"]

log = logging.getLogger("tritium.server")

DEFAULT_PORT = 8080


def _port_range(text: str) -> tuple[int, int]:
    low, dash, high = text.partition("-")
    try:
        if not dash:
            raise ValueError
        return int(low), int(high)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid port range '{text}' (expected <integer>-<integer>, e.g. 8000-9999)"
        ) from None


def add_cloud_flags(
    p: argparse.ArgumentParser,
    to_bool: Callable[[str], bool],
    to_port: Callable[[str], int],
    env: Mapping[str, str] = os.environ,
) -> None:
    """Add the flags to ``p`` (after the HTTP and gRPC flags, whose defaults ``AIP_MODE`` changes)."""
    prediction = env.get("AIP_MODE") == "PREDICTION"
    p.add_argument(
        "--allow-sagemaker",
        type=to_bool,
        metavar="BOOL",
        help="serve the SageMaker endpoint: /ping, /invocations, /models (default false)",
    )
    p.add_argument(
        "--sagemaker-safe-port-range",
        type=_port_range,
        metavar="<integer>-<integer>",
        help="the ports the other endpoints must use (default $SAGEMAKER_SAFE_PORT_RANGE, else any)",
    )
    p.add_argument(
        "--allow-vertex-ai",
        type=to_bool,
        default=True if prediction else None,
        metavar="BOOL",
        help="serve the Vertex AI endpoint: $AIP_HEALTH_ROUTE and $AIP_PREDICT_ROUTE "
        "(default true when AIP_MODE=PREDICTION, else false)",
    )
    p.add_argument(
        "--vertex-ai-default-model",
        metavar="NAME",
        help="the model the Vertex AI predict route serves (if not given: the repository's only model)",
    )
    for flag, what, variable in (
        ("sagemaker", "the SageMaker endpoint", "SAGEMAKER_BIND_TO_PORT"),
        ("vertex-ai", "the Vertex AI endpoint", "AIP_HTTP_PORT"),
    ):
        p.add_argument(
            f"--{flag}-port", type=to_port, metavar="PORT", help=f"port of {what} (default ${variable}, else 8080)"
        )
        p.add_argument(f"--{flag}-address", metavar="ADDRESS", help=f"tritium: address {what} binds (default 0.0.0.0)")
    if prediction:  # Triton: in a Vertex AI prediction container only the Vertex AI endpoint serves by default
        p.set_defaults(allow_http=False, allow_grpc=False)


def default_model_repositories(env: Mapping[str, str] = os.environ) -> list[str]:
    """The model repository when no ``--model-repository`` is given: ``AIP_STORAGE_URI`` (Triton's), else none."""
    uri = env.get("AIP_STORAGE_URI", "")
    return [uri] if uri else []


def _env_port(parser: argparse.ArgumentParser, to_port: Callable[[str], int], env: Mapping[str, str], name: str) -> int:
    text = env.get(name, "")
    if not text:
        return DEFAULT_PORT
    try:
        return to_port(text)
    except argparse.ArgumentTypeError as exc:
        parser.error(f"{name}: {exc}")
    raise AssertionError  # pragma: no cover (parser.error exits)


def cloud_settings(
    parser: argparse.ArgumentParser,
    args: Any,
    to_port: Callable[[str], int],
    env: Mapping[str, str] = os.environ,
) -> dict[str, dict[str, Any]]:
    """The ``sagemaker`` and ``vertex_ai`` plugin settings the parsed ``args`` give.

    An endpoint whose ``--allow-*`` flag is not given is left as ``plugins.toml`` says
    (off by default); its other flags then do nothing, and a warning says so.
    Exits through ``parser.error`` with Triton's messages when two endpoints share an
    address and port, or one is outside the SageMaker safe port range.
    """
    out: dict[str, dict[str, Any]] = {}
    services: list[tuple[str, str, int]] = []
    if args.allow_http:
        services.append(("HTTP", args.http_address, args.http_port))
    if args.allow_grpc:
        services.append(("GRPC", args.grpc_address, args.grpc_port))
    if args.allow_metrics:
        services.append(("metrics", args.metrics_address, args.metrics_port))
    safe: tuple[int, int] | None = None
    if args.allow_sagemaker is not None:
        port = (
            args.sagemaker_port
            if args.sagemaker_port is not None
            else _env_port(parser, to_port, env, "SAGEMAKER_BIND_TO_PORT")
        )
        address = args.sagemaker_address or "0.0.0.0"
        out["sagemaker"] = {"enabled": args.allow_sagemaker, "port": port, "address": address}
        if args.allow_sagemaker:
            services.append(("SageMaker", address, port))
            safe = args.sagemaker_safe_port_range
            if safe is None and env.get("SAGEMAKER_SAFE_PORT_RANGE"):
                try:
                    safe = _port_range(env["SAGEMAKER_SAFE_PORT_RANGE"])
                except argparse.ArgumentTypeError as exc:
                    parser.error(f"SAGEMAKER_SAFE_PORT_RANGE: {exc}")
    else:
        _unused(args, "--allow-sagemaker", ("sagemaker_port", "sagemaker_safe_port_range", "sagemaker_address"))
    if args.allow_vertex_ai is not None:
        port = (
            args.vertex_ai_port if args.vertex_ai_port is not None else _env_port(parser, to_port, env, "AIP_HTTP_PORT")
        )
        address = args.vertex_ai_address or "0.0.0.0"
        out["vertex_ai"] = {"enabled": args.allow_vertex_ai, "port": port, "address": address}
        if args.vertex_ai_default_model:
            out["vertex_ai"]["default_model"] = args.vertex_ai_default_model
        if args.allow_vertex_ai:
            services.append(("Vertex AI", address, port))
    else:
        _unused(args, "--allow-vertex-ai", ("vertex_ai_port", "vertex_ai_address", "vertex_ai_default_model"))
    _check_ports(parser, services, safe)
    return out


def _unused(args: Any, switch: str, names: tuple[str, ...]) -> None:
    given = ["--" + n.replace("_", "-") for n in names if getattr(args, n) is not None]
    if given:
        log.warning("%s: used only with %s=true", ", ".join(given), switch)


def _check_ports(
    parser: argparse.ArgumentParser, services: list[tuple[str, str, int]], safe: tuple[int, int] | None
) -> None:
    """Triton's ``CheckPortCollision``: distinct ports per address; the SageMaker safe range kept."""
    for i, (name, address, port) in enumerate(services):
        for other, other_address, other_port in services[i + 1 :]:
            if address == other_address and port == other_port and port != 0:
                parser.error(
                    f"The server cannot listen to {name} requests and {other} requests at the same address "
                    f"and port {address}:{port}"
                )
    if safe is None:
        return
    sagemaker_address = next(a for n, a, _p in services if n == "SageMaker")
    for name, address, port in services:
        if name != "SageMaker" and address == sagemaker_address and not safe[0] <= port <= safe[1]:
            parser.error(
                f"The server cannot listen to {name} requests at port {port}, "
                f"allowed port range is [{safe[0]}, {safe[1]}]"
            )
