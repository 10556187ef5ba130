#!/usr/bin/env python3
"""Where a request's time goes in the core: CPU per request and Python work by module, in process.

Starts an :class:`~tritium.core.server.InferenceServer` in this process on the
``add_sub`` python model (``benchmarks/python_backend.py`` writes it), with its
real worker process, and drives the HTTP endpoint's connection protocol
directly from in-process clients that keep ``--concurrency`` requests in flight
(binary tensor requests, as perf_analyzer sends them, or with ``--format json``
the same tensors as JSON ``data`` arrays, as curl and most non-Triton clients send them). No client socket is
involved, so what is measured is the core's own work: parsing, the request
path, the worker exchange (its system calls included) and the response.

Two measurements, both of the core process only:

* CPU per request (``time.process_time``) over ``--requests`` requests;
* Python bytecodes executed per request, by module and by function, counted
  with ``sys.settrace`` over a shorter run (deterministic: the same code gives
  the same counts on a busy machine, unlike time).

With ``--output`` it writes the ``hot_path`` section of docs/architecture.md.

Usage::

    python benchmarks/profile_core.py [--concurrency 8] [--requests 20000] [--format binary|json] [--output docs/architecture.md]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime
import json
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, python_speed_s, write_section  # noqa: E402
from benchmarks.python_backend import build  # noqa: E402


def http_request(body_format: str) -> bytes:
    """One add_sub infer request as an HTTP/1.1 message: ``binary`` tensors or ``json`` ``data`` arrays."""
    inputs = [{"name": f"INPUT{i}", "shape": [4], "datatype": "FP32"} for i in range(2)]
    outputs = [{"name": f"OUTPUT{i}"} for i in range(2)]
    if body_format == "json":
        inputs[0]["data"], inputs[1]["data"] = [1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]
        body = json.dumps({"inputs": inputs, "outputs": outputs}).encode()
        return (
            b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
    for tensor in inputs:
        tensor["parameters"] = {"binary_data_size": 16}
    for tensor in outputs:
        tensor["parameters"] = {"binary_data": True}
    header = json.dumps({"inputs": inputs, "outputs": outputs}).encode()
    body = header + struct.pack("<8f", 1, 2, 3, 4, 1, 1, 1, 1)
    return (
        b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\n"
        + f"Inference-Header-Content-Length: {len(header)}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


class _Transport:
    """What the connection writes to: hands each response to its client."""

    def __init__(self, client: _Client) -> None:
        self.client = client
        self.closing = False

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: bytes) -> None:
        self.client.answered(data)

    def writelines(self, parts: list[Any]) -> None:
        self.client.answered(b"".join(parts))

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default  # no socket: the connection bound is not checked

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    abort = close

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _Client:
    """One keep-alive client: sends the next request when the answer to the last one came."""

    def __init__(self, protocol: Any, count: int, done: asyncio.Future[None], request: bytes) -> None:
        self.protocol, self.left, self.done, self.request = protocol, count, done, request
        self.loop = asyncio.get_running_loop()

    def send(self) -> None:
        request = self.request
        buffer = self.protocol.get_buffer(len(request))
        buffer[: len(request)] = request
        self.protocol.buffer_updated(len(request))

    def answered(self, data: bytes) -> None:
        if not data.startswith(b"HTTP/1.1 200"):
            raise SystemExit(f"unexpected answer: {data[:300]!r}")
        self.left -= 1
        if self.left > 0:
            self.loop.call_soon(self.send)
        elif not self.done.done():
            self.done.set_result(None)


async def _drive(frontend: Any, concurrency: int, total: int, request: bytes) -> None:
    from tritium.frontends.kserve_http.connection import HttpConnection

    loop = asyncio.get_running_loop()
    waits = []
    for _ in range(concurrency):
        done: asyncio.Future[None] = loop.create_future()
        protocol = HttpConnection(frontend, frontend.connections)
        client = _Client(protocol, max(1, total // concurrency), done, request)
        protocol.connection_made(_Transport(client))
        client.send()
        waits.append(done)
    await asyncio.gather(*waits)


def _counting(counts: collections.Counter[Any]) -> Any:
    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if event == "call":
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return tracer
        if event == "opcode":
            counts[frame.f_code] += 1
        return tracer

    return tracer


def _where(filename: str) -> str:
    text = str(Path(filename))
    root = str(ROOT) + "/"
    if text.startswith(root):
        return text[len(root) :]
    for marker in ("/site-packages/", "/lib/python3"):
        if marker in text:
            return "(stdlib/libraries) " + text.rsplit("/", 1)[-1]
    return text


async def _measure(repo: Path, concurrency: int, requests: int, traced: int, request: bytes) -> dict[str, Any]:
    from tritium.core import InferenceServer, ServerOptions
    from tritium.frontends.kserve_http.app import HTTPFrontend

    # reply_poll_us=0: the core sleeps while the worker executes, so the CPU measured is the core's
    # work, comparable with the figures before the reply poll (its polling is waiting, not work)
    options = ServerOptions(model_repositories=[str(repo)], http=False, grpc=False, metrics=False, reply_poll_us=0)
    server = InferenceServer(options)
    await server.start()
    frontend = HTTPFrontend(server, "127.0.0.1", 0, 1 << 30)
    try:
        await _drive(frontend, concurrency, 2000, request)  # warm up
        cpu, wall = time.process_time(), time.perf_counter()
        await _drive(frontend, concurrency, requests, request)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        counts: collections.Counter[Any] = collections.Counter()
        sys.settrace(_counting(counts))
        try:
            await _drive(frontend, concurrency, traced, request)
        finally:
            sys.settrace(None)
    finally:
        frontend.connections.abort_all()
        await server.stop()
    n = max(1, requests // concurrency) * concurrency
    t = max(1, traced // concurrency) * concurrency
    by_module: collections.Counter[str] = collections.Counter()
    for code, c in counts.items():
        if code.co_filename != __file__:
            by_module[_where(code.co_filename)] += c
    functions = [
        (f"{_where(code.co_filename)}:{code.co_firstlineno} {code.co_name}", c / t)
        for code, c in counts.most_common(40)
        if code.co_filename != __file__
    ]
    return {
        "cpu_us": cpu / n * 1e6,
        "rate": n / wall,
        "opcodes": sum(by_module.values()) / t,
        "modules": [(m, c / t) for m, c in by_module.most_common(16)],
        "functions": functions[:20],
    }


def render(result: dict[str, Any], concurrency: int, body_format: str = "binary", speed_s: float | None = None) -> str:
    """The ``hot_path`` section; ``speed_s``: :func:`~benchmarks.common.python_speed_s` before the run."""
    total = result["opcodes"]
    lines = [
        "## Where a request's time goes",
        "",
        f"Measured {datetime.date.today().isoformat()} by `python benchmarks/profile_core.py --concurrency {concurrency}"
        f"{' --format json' if body_format == 'json' else ''}`: "
        f"the core in one process on the add_sub python model (FP32 [4] + [4], {body_format} tensors, one "
        f"instance in its worker), {concurrency} in-process HTTP clients keeping requests in flight "
        "(no client sockets: only the core's own work is counted)."
        + (
            f" Before the run this machine took {speed_s:.2f} s for a pure-Python loop of 10**7 additions "
            "(`benchmarks/common.py: python_speed_s`): compare CPU figures across runs with it; the bytecode "
            "counts do not depend on the machine."
            if speed_s is not None
            else ""
        ),
        "",
        f"- **Core CPU per request: {result['cpu_us']:.0f} µs** ({result['rate']:,.0f} requests/s on one core "
        "while the worker runs on the other), system calls to the worker included. A real client adds the "
        "socket receive and send of each request: a bare httptools server answering a fixed body spends "
        "about 15 µs per request here in all (`shared/microbench`), a bound on that part.",
        f"- **Python work per request: {total:,.0f} bytecodes**, by module:",
        "",
        "| module | bytecodes / request | share |",
        "| --- | ---: | ---: |",
    ]
    for module, count in result["modules"]:
        lines.append(f"| `{module}` | {count:,.0f} | {count / total:.0%} |")
    lines += ["", "The functions that execute most:", "", "| function | bytecodes / request |", "| --- | ---: |"]
    for name, count in result["functions"]:
        lines.append(f"| `{name}` | {count:,.0f} |")
    lines += [
        "",
        "Reading: no single place dominates any more. The request is parsed (head by llhttp, JSON header "
        "by msgspec), validated, placed (its inputs already lie in the arena), scheduled, sent to the "
        "worker with other frames in one write, answered, rendered and written; each step is tens to a "
        "few hundred bytecodes of plain Python. Halving the core's CPU again needs fewer steps per request "
        "(a frontend process that parses and renders beside the scheduler: see “Using more than one CPU” below) "
        "or fewer wakeups; compiling these steps as they are written does not (see “Compiling the hot path”). "
        "docs/performance.md, “Headroom”, measures how short the path must get: the same processes, socket and "
        "wakeups with no layers answer a JSON request at concurrency 1 well ahead of Triton, and so does a lean "
        "path that keeps the checks, the shared-memory arena, a scheduler and statistics; tritium's layers would "
        "have to cost about half of what they do now to match Triton's p50.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--traced", type=int, default=400, help="requests counted bytecode by bytecode")
    parser.add_argument("--format", choices=("binary", "json"), default="binary", help="how the requests carry tensors")
    parser.add_argument("--output", type=Path, default=None, help="docs/architecture.md to write the section into")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it exists
        run = asyncio.run
    else:
        run = uvloop.run
    speed_s = python_speed_s()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "models"
        repo.mkdir()
        build(repo)
        request = http_request(args.format)
        result = run(_measure(repo, args.concurrency, args.requests, args.traced, request))
    text = render(result, args.concurrency, args.format, speed_s)
    print(text)
    if args.output is not None:
        write_section(args.output, "hot_path", text)


if __name__ == "__main__":
    main()
