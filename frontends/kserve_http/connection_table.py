"""The open connections of the HTTP endpoint: header, body and idle timeouts, and closing them at stop.

Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from .connection import HttpConnection

log = logging.getLogger("tritium.http")

__all__ = ["ConnectionTable", "HttpTimeouts", "STALL_TIMEOUT_S"]

#: seconds a half-received body, or an unread response, may make no progress (the body timeout)
STALL_TIMEOUT_S = 60.0


@dataclass(slots=True, frozen=True)
class HttpTimeouts:
    """How long the HTTP endpoint waits on a client, in seconds.

    :ivar header_s: a request head must be complete this long after its first byte
        (``--http-header-timeout-secs``; against slow-header clients).
    :ivar body_s: a request body, or a response being sent, may make no progress
        for this long (``--http-body-timeout-secs``).
    :ivar idle_s: a keep-alive connection may wait this long for its next request
        (``--http-idle-timeout-secs``).
    """

    header_s: float = 30.0
    body_s: float = STALL_TIMEOUT_S
    idle_s: float = 300.0


class ConnectionTable:
    """The open connections of one endpoint; drops the ones past a timeout (checked once a second).

    :param timeouts: the :class:`HttpTimeouts`.
    """

    def __init__(self, timeouts: HttpTimeouts | None = None) -> None:
        self.timeouts = timeouts or HttpTimeouts()
        self._open: set[HttpConnection] = set()
        self._task: asyncio.Task[None] | None = None

    def add(self, connection: HttpConnection) -> None:
        self._open.add(connection)
        if self._task is None:
            self._task = asyncio.ensure_future(self._watch())

    def discard(self, connection: HttpConnection) -> None:
        self._open.discard(connection)

    def __len__(self) -> int:
        return len(self._open)

    async def _watch(self) -> None:
        t = self.timeouts
        period = max(0.05, min(1.0, t.header_s / 4, t.body_s / 4, t.idle_s / 4))
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for connection in list(self._open):
                why = connection.expired(now, t.header_s, t.body_s, t.idle_s)
                if why is not None:
                    log.info("closing an HTTP connection: %s in time", why)
                    connection.abort()

    def close_idle(self) -> int:
        """Close every idle connection; the others close after their response. Returns those left."""
        return sum(1 for c in list(self._open) if not c.close_if_idle())

    def abort_all(self) -> None:
        """Drop every connection (at the end of a stop)."""
        for connection in list(self._open):
            connection.abort()
        if self._task is not None:
            self._task.cancel()
            self._task = None
