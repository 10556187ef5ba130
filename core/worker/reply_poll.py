"""Waiting for a fast model's reply without sleeping, while it is the only batch in flight.

At concurrency 1 the core has nothing to do while a worker executes: it sleeps in
``epoll`` and the worker's reply wakes it, one sleep and one wake-up per request,
which on a virtual machine costs tens of microseconds of CPU and latency each.
While exactly one batch is in flight in the whole server and its worker usually
answers within the poll window, the core instead reads the worker's socket
without blocking, over and over, for at most that window after sending the
EXECUTE frame (:meth:`~.channel.AsyncChannel.send` with ``poll=True``), and
handles the reply in the same loop iteration. Measured on the 2-core machine
(docs/performance.md, "The core polling for the worker's reply"): 13 % more
add_sub requests per second at concurrency 1 over HTTP, 17-28 % over gRPC,
unchanged at concurrency 8. The poll spends the core's CPU, on a core that would
otherwise be idle: it never runs on a machine with one CPU (it would hold up the
worker), never while a second batch is in flight (that batch's replies and new
requests would wait behind it), and not for a model whose replies take longer
than the window. A request that arrives during a poll waits at most the window.

``tritium-server --reply-poll-us N`` sets the window (0: never poll; the default is
:func:`~tritium.core.settings.options.default_reply_poll_us`).
"""

from __future__ import annotations

__all__ = ["ReplyPoll"]

#: added to twice a worker's usual reply time to give its poll window (ns)
_MARGIN_NS = 50_000


class ReplyPoll:
    """The server's batches in flight, and how long to poll a worker's socket for its reply.

    One per server, shared by its worker processes (they run on the core's event loop).

    :param window_us: the longest poll, microseconds; 0 never polls.
    """

    __slots__ = ("window_ns", "in_flight")

    def __init__(self, window_us: int) -> None:
        if window_us < 0:
            raise ValueError(f"the reply poll window must be 0 or more microseconds, not {window_us}")
        self.window_ns = window_us * 1000
        #: EXECUTE frames sent and not yet answered with EXECUTE_DONE, in all workers
        self.in_flight = 0

    def budget_ns(self, reply_ns: float) -> int:
        """How long (ns) to poll for the reply to the EXECUTE just sent; 0: sleep as usual.

        :param reply_ns: the worker's usual reply time (ns from EXECUTE sent to EXECUTE_DONE
            received, a moving average over replies to lone batches).
        """
        if self.in_flight != 1 or reply_ns > self.window_ns:
            return 0
        return min(self.window_ns, int(2 * reply_ns) + _MARGIN_NS)
