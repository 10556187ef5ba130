"""Log settings shared by the core and the workers.

Lines look like Triton's (glog style): ``I1130 04:24:53.123456 1234 server.py:88] message``,
with the level letter, month/day, time in microseconds, process id and the
source location. ``--log-verbose N`` > 0 turns on verbose (DEBUG) lines.
"""

from __future__ import annotations

import logging
import os
import sys
import time

__all__ = ["configure_logging", "TritonFormatter"]

_LEVEL_LETTER = {logging.DEBUG: "I", logging.INFO: "I", logging.WARNING: "W", logging.ERROR: "E", logging.CRITICAL: "E"}


class TritonFormatter(logging.Formatter):
    """glog-style lines, as Triton prints them."""

    def __init__(self, prefix: str = "") -> None:
        super().__init__()
        self.prefix = f"{prefix}: " if prefix else ""

    def format(self, record: logging.LogRecord) -> str:
        tm = time.localtime(record.created)
        micros = int((record.created % 1) * 1_000_000)
        letter = _LEVEL_LETTER.get(record.levelno, "I")
        head = (
            f"{letter}{tm.tm_mon:02d}{tm.tm_mday:02d} {tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d}."
            f"{micros:06d} {os.getpid()} {record.filename}:{record.lineno}] "
        )
        text = self.prefix + record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return head + text


def configure_logging(verbose: int = 0, prefix: str = "") -> None:
    """Send the ``tritium`` loggers to stderr in Triton's format.

    :param verbose: ``--log-verbose`` level; > 0 logs DEBUG lines too.
    :param prefix: text put before every message (workers name their model).
    """
    logger = logging.getLogger("tritium")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TritonFormatter(prefix))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose > 0 else logging.INFO)
    logger.propagate = False
