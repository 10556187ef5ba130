"""Trace settings of Triton's trace extension: global ones, per-model overrides, and their checks.

The settings are Triton's: ``trace_level`` (a list of ``OFF``, ``TIMESTAMPS``,
``TENSORS``), ``trace_rate`` (trace one request in every N), ``trace_count``
(how many more requests to trace; -1 = no limit), ``log_frequency`` (write
the collected traces to a new file every N traces; 0 = at shutdown),
``trace_file`` and ``trace_mode`` (``triton`` or ``opentelemetry``; both set
from the command line only). Values travel as strings, as Triton's JSON and
gRPC ``TraceSetting`` carry them. A model's settings are the global ones with
its overrides laid over them; an override set to null (an empty value list
over gRPC) is removed, and the model follows the global setting again. A
global setting set to null goes back to its command-line value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import Code, TritonError

__all__ = ["TraceSettings", "LEVELS", "parse_update", "CONFIGURABLE"]

#: trace levels, as Triton names them
LEVELS = ("OFF", "TIMESTAMPS", "TENSORS")
#: settings a client may change (``trace_file`` and ``trace_mode`` are refused)
CONFIGURABLE = ("trace_level", "trace_rate", "trace_count", "log_frequency")
_U32 = (1 << 32) - 1


@dataclass(slots=True)
class TraceSettings:
    """One complete set of trace settings.

    :ivar level: the trace levels (``["OFF"]``, ``["TIMESTAMPS"]``, ``["TIMESTAMPS", "TENSORS"]``).
    :ivar rate: one request in ``rate`` is traced (>= 1).
    :ivar count: requests still to trace (-1: no limit; 0: tracing stopped).
    :ivar log_frequency: traces collected before they are written to a new file (0: at shutdown).
    :ivar file: the trace file ("": none).
    :ivar mode: ``triton`` (the JSON trace file) or ``opentelemetry`` (OTLP export).
    """

    level: list[str] = field(default_factory=lambda: ["OFF"])
    rate: int = 1000
    count: int = -1
    log_frequency: int = 0
    file: str = ""
    mode: str = "triton"

    @property
    def timestamps(self) -> bool:
        """Whether timestamps are recorded."""
        return "TIMESTAMPS" in self.level

    @property
    def tensors(self) -> bool:
        """Whether tensors are recorded."""
        return "TENSORS" in self.level

    @property
    def on(self) -> bool:
        """Whether requests are traced at all (a level other than OFF and a count left)."""
        return (self.timestamps or self.tensors) and self.count != 0

    def to_json(self) -> dict[str, Any]:
        """The settings as Triton's ``GET .../trace/setting`` answers them (numbers as strings)."""
        return {
            "trace_level": list(self.level),
            "trace_rate": str(self.rate),
            "trace_count": str(self.count),
            "log_frequency": str(self.log_frequency),
            "trace_file": self.file,
            "trace_mode": self.mode,
        }

    def set(self, key: str, value: Any) -> None:
        """Set one parsed value (see :func:`parse_update`)."""
        if key == "trace_level":
            self.level = value
        elif key == "trace_rate":
            self.rate = value
        elif key == "trace_count":
            self.count = value
        elif key == "log_frequency":
            self.log_frequency = value


def _unsigned(key: str, text: str) -> int:
    if not text.strip().isdigit():
        raise TritonError(Code.INVALID_ARG, f"Unable to parse '{key}', got: {text}")
    value = int(text)
    if value > _U32:
        raise TritonError(Code.INVALID_ARG, f"Unable to parse '{key}', got: {text}")
    return value


def parse_value(key: str, value: Any) -> Any:
    """One setting's new value from its JSON form (None: clear it).

    :raises TritonError: UNSUPPORTED for ``trace_file`` and ``trace_mode`` (as Triton);
        INVALID_ARG for a value of the wrong type or out of range, with Triton's messages.
    """
    if key in ("trace_file", "trace_mode"):
        what = "trace file location" if key == "trace_file" else "trace mode"
        raise TritonError(Code.UNSUPPORTED, f"{what} can not be updated through network protocol")
    if value is None:
        return None
    if key == "trace_level":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TritonError(Code.INVALID_ARG, "expected an array of strings for 'trace_level'")
        if not value:
            return None
        for level in value:
            if level not in LEVELS:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"Attempting to set invalid trace setting :unknown trace level '{level}' "
                    f"(expected {', '.join(LEVELS)})",
                )
        levels = [v for v in LEVELS[1:] if v in value]
        return levels or ["OFF"]
    if isinstance(value, list) and len(value) == 1:  # gRPC's value lists, and Triton's JSON accepts them
        value = value[0]
    if not isinstance(value, str):
        raise TritonError(Code.INVALID_ARG, f"expected a string for '{key}', got: {value!r}")
    if key == "trace_count":
        text = value.strip()
        if not text.lstrip("-").isdigit():
            raise TritonError(Code.INVALID_ARG, f"Unable to parse 'trace_count', got: {value}")
        count = int(text)
        if count < -1:
            raise TritonError(Code.INVALID_ARG, f"Unable to parse 'trace_count'. Expecting value >= -1, got:{value}")
        return count
    number = _unsigned(key, value)
    if key == "trace_rate" and number == 0:
        raise TritonError(Code.INVALID_ARG, "Attempting to set invalid trace setting :sample rate must be non-zero")
    return number


def parse_update(body: Any) -> dict[str, Any]:
    """A ``POST .../trace/setting`` body as ``{key: parsed value or None}`` (unknown keys ignored,
    as in Triton). Checked completely before anything changes.

    :raises TritonError: as :func:`parse_value`; INVALID_ARG for a body that is not a JSON object.
    """
    if not isinstance(body, dict):
        raise TritonError(Code.INVALID_ARG, "the trace settings must be a JSON object")
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key in CONFIGURABLE or key in ("trace_file", "trace_mode"):
            out[key] = parse_value(key, value)
    return out
