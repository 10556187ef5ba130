"""``tritonserver``'s server-identity and model-loading flags, and its flags for what tritium does not have.

- ``--id`` (the server's name in server metadata, HTTP and gRPC; Triton's default is
  ``triton``, tritium's stays ``tritium``), ``--model-load-retry-count`` (retries of a
  failed model load) and ``--model-config-name`` (a model's ``configs/<name>.pbtxt``
  in place of ``config.pbtxt``) are honoured as Triton honours them.
- Flags for features tritium lacks (memory pools, thread pools of Triton's C++
  endpoints, SO_REUSEPORT, ...) are accepted with a value that asks for nothing
  (``--pinned-memory-pool-byte-size=0``, ``--cuda-memory-pool-byte-size=0:0``,
  ``--model-namespacing=false``), with one log line each at start-up, so that
  deployment scripts written for Triton run unchanged; any other value is refused at
  start-up with a message naming the flag and what tritium does instead.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["add_triton_flags", "triton_notes", "NOOP_FLAGS"]


@dataclass(frozen=True, slots=True)
class NoopFlag:
    """A ``tritonserver`` flag tritium accepts only with a value that asks for nothing.

    :ivar nothing: whether a value (the flag's text) asks for nothing.
    :ivar lacks: what tritium does not have (the refusal's and the log line's words).
    :ivar accepted: the values accepted, as the refusal names them.
    :ivar repeatable: the flag may be given several times (``--cuda-memory-pool-byte-size`` per GPU).
    """

    nothing: Callable[[str], bool]
    lacks: str
    accepted: str
    repeatable: bool = False


def _int_is(value: int) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            return int(text.strip()) == value
        except ValueError:
            return False

    return check


def _false(text: str) -> bool:
    return text.strip().lower() in {"false", "0", "off", "no"}


def _device_bytes_zero(text: str) -> bool:
    """``<device>:<bytes>`` with 0 bytes (Triton's per-GPU pool syntax)."""
    match = re.fullmatch(r"\s*\d+\s*:\s*(\d+)\s*", text)
    return match is not None and int(match.group(1)) == 0


def _none_level(text: str) -> bool:
    return text.strip().lower() == "none"


def _positive(text: str) -> bool:
    try:
        return int(text.strip()) > 0
    except ValueError:
        return False


def _non_negative(text: str) -> bool:
    try:
        return int(text.strip()) >= 0
    except ValueError:
        return False


#: flag -> when it asks for nothing, and what tritium lacks
NOOP_FLAGS: dict[str, NoopFlag] = {
    "--pinned-memory-pool-byte-size": NoopFlag(_int_is(0), "a pinned host-memory pool", "0"),
    "--cuda-memory-pool-byte-size": NoopFlag(
        _device_bytes_zero, "a CUDA memory pool (the GPU backends allocate device memory themselves)", "<gpu>:0", True
    ),
    "--cuda-virtual-address-size": NoopFlag(
        _device_bytes_zero, "growable CUDA memory for implicit state", "<gpu>:0", True
    ),
    "--response-cache-byte-size": NoopFlag(
        _int_is(0),
        "the cache this deprecated flag sizes (use --cache-config local,size=<bytes>, Triton's replacement)",
        "0",
    ),
    "--buffer-manager-thread-count": NoopFlag(
        _non_negative,
        "a buffer-manager thread pool (inputs are written into shared memory as they arrive)",
        "0 or more",
    ),
    "--http-thread-count": NoopFlag(
        _positive, "an HTTP thread pool (the HTTP endpoint serves every connection from the event loop)", "1 or more"
    ),
    "--grpc-infer-allocation-pool-size": NoopFlag(_non_negative, "a pool of reused gRPC response objects", "0 or more"),
    "--grpc-infer-response-compression-level": NoopFlag(
        _none_level, "gRPC response compression (clients may still ask for it per call)", "none"
    ),
    "--model-namespacing": NoopFlag(_false, "model namespacing", "false"),
    "--enable-peer-access": NoopFlag(_false, "CUDA peer access between GPUs", "false"),
    "--reuse-http-port": NoopFlag(_false, "SO_REUSEPORT on the HTTP port", "false"),
    "--reuse-grpc-port": NoopFlag(_false, "SO_REUSEPORT on the gRPC port", "false"),
}


class _Noop(argparse.Action):
    """A :data:`NOOP_FLAGS` flag: its values are kept for :func:`triton_notes`; others refused."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: str | None = None) -> None:
        flag = NOOP_FLAGS[option or ""]
        text = str(values)
        if not flag.nothing(text):
            parser.error(
                f"{option}={text}: tritium does not have {flag.lacks}; it accepts {option} only with a value that asks "
                f"for nothing ({flag.accepted})"
            )
        seen = getattr(namespace, "triton_noops", None) or []
        seen.append((option, text))
        namespace.triton_noops = seen


def _server_id(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("the server id must not be empty")
    return text


def _config_name(text: str) -> str:
    """``--model-config-name`` ("": none): Triton refuses a name with a space; tritium also one with a path separator."""
    if any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"invalid model config name '{text}': it must not contain spaces")
    if "/" in text or "\\" in text or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"invalid model config name '{text}': it names a file in configs/, not a path")
    return text


def non_negative(what: str) -> Callable[[str], int]:
    """An argparse type: a whole number >= 0, refused as ``invalid <what> '<text>' (expected a whole number >= 0)``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0:
            raise argparse.ArgumentTypeError(f"invalid {what} '{text}' (expected a whole number >= 0)")
        return value

    return parse


_retries = non_negative("retry count")


def add_triton_flags(p: argparse.ArgumentParser) -> None:
    """Add ``--id``, ``--model-load-retry-count``, ``--model-config-name`` and :data:`NOOP_FLAGS` to ``p``."""
    p.add_argument(
        "--id",
        dest="server_id",
        type=_server_id,
        default="tritium",
        metavar="NAME",
        help="the server's name in server metadata (Triton's: triton)",
    )
    p.add_argument(
        "--model-load-retry-count",
        type=_retries,
        default=0,
        metavar="N",
        help="retries of a model load that fails, before it is reported failed (default 0)",
    )
    p.add_argument(
        "--model-config-name",
        type=_config_name,
        default="",
        metavar="NAME",
        help="load each model's configs/<NAME>.pbtxt instead of config.pbtxt where it exists (default: config.pbtxt)",
    )
    for flag, noop in NOOP_FLAGS.items():
        p.add_argument(
            flag,
            action=_Noop,
            dest=f"noop_{flag[2:].replace('-', '_')}",
            metavar="VALUE",
            help=f"accepted only as {noop.accepted}: tritium does not have {noop.lacks}",
        )


def triton_notes(args: Any) -> list[str]:
    """One log line for each :data:`NOOP_FLAGS` flag given (with a value that asks for nothing)."""
    return [
        f"{flag}={value} accepted: tritium does not have {NOOP_FLAGS[flag].lacks}, and this value asks for none"
        for flag, value in getattr(args, "triton_noops", None) or []
    ]
