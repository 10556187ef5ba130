"""Probes of a hostile client for the black-box hardening suites: a health watch, timed posts, RSS.

The health endpoint is polled on a thread of the test process while a hostile
request is handled; the answers' times tell whether the server's event loop
ran meanwhile (an event loop busy with one request answers no one else).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.clients import http_call
from tests.support.server import ServerProcess

__all__ = [
    "HealthWatch",
    "WBITS",
    "compressed",
    "post",
    "post_timed",
    "reset_peak_rss",
    "rss_mib",
    "watched",
    "while_watched",
]


class HealthWatch:
    """Polls ``GET /v2/health/live`` on its own thread; ``worst`` is the slowest answer (s)."""

    def __init__(self, server: ServerProcess) -> None:
        self.server, self.worst, self._stop = server, 0.0, threading.Event()
        self.answered: list[float] = []  # when each answer came (time.monotonic)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port, timeout=120)
        while not self._stop.is_set():
            started = time.monotonic()
            conn.request("GET", "/v2/health/live")
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            self.answered.append(time.monotonic())
            self.worst = max(self.worst, self.answered[-1] - started)
            self._stop.wait(0.02)
        conn.close()

    def answers_between(self, start: float, end: float) -> int:
        """How many health answers came between ``start`` and ``end`` (time.monotonic)."""
        return sum(start < at < end for at in self.answered)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(120)
        return self.worst


def while_watched(server: ServerProcess, action: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``action`` while the health endpoint is polled; its result and the slowest health answer."""
    result, watch = watched(server, action)
    return result, watch.worst


def watched(server: ServerProcess, action: Callable[[], Any]) -> tuple[Any, HealthWatch]:
    """Run ``action`` while the health endpoint is polled; its result and the (stopped) watch."""
    watch = HealthWatch(server)
    time.sleep(0.1)
    try:
        result = action()
    finally:
        watch.stop()
    return result, watch


#: ``Content-Encoding`` -> zlib's ``wbits`` for it (gzip wrapper; deflate is the zlib wrapper, as Triton reads it)
WBITS = {"gzip": 31, "deflate": 15}


def post(server: ServerProcess, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    status, _headers, reply = http_call(server, "POST", path, body, headers)
    return status, json.loads(reply) if reply else None


def rss_mib(server: ServerProcess, field: str = "VmRSS") -> float:
    assert server.proc is not None
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(field)


def reset_peak_rss(server: ServerProcess) -> float:
    """Reset the server's ``VmHWM`` to its current RSS (Linux ``clear_refs``, 5); return that (MiB).

    Without this a peak measured after another test's is no measure: the mark stays at the highest.
    """
    assert server.proc is not None
    Path(f"/proc/{server.proc.pid}/clear_refs").write_text("5")
    return rss_mib(server, "VmHWM")


def compressed(body: bytes, encoding: str | None) -> tuple[bytes, dict[str, str]]:
    """``body`` as sent with ``Content-Encoding: encoding`` (None: as is), and that header."""
    if encoding is None:
        return body, {}
    deflater = zlib.compressobj(9, zlib.DEFLATED, WBITS[encoding])
    return deflater.compress(body) + deflater.flush(), {"Content-Encoding": encoding}


def post_timed(server: ServerProcess, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any, float, float]:
    """:func:`post`, and when the request was sent and when its answer came (time.monotonic)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=120)
    try:
        conn.request("POST", path, body=body, headers=headers)
        sent = time.monotonic()
        response = conn.getresponse()
        reply = response.read()
        return response.status, json.loads(reply), sent, time.monotonic()
    finally:
        conn.close()
