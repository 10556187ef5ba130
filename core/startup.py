"""What the server says while it starts: taken ports found before any model loads, and Triton's tables.

- :func:`check_ports` binds (and at once closes) every endpoint's TCP port
  before the models load, so a port in use fails the start-up in a second,
  naming the endpoint and the port, not after minutes of loading (Triton
  2.51 loads every model first and only then fails to bind).
- :func:`model_table` is Triton's ``Model | Version | Status`` table
  (``server.cc``), one row per entry of the repository index, the status
  ``READY`` or ``UNAVAILABLE: <reason>``; :func:`options_table` is its
  ``Option | Value`` table with tritium's own settings.

Runs in the core process, on its event loop, once while the server starts.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import Code, TritonError

__all__ = [
    "check_ports",
    "endpoint_address",
    "endpoint_lines",
    "model_table",
    "options_table",
    "protobuf_warning",
    "render_table",
]


def endpoint_address(frontend: Any) -> tuple[str, int] | None:
    """``(host, port)`` a frontend will listen on, or None when it names none.

    A frontend that listens on TCP says so with ``port`` (int) and ``host``
    or ``address`` (str) attributes (see :class:`~.hookspecs.Frontend`).
    """
    port = getattr(frontend, "port", None)
    if not isinstance(port, int) or isinstance(port, bool):
        return None
    host = getattr(frontend, "host", None) or getattr(frontend, "address", "") or ""
    return str(host), port


def endpoint_lines(frontends: Iterable[Any]) -> list[str]:
    """``"<name> <host>:<port>"`` of each frontend that listens on TCP (the options table's ``endpoints``).

    A frontend's ``startup_note`` (a str, when it has one) follows on a line of
    its own, indented: the gRPC endpoint names its transport there
    (``  transport: native (gRPC C++ 1.51.1)``).
    """
    out = []
    for frontend in frontends:
        where = endpoint_address(frontend)
        if where is not None:
            out.append(f"{getattr(frontend, 'name', type(frontend).__name__)} {where[0]}:{where[1]}")
            note = getattr(frontend, "startup_note", None)
            if isinstance(note, str) and note:
                out.append(f"  {note}")
    return out


def check_ports(frontends: Iterable[Any]) -> None:
    """Fail at once when an endpoint's port cannot be bound.

    Each ``(host, port)`` is bound with ``SO_REUSEADDR`` (as the endpoints
    bind) and closed again; port 0 (any free port) is skipped.

    :raises TritonError: UNAVAILABLE naming the endpoint, address and port.
    """
    for frontend in frontends:
        where = endpoint_address(frontend)
        if where is None or where[1] == 0:
            continue
        host, port = where
        name = getattr(frontend, "name", type(frontend).__name__)
        try:
            infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except socket.gaierror as exc:
            raise TritonError(Code.UNAVAILABLE, f"the {name} endpoint cannot bind {host}:{port}: {exc}") from None
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except OSError as exc:
            why = "is already in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
            raise TritonError(
                Code.UNAVAILABLE, f"the {name} endpoint's port {port} on {host or '*'} {why}; no model was loaded"
            ) from None
        finally:
            sock.close()


def render_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table drawn as Triton draws its start-up tables (``+---+`` rules; a cell's lines stacked)."""
    split = [[str(cell).split("\n") for cell in row] for row in rows]
    widths = [len(h) for h in header]
    for row in split:
        for i, lines in enumerate(row):
            widths[i] = max(widths[i], *(len(line) for line in lines))
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(cells: Sequence[str]) -> str:
        return "|" + "|".join(f" {c:<{w}} " for c, w in zip(cells, widths)) + "|"

    out = [rule, line(header), rule]
    for row in split:
        for k in range(max(len(lines) for lines in row)):
            out.append(line([lines[k] if k < len(lines) else "" for lines in row]))
    out.append(rule)
    return "\n".join(out)


def model_table(index: Iterable[dict[str, str]]) -> str:
    """Triton's model table from repository index entries (``version`` ``-`` when there is none)."""
    rows = []
    for item in index:
        state = item.get("state", "UNAVAILABLE")
        status = state if not item.get("reason") else f"{state}: {item['reason'].rstrip()}"
        rows.append((item["name"], item.get("version", "-"), status))
    return render_table(("Model", "Version", "Status"), rows)


_MODES = {"none": "MODE_NONE", "poll": "MODE_POLL", "explicit": "MODE_EXPLICIT"}


def options_table(options: Any, version: str, extensions: Sequence[str], endpoints: Sequence[str]) -> str:
    """The server-options table: Triton's fields where tritium has them, then tritium's own.

    :param options: the :class:`~.options.ServerOptions`.
    :param endpoints: ``"<name> <host>:<port>"`` of each endpoint that will serve.
    """
    rows: list[tuple[str, str]] = [
        ("server_id", options.server_id),
        ("server_version", version),
        ("server_extensions", " ".join(extensions)),
    ]
    rows += [(f"model_repository_path[{i}]", path) for i, path in enumerate(options.model_repositories)]
    rows.append(("model_control_mode", _MODES.get(options.model_control_mode, options.model_control_mode)))
    rows += [(f"startup_models_{i}", name) for i, name in enumerate(options.startup_models)]
    rows += [
        ("strict_model_config", str(int(not options.auto_complete))),
        ("rate_limit", options.rate_limit.upper()),
        ("strict_readiness", str(int(options.strict_readiness))),
        ("exit_timeout", f"{options.exit_timeout_s:g}"),
        ("cache_enabled", str(int(bool(options.cache_config)))),
        ("backend_directory", options.backend_directory),
        ("model_load_thread_count", str(options.model_load_threads)),
        ("max_request_bytes", str(options.max_request_bytes)),
        ("arena_directory", options.arena_dir or "(shared memory)"),
        ("reply_poll_us", str(options.reply_poll_us)),
        ("endpoints", "\n".join(endpoints) or "none"),
    ]
    return render_table(("Option", "Value"), rows)


def protobuf_warning() -> str | None:
    """A warning when protobuf runs its pure-Python implementation in this process, else None.

    ``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python`` (some packages, onnxruntime-extensions
    among them, set it in ``os.environ`` as they import) makes every gRPC message and model
    config parse in Python: about a hundred times slower, on the event loop.
    """
    from google.protobuf.internal import api_implementation

    if api_implementation.Type() != "python":
        return None
    setting = os.environ.get("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION")
    why, fix = (
        (f"PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION={setting!r}", "unset it for the compiled implementation")
        if setting
        else ("no compiled implementation is installed", "install a protobuf wheel for this platform")
    )
    return f"protobuf runs its pure-Python implementation ({why}): gRPC requests and model configs parse about 100x slower; {fix}"
