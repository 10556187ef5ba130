"""The open connections of the HTTP endpoint: stall checks, and closing them at stop.

Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time

from .connection import HttpConnection

log = logging.getLogger("tritium.http")

__all__ = ["ConnectionTable", "STALL_TIMEOUT_S"]

#: seconds a half-received request, or an unread response, may make no progress
STALL_TIMEOUT_S = 60.0


class ConnectionTable:
    """The open connections of one endpoint; drops stalled ones (checked once a second).

    :param stall_timeout_s: seconds a connection may wait on its client.
    """

    def __init__(self, stall_timeout_s: float = STALL_TIMEOUT_S) -> None:
        self.stall_timeout_s = stall_timeout_s
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
        while True:
            await asyncio.sleep(1.0)
            deadline = time.monotonic() - self.stall_timeout_s
            for connection in list(self._open):
                since = connection.stalled_since()
                if since is not None and since < deadline:
                    log.info("dropping an HTTP connection that made no progress for %.0f s", self.stall_timeout_s)
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
