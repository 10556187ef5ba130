"""The open connections of the HTTP endpoint: their bound, header, body and idle timeouts, and closing them at stop.

Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import time
from dataclasses import dataclass

from .connection import HttpConnection

log = logging.getLogger("tritium.http")

__all__ = ["ConnectionTable", "HttpTimeouts", "STALL_TIMEOUT_S", "fd_reserve"]
#: a refused connection is logged at most this often, seconds
_REFUSAL_LOG_S = 10.0


def fd_reserve(soft_limit: int) -> int:
    """How many file descriptors below the open-file limit (``RLIMIT_NOFILE``'s soft value) the HTTP
    endpoint leaves to the rest of the server: worker processes (a restart needs a few), the gRPC and
    metrics endpoints, model files. An eighth of the limit, at least 64."""
    return max(64, soft_limit // 8)


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
    :param max_connections: the most connections open at once (``--http-max-connections``; 0: no
        bound but the open-file limit's).
    """

    def __init__(self, timeouts: HttpTimeouts | None = None, max_connections: int = 0) -> None:
        self.timeouts = timeouts or HttpTimeouts()
        self.max_connections = max_connections
        self._open: set[HttpConnection] = set()
        self._task: asyncio.Task[None] | None = None
        self._logged = 0.0  # when a refusal was last logged (monotonic)

    def refusal(self, sock: socket.socket | None) -> str | None:
        """Why a connection just accepted on ``sock`` must be refused (None: it is admitted).

        Refused when ``max_connections`` are open already, or when the server is near its
        open-file limit: descriptors are numbered lowest-free first, so a socket numbered
        within :func:`fd_reserve` of the soft ``RLIMIT_NOFILE`` (read at each accept: it may
        change) means that many are open. The first refusal in 10 s is logged.
        """
        why = None
        if self.max_connections and len(self._open) >= self.max_connections:
            why = f"the HTTP endpoint holds its maximum of {self.max_connections} connections (--http-max-connections)"
        elif sock is not None:
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            if soft != resource.RLIM_INFINITY and sock.fileno() >= soft - fd_reserve(soft):
                why = (
                    f"the server is near its open-file limit ({soft} descriptors, RLIMIT_NOFILE); "
                    f"{fd_reserve(soft)} are kept for its workers and other endpoints"
                )
        if why is not None:
            now = time.monotonic()
            if now - self._logged >= _REFUSAL_LOG_S:
                self._logged = now
                log.warning("refusing HTTP connections (503): %s", why)
            return why + "; retry later"
        return None

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
