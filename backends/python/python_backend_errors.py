"""The errors of the ``pb_utils`` API (part of ``c_python_backend_utils``).

:class:`TritonModelException`, what failing ``pb_utils`` calls raise (and model
code raises to fail a request), and :class:`TritonError`, the error a response
carries, with its codes. Runs only inside a tritium worker hosting a ``python``
model; model code reaches these through ``triton_python_backend_utils``.
"""

from __future__ import annotations

import enum


class TritonModelException(Exception):
    """Raised by pb_utils calls that fail (and by model code, to fail a request)."""


class _ErrorCode(enum.IntEnum):
    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __repr__(self) -> str:
        return f"<__ErrorCode.{self.name}: {int(self)}>"


class TritonError:
    """An error a response carries: ``TritonError(message, code=TritonError.INTERNAL)``.

    Not an exception (as in Triton): put it in ``InferenceResponse(error=...)``.
    """

    UNKNOWN = _ErrorCode.UNKNOWN
    INTERNAL = _ErrorCode.INTERNAL
    NOT_FOUND = _ErrorCode.NOT_FOUND
    INVALID_ARG = _ErrorCode.INVALID_ARG
    UNAVAILABLE = _ErrorCode.UNAVAILABLE
    UNSUPPORTED = _ErrorCode.UNSUPPORTED
    ALREADY_EXISTS = _ErrorCode.ALREADY_EXISTS
    CANCELLED = _ErrorCode.CANCELLED

    __slots__ = ("_code", "_message")

    def __init__(self, message: str, code: int = _ErrorCode.INTERNAL) -> None:
        if not isinstance(message, str):
            raise TypeError(f"TritonError(message, code): message must be a str, got {type(message).__name__}")
        try:
            self._code = _ErrorCode(int(code))
        except (TypeError, ValueError):
            raise TypeError(f"TritonError(message, code): unknown error code {code!r}") from None
        self._message = message

    def message(self) -> str:
        """The error message."""
        return self._message

    def code(self) -> _ErrorCode:
        """The error code (``TritonError.INTERNAL``, ...)."""
        return self._code

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, {self._code!r})"
