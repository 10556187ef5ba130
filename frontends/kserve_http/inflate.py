"""Compressed HTTP request bodies (``Content-Encoding: gzip`` / ``deflate``), inflated within bounds.

What one compressed request may cost is bounded twice: its inflated size by
``--max-decompressed-request-bytes`` (64 MiB by default, never above
``--max-request-bytes``; 413 past it), and the inflated bytes are taken from
the server's in-flight budget (``--max-inflight-request-bytes``,
:class:`~tritium.core.settings.network.BodyBudget`) as they grow, so that many
compression bombs at once are refused (503 with ``Retry-After``) before they
hold more than the budget. Runs on the event loop (small bodies) or on a
parse thread (see :mod:`.routes`).
"""

from __future__ import annotations

import threading
import zlib

from ...core.api import BodyBudget, Code, TritonError
from .body import BodyTooLarge

__all__ = ["BudgetHold", "BudgetSpent", "inflate", "INFLATE_STEP"]

#: a compressed body is inflated this many bytes at a time, the total checked after each step
INFLATE_STEP = 4 << 20


class BudgetSpent(TritonError):
    """The in-flight budget cannot hold more of an inflating body: HTTP 503 with ``Retry-After: 1``."""

    headers = {"Retry-After": "1"}

    def __init__(self, budget: BodyBudget) -> None:
        super().__init__(Code.UNAVAILABLE, budget.refusal().message)


class BudgetHold:
    """Bytes of the in-flight budget one request holds besides its body (its inflated body).

    Taken a step at a time (:meth:`take`, from a parse thread or the loop) and
    given back once, when the response is on the wire or the client is gone
    (:meth:`release`, the connection's). A take after the release fails, so
    nothing taken by a parse thread that is still inflating can outlive it.

    :param budget: the server's budget.
    """

    __slots__ = ("budget", "_lock", "_held", "_released")

    def __init__(self, budget: BodyBudget) -> None:
        self.budget = budget
        self._lock = threading.Lock()
        self._held = 0
        self._released = False

    @property
    def held(self) -> int:
        """Bytes held now."""
        return self._held

    def take(self, size: int) -> bool:
        """Take ``size`` more bytes; False when the budget is spent or the hold was released."""
        with self._lock:
            if self._released or not self.budget.reserve(size):
                return False
            self._held += size
            return True

    def release(self) -> None:
        """Give back everything held (idempotent)."""
        with self._lock:
            self._released = True
            held, self._held = self._held, 0
        if held:
            self.budget.release(held)


def inflate(body: bytes | memoryview, encoding: str, limit: int, hold: BudgetHold, flag: str = "") -> bytearray:
    """Inflate ``body`` (gzip or zlib, as Triton's ``inflateInit2(15 | 32)``) a step at a time.

    :param limit: the most bytes it may inflate to.
    :param hold: takes the inflated bytes from the in-flight budget as they grow.
    :param flag: the flag that sets ``limit``, named in the 413 ("": ``--max-request-bytes``).
    :returns: the inflated body (at most ``limit`` bytes; memory held is at most
        ``limit`` plus one :data:`INFLATE_STEP`, however large the compression ratio).
    :raises BodyTooLarge: past ``limit`` (413).
    :raises BudgetSpent: when the budget cannot hold the next step (503).
    :raises TritonError: INVALID_ARG for an empty or corrupt body.
    """
    if not body:
        raise TritonError(Code.INVALID_ARG, "nothing to be decompressed")
    inflater = zlib.decompressobj(wbits=47)
    out = bytearray()
    data: bytes | memoryview = body
    try:
        while True:
            # a byte past the limit is enough to refuse: never inflate more than that
            piece = inflater.decompress(data, min(INFLATE_STEP, limit + 1 - len(out))) if data else inflater.flush()
            if len(out) + len(piece) > limit:
                if flag:
                    raise BodyTooLarge(f"decompressed request body exceeds the maximum of {limit} bytes ({flag})")
                raise BodyTooLarge(f"decompressed request body exceeds the maximum request size of {limit} bytes")
            if not hold.take(len(piece)):
                raise BudgetSpent(hold.budget)
            out += piece
            if not data:
                return out
            data = inflater.unconsumed_tail
    except zlib.error as exc:
        message = f"failed to decompress the '{encoding}' request body: {exc}"
        raise TritonError(Code.INVALID_ARG, message) from None
