"""Logging of the ``pb_utils`` API (part of ``c_python_backend_utils``).

:class:`Logger`: model code's messages go to the server log through the
worker's ``tritium.python_model`` logger, attributed to the model code that
logged them. Runs only inside a tritium worker hosting a ``python`` model.
"""

from __future__ import annotations

import enum
import logging

_log = logging.getLogger("tritium.python_model")


class _LogLevel(enum.IntEnum):
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3

    def __repr__(self) -> str:
        return f"<LogLevel.{self.name}: {int(self)}>"


_LEVELS = {
    _LogLevel.INFO: logging.INFO,
    _LogLevel.WARNING: logging.WARNING,
    _LogLevel.ERROR: logging.ERROR,
    _LogLevel.VERBOSE: logging.DEBUG,
}


def _emit(message: str, level: _LogLevel) -> None:
    # stacklevel 3: the model code that called Logger.log_*()
    _log.log(_LEVELS[_LogLevel(int(level))], "%s", message, stacklevel=3)


class Logger:
    """Log to the server log: ``pb_utils.Logger.log_info(message)`` (also ``log_warn``,
    ``log_error``, ``log_verbose`` — shown with ``--log-verbose`` > 0 — and ``log(message, level)``)."""

    LogLevel = _LogLevel
    INFO = _LogLevel.INFO
    WARNING = _LogLevel.WARNING
    ERROR = _LogLevel.ERROR
    VERBOSE = _LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: _LogLevel = _LogLevel.INFO) -> None:
        _emit(str(message), level)

    @staticmethod
    def log_info(message: str) -> None:
        _emit(str(message), _LogLevel.INFO)

    @staticmethod
    def log_warn(message: str) -> None:
        _emit(str(message), _LogLevel.WARNING)

    @staticmethod
    def log_error(message: str) -> None:
        _emit(str(message), _LogLevel.ERROR)

    @staticmethod
    def log_verbose(message: str) -> None:
        _emit(str(message), _LogLevel.VERBOSE)
