"""Error codes and the one exception type the core raises.

The codes are Triton's ``TRITONSERVER_Error_Code`` values; each endpoint maps
them once to its transport's status (see :mod:`tritium.frontends.base`).
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["Code", "TritonError", "clip", "CLIP_CHARS"]

#: a client's string is echoed in an error message up to this many characters
CLIP_CHARS = 200


class Code(enum.IntEnum):
    """Triton's error codes (``TRITONSERVER_ERROR_*``), same numbering."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    @property
    def text(self) -> str:
        """Triton's status text for the code (``"Invalid argument"``), as logs and reasons print it."""
        return _CODE_TEXT[self]


_CODE_TEXT = {
    Code.UNKNOWN: "Unknown",
    Code.INTERNAL: "Internal",
    Code.NOT_FOUND: "Not found",
    Code.INVALID_ARG: "Invalid argument",
    Code.UNAVAILABLE: "Unavailable",
    Code.UNSUPPORTED: "Unsupported",
    Code.ALREADY_EXISTS: "Already exists",
    Code.CANCELLED: "Cancelled",
}


class TritonError(Exception):
    """An error with a Triton error code and a message meant for the client.

    Raised anywhere in the core and in workers (where it travels back to the
    core as ``[code, message]`` in a frame, never by the worker dying).

    :param code: the :class:`Code`.
    :param message: the text the client sees, as Triton words it.
    """

    __slots__ = ("code", "message")

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = Code(code)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"TritonError({self.code.name}, {self.message!r})"

    def to_wire(self) -> list[object]:
        """Return ``[code, message]``, the form errors take in worker frames."""
        return [int(self.code), self.message]

    @classmethod
    def from_wire(cls, wire: list[Any]) -> TritonError:
        """Rebuild an error sent by :meth:`to_wire`; unknown codes become UNKNOWN."""
        try:
            code = Code(int(wire[0]))
        except (ValueError, TypeError, IndexError):
            code = Code.UNKNOWN
        message = str(wire[1]) if len(wire) > 1 else "unknown error"
        return cls(code, message)


def clip(text: str, limit: int = CLIP_CHARS) -> str:
    """``text`` as an error message echoes a client's string: at most ``limit`` characters.

    A longer string keeps its start and says how long it was
    (``'xxxx...' (100000 characters)``), so that a huge model name or header
    cannot blow up an error (gRPC refuses status details over 16 KiB).
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"
