"""Log settings shared by the core and the workers, and Triton's logging extension.

Lines look like Triton's (glog style): ``I1130 04:24:53.123456 1234 server.py:88] message``,
with the level letter, month/day, time in microseconds, process id and the
source location. ``--log-format ISO8601`` starts lines with
``2026-11-30T04:24:53Z I 1234 server.py:88] ``, as Triton does, and ``json``
(tritium's addition, for log pipelines) writes one JSON object a line:
``{"time", "level", "pid", "source", "model", "instance", "request_id", "message"}``.

The settings are those of Triton's logging extension (``GET/POST /v2/logging``,
gRPC ``LogSettings``): ``log_file``, ``log_info``, ``log_warning``,
``log_error``, ``log_verbose_level`` and ``log_format``; :class:`LogManager`
holds them in the core process and applies a change at once. Workers do not
write the log themselves: they send their records over their stderr pipe in
:data:`WORKER_RECORD` lines, and the core logs them (:func:`relay_worker_line`)
through the same handler, naming the model and the instance.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from typing import Any

from ..errors import Code, TritonError

__all__ = [
    "configure_logging",
    "configure_worker_logging",
    "set_worker_log_context",
    "TritonFormatter",
    "LogManager",
    "LOG_FORMATS",
    "WORKER_RECORD",
    "relay_worker_line",
    "log_manager",
]

_LEVEL_LETTER = {logging.DEBUG: "I", logging.INFO: "I", logging.WARNING: "W", logging.ERROR: "E", logging.CRITICAL: "E"}
_LEVEL_NAME = {
    logging.DEBUG: "VERBOSE",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "ERROR",
}
#: ``--log-format`` values: Triton's two and tritium's ``json``
LOG_FORMATS = ("default", "ISO8601", "json")
#: the start of a worker's log record on its stderr (the rest of the line is JSON)
WORKER_RECORD = "\x1etritium-log "


def _context(record: logging.LogRecord) -> str:
    """``<model> (<instance>): `` for a worker's record (or the old plain prefix)."""
    model = getattr(record, "model", "")
    instance = getattr(record, "instance", "")
    if model and instance:
        return f"{model} ({instance}): "
    return f"{model or instance}: " if (model or instance) else ""


class TritonFormatter(logging.Formatter):
    """Triton's line formats: ``default`` (glog style), ``ISO8601``, or ``json`` (tritium).

    :param prefix: text put before every message (a worker logging to its own stderr).
    :param fmt: one of :data:`LOG_FORMATS`.
    """

    def __init__(self, prefix: str = "", fmt: str = "default") -> None:
        super().__init__()
        self.prefix = f"{prefix}: " if prefix else ""
        self.fmt = fmt

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        pid = getattr(record, "worker_pid", None) or os.getpid()
        if self.fmt == "json":
            return json.dumps(
                {
                    "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                    + f".{int((record.created % 1) * 1_000_000):06d}Z",
                    "level": _LEVEL_NAME.get(record.levelno, "INFO"),
                    "pid": pid,
                    "source": f"{record.filename}:{record.lineno}",
                    "model": getattr(record, "model", "") or None,
                    "instance": getattr(record, "instance", "") or None,
                    "request_id": getattr(record, "request_id", "") or None,
                    "message": text,
                }
            )
        letter = _LEVEL_LETTER.get(record.levelno, "I")
        if self.fmt == "ISO8601":
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
            head = f"{stamp} {letter} {pid} {record.filename}:{record.lineno}] "
        else:
            tm = time.localtime(record.created)
            micros = int((record.created % 1) * 1_000_000)
            head = (
                f"{letter}{tm.tm_mon:02d}{tm.tm_mday:02d} {tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d}."
                f"{micros:06d} {pid} {record.filename}:{record.lineno}] "
            )
        return head + self.prefix + _context(record) + text


class _LevelFilter(logging.Filter):
    """Triton's per-level switches (``log_info``, ``log_warning``, ``log_error``, verbose > 0)."""

    def __init__(self, manager: LogManager) -> None:
        super().__init__()
        self.manager = manager

    def filter(self, record: logging.LogRecord) -> bool:
        m = self.manager
        level = record.levelno
        if level >= logging.ERROR:
            return m.log_error
        if level >= logging.WARNING:
            return m.log_warning
        if level >= logging.INFO:
            return m.log_info
        return m.log_verbose_level > 0


class LogManager:
    """The log settings of the core process (Triton's logging extension); runs on the event loop.

    :param log_file: file the log goes to ("": stderr); set from the command line only.
    :param log_info / log_warning / log_error: whether lines of that level are written.
    :param log_verbose_level: > 0 writes verbose (debug) lines too.
    :param log_format: one of :data:`LOG_FORMATS`.
    :raises TritonError: INVALID_ARG for a format not in :data:`LOG_FORMATS`; INTERNAL when the
        log file cannot be opened.
    """

    def __init__(
        self,
        log_file: str = "",
        log_info: bool = True,
        log_warning: bool = True,
        log_error: bool = True,
        log_verbose_level: int = 0,
        log_format: str = "default",
    ) -> None:
        if log_format not in LOG_FORMATS:
            raise TritonError(Code.INVALID_ARG, f"invalid argument for --log-format, got: {log_format}")
        self.log_file = log_file
        self.log_info = log_info
        self.log_warning = log_warning
        self.log_error = log_error
        self.log_verbose_level = log_verbose_level
        self.log_format = log_format
        self._formatter = TritonFormatter(fmt=log_format)
        if log_file:
            try:
                handler: logging.Handler = logging.FileHandler(log_file, encoding="utf-8")
            except OSError as exc:
                raise TritonError(Code.INTERNAL, f"failed to open log file '{log_file}': {exc}") from None
        else:
            handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(self._formatter)
        handler.addFilter(_LevelFilter(self))
        self.handler = handler

    @classmethod
    def from_args(cls, args: Any) -> LogManager:
        """The settings of ``tritium-server``'s ``--log-*`` flags (``args``: its parsed command line).

        :raises TritonError: as the constructor.
        """
        return cls(
            args.log_file,
            args.log_info,
            args.log_warning,
            args.log_error,
            args.log_verbose,
            args.log_format or "default",
        )

    def install(self) -> None:
        """Make this the handler of the ``tritium`` loggers (replacing any earlier one) and the
        process's :func:`log_manager`."""
        global _installed
        _installed = self
        logger = logging.getLogger("tritium")
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.addHandler(self.handler)
        logger.propagate = False
        self._apply_level()

    def _apply_level(self) -> None:
        logging.getLogger("tritium").setLevel(logging.DEBUG if self.log_verbose_level > 0 else logging.INFO)

    def settings(self) -> dict[str, Any]:
        """The settings as Triton's ``GET /v2/logging`` answers them."""
        return {
            "log_file": self.log_file,
            "log_info": self.log_info,
            "log_warning": self.log_warning,
            "log_error": self.log_error,
            "log_verbose_level": self.log_verbose_level,
            "log_format": self.log_format,
        }

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Apply ``changes`` (a ``POST /v2/logging`` body; null values and unknown keys are ignored,
        as in Triton) all or nothing, and return the new settings.

        :raises TritonError: UNSUPPORTED for ``log_file`` (Triton: it cannot change over the network);
            INVALID_ARG for a value of the wrong type or a format not in :data:`LOG_FORMATS`.
        """
        new: dict[str, Any] = {}
        for key, value in changes.items():
            if value is None:
                continue
            if key == "log_file":
                raise TritonError(Code.UNSUPPORTED, "log file location can not be updated through network protocol")
            if key in ("log_info", "log_warning", "log_error"):
                if not isinstance(value, bool):
                    raise TritonError(Code.INVALID_ARG, f"expected a boolean for '{key}', got: {json.dumps(value)}")
                new[key] = value
            elif key == "log_verbose_level":
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 32:
                    raise TritonError(
                        Code.INVALID_ARG,
                        f"expected an unsigned integer for 'log_verbose_level', got: {json.dumps(value)}",
                    )
                new[key] = value
            elif key == "log_format":
                if value not in LOG_FORMATS:
                    raise TritonError(Code.INVALID_ARG, f"invalid argument for log_format, got: {value}")
                new[key] = value
        for key, value in new.items():
            setattr(self, key, value)
        self._formatter.fmt = self.log_format
        self._apply_level()
        logging.getLogger("tritium.logging").debug("log settings now: %s", self.settings())
        return self.settings()


_installed: LogManager | None = None


def log_manager() -> LogManager:
    """The process's log settings: the installed :class:`LogManager` (``tritium-server`` installs
    one from its flags), else a default one that applies changes to the ``tritium`` loggers
    once installed (an embedding application keeps its own logging until then)."""
    global _installed
    if _installed is None:
        _installed = LogManager()
    return _installed


def relay_worker_line(line: str, instance: str, pid: int | None) -> None:
    """Log one line of a worker's stderr through the core's handler (core process, event loop).

    A :data:`WORKER_RECORD` line keeps its level, source and model; any other line (a model's
    ``print``, a crash's traceback) is logged as information from ``instance``.
    """
    logger = logging.getLogger("tritium.worker")
    if line.startswith(WORKER_RECORD):
        try:
            data = json.loads(line[len(WORKER_RECORD) :])
            level, source, model, message = int(data["l"]), str(data["s"]), str(data.get("m", "")), str(data["t"])
            instance = str(data.get("i") or instance)  # a shared worker's record names its instance
        except (ValueError, KeyError, TypeError):
            level, source, model, message = logging.INFO, "worker:0", "", line
    else:
        level, source, model, message = logging.INFO, "worker:0", "", line
    if not logger.isEnabledFor(level):
        return
    filename, _, lineno = source.rpartition(":")
    record = logger.makeRecord(
        logger.name,
        level,
        filename,
        int(lineno) if lineno.isdigit() else 0,
        "%s",
        (message,),
        None,
        extra={"model": model, "instance": instance, "worker_pid": pid},
    )
    record.filename = filename
    logger.handle(record)


class _WorkerFormatter(logging.Formatter):
    """A worker's records as :data:`WORKER_RECORD` lines, for the core to relay.

    The model (and instance) a record names is the calling thread's (:func:`set_worker_log_context`:
    a shared worker runs each model instance on its own thread), else the worker's one model.
    """

    def __init__(self) -> None:
        super().__init__()
        self.model = ""
        self.context = threading.local()

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        model = getattr(self.context, "model", None) or self.model
        data = {"l": record.levelno, "s": f"{record.filename}:{record.lineno}", "m": model, "t": text}
        instance = getattr(self.context, "instance", None)
        if instance:
            data["i"] = instance
        return WORKER_RECORD + json.dumps(data)


_worker_formatter: _WorkerFormatter | None = None


def configure_worker_logging(verbose: int = 0, model: str | None = None) -> None:
    """In a worker process: send the ``tritium`` loggers' records to stderr as :data:`WORKER_RECORD` lines.

    :param verbose: the server's ``--log-verbose`` when the worker started; > 0 sends DEBUG lines too.
    :param model: the model the worker hosts, once known (records of every thread name it);
        None leaves it as it is.
    """
    global _worker_formatter
    if _worker_formatter is None:
        _worker_formatter = _WorkerFormatter()
        logger = logging.getLogger("tritium")
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_worker_formatter)
        logger.addHandler(handler)
        logger.propagate = False
    if model is not None:
        _worker_formatter.model = model
    logger = logging.getLogger("tritium")
    if verbose > 0 or logger.level == logging.DEBUG:  # the core filters; a worker only sends more
        logger.setLevel(logging.DEBUG)
    else:
        logger.setLevel(logging.INFO)


def set_worker_log_context(model: str, instance: str = "") -> None:
    """In a worker process: the model (and model instance) the calling thread's records name.

    A shared worker runs each model instance on its own thread; its records then name that
    instance, whatever the worker hosts. A no-op before :func:`configure_worker_logging`.
    """
    if _worker_formatter is not None:
        _worker_formatter.context.model = model
        _worker_formatter.context.instance = instance


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
