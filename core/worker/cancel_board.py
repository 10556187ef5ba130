"""The cancel board: how a request's cancellation reaches the model that executes it.

One small shared-memory segment per worker (:data:`SLOTS` 8-byte slots), created by the core
and sent to the worker once, right after its HELLO (a ``CANCEL_BOARD`` frame). When a client
cancels a request the worker is executing (a gRPC call cancelled or past its deadline, a gRPC
stream cancelled, an HTTP client gone), the core writes the request's *token* into a slot;
the model's ``is_cancelled()`` (pb_utils, ``TRITONBACKEND_RequestIsCancelled``) reads the
slots where that token may be. Nothing is written or read while nothing is cancelled: the
request path carries no extra field, frame or system call.

A request's token is ``batch id << 20 | (index + 1)``: batch ids are unique in a worker (the
core's counter for it), ``index`` is the request's place in its EXECUTE frame. Its slots are
:data:`PROBES` consecutive ones from ``hash(batch id, index)``; the core writes the token
into the first of them that holds no token of a batch still in flight (a slot whose batch
finished is free again), so two cancelled requests never share a slot and a stale token
never matches another request.

Both sides run this module: :meth:`CancelBoard.create` in the core, :meth:`CancelBoard.attach`
in the worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..errors import Code, TritonError
from ..memory.arena import Segment

__all__ = ["CancelBoard", "SLOTS", "PROBES", "token_of"]

#: slots of a board (8 bytes each: one page)
SLOTS = 512
#: consecutive slots a token may be in
PROBES = 8
_INDEX_BITS = 20
_INDEX_MASK = (1 << _INDEX_BITS) - 1


def token_of(batch_id: int, index: int) -> int:
    """The token of request ``index`` of batch ``batch_id`` (0 never names a request)."""
    return (batch_id << _INDEX_BITS) | (index + 1)


def _first_slot(batch_id: int, index: int) -> int:
    return (batch_id * 0x9E3779B1 + index) % SLOTS


class CancelBoard:
    """The slots of one worker's cancel board (see the module docstring).

    :param segment: the shared-memory segment holding the slots.
    """

    __slots__ = ("segment", "_slots")

    def __init__(self, segment: Segment) -> None:
        self.segment = segment
        self._slots = segment.view.cast("Q")

    @classmethod
    def create(cls) -> CancelBoard:
        """A new, empty board (core side).

        :raises TritonError: UNAVAILABLE when the memory cannot be obtained.
        """
        return cls(Segment.create(0, SLOTS * 8))

    @classmethod
    def attach(cls, size: int, fd: int) -> CancelBoard:
        """Map the board received in a ``CANCEL_BOARD`` frame (worker side; takes ``fd``).

        :raises TritonError: INTERNAL when its size is not :data:`SLOTS` slots or it cannot be mapped.
        """
        try:
            if size != SLOTS * 8 or os.fstat(fd).st_size < size:
                raise OSError(f"a cancel board of {size} bytes (expected {SLOTS * 8})")
            return cls(Segment(0, size, fd))
        except (OSError, ValueError) as exc:
            os.close(fd)
            raise TritonError(Code.INTERNAL, f"cannot map the cancel board: {exc}") from exc

    @property
    def fd(self) -> int:
        """The segment's file descriptor (sent to the worker)."""
        return self.segment.fd

    def mark(self, batch_id: int, index: int, in_flight: Callable[[int], bool]) -> bool:
        """Record request ``index`` of batch ``batch_id`` as cancelled (core side).

        :param in_flight: tells whether a batch id is still executing or answering (its slot is
            then taken).
        :returns: False when every slot the token may use is taken (the request then runs on
            without seeing its cancellation) or the index is out of range.
        """
        if not 0 <= index < _INDEX_MASK:
            return False
        token = token_of(batch_id, index)
        slots = self._slots
        first = _first_slot(batch_id, index)
        for probe in range(PROBES):
            slot = (first + probe) % SLOTS
            held = slots[slot]
            if held == token:
                return True
            if held == 0 or not in_flight(held >> _INDEX_BITS):
                slots[slot] = token
                return True
        return False

    def is_set(self, batch_id: int, index: int) -> bool:
        """Whether request ``index`` of batch ``batch_id`` was cancelled (worker side, any thread)."""
        token = token_of(batch_id, index)
        slots = self._slots
        first = _first_slot(batch_id, index)
        for probe in range(PROBES):
            if slots[(first + probe) % SLOTS] == token:
                return True
        return False

    def close(self) -> None:
        """Unmap the board and close its descriptor."""
        self._slots.release()
        self.segment.close()
