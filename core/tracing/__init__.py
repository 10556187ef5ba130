"""Triton's trace extension: which requests are traced, and where their traces go.

:class:`Tracer` holds the global trace settings and the per-model overrides
(:mod:`.settings`), samples requests (one in ``trace_rate``, ``trace_count``
at most), and hands each finished :class:`~.trace.Trace` to its sink: the JSON
trace file in ``triton`` mode (written every ``log_frequency`` traces to
``<trace_file>.<n>``, or to ``<trace_file>`` at shutdown when it is 0), or
OTLP spans in ``opentelemetry`` mode (:mod:`.otel`). With every level OFF
(the default), :attr:`Tracer.enabled` is False and a frontend does nothing
more per request than read it. Runs on the core's event loop.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..errors import Code, TritonError
from .settings import CONFIGURABLE, LEVELS, TraceSettings, parse_update, parse_value
from .trace import Trace, dump_traces

log = logging.getLogger("tritium.trace")

__all__ = ["Tracer", "Trace", "TraceSettings", "LEVELS", "parse_trace_config"]


def parse_trace_config(items: list[str], base: TraceSettings | None = None) -> tuple[TraceSettings, dict[str, str]]:
    """``--trace-config`` values (``[<mode>,]<setting>=<value>``) into settings and the OpenTelemetry options.

    Triton's forms: ``level=TIMESTAMPS``, ``rate=1``, ``count=-1``, ``log_frequency=0`` (or
    ``triton,log-frequency=0``),
    ``mode=triton|opentelemetry``, ``triton,file=<path>``, ``opentelemetry,url=<OTLP/HTTP url>``,
    ``opentelemetry,resource=<key>=<value>``, ``opentelemetry,bsp_max_export_batch_size=<n>``...

    :raises ValueError: for a malformed item or a bad value (the message names it).
    """
    settings = base or TraceSettings()
    otel: dict[str, str] = {}
    levels: list[str] = []
    for item in items:
        mode, comma, rest = item.partition(",")
        if comma and "=" not in mode:
            scope, setting = mode, rest
        else:
            scope, setting = "", item
        key, eq, value = setting.partition("=")
        if key == "log-frequency":  # Triton's spelling in its docs (``triton,log-frequency=<n>``)
            key = "log_frequency"
        if not eq or not key:
            raise ValueError(f"--trace-config option format is '[<mode>,]<setting>=<value>'. Got {item}")
        if scope not in ("", "triton", "opentelemetry"):
            raise ValueError(
                f"unknown trace mode '{scope}' in --trace-config {item} (expected triton or opentelemetry)"
            )
        if scope == "opentelemetry":
            otel[key] = value
            continue
        if key == "file":
            settings.file = value
        elif key == "mode":
            if value not in ("triton", "opentelemetry"):
                raise ValueError(f"unknown trace mode '{value}' (expected triton or opentelemetry)")
            settings.mode = value
        elif key == "level":
            if value.upper() not in LEVELS:
                raise ValueError(f"unknown trace level '{value}' (expected {', '.join(LEVELS)})")
            levels.append(value.upper())
        elif key in ("rate", "count", "log_frequency"):
            try:
                settings.set(
                    "trace_" + key if key != "log_frequency" else key,
                    parse_value("trace_" + key if key != "log_frequency" else key, value),
                )
            except TritonError as exc:
                raise ValueError(exc.message) from None
        else:
            raise ValueError(f"unknown --trace-config setting '{key}' in {item}")
    if levels:
        settings.level = [v for v in LEVELS[1:] if v in levels] or ["OFF"]
    return settings, otel


def _check_writable(path: str) -> None:
    """Fail at start-up when the trace file cannot be written, leaving no file behind: Triton 2.51
    makes no file before it writes traces (``<file>`` at shutdown, or only ``<file>.<n>`` with
    ``log_frequency``).

    :raises TritonError: INTERNAL naming the file and the reason.
    """
    existed = os.path.exists(path)
    try:
        open(path, "a").close()
        if not existed:
            os.remove(path)
    except OSError as exc:
        raise TritonError(Code.INTERNAL, f"cannot open trace file '{path}': {exc}") from None


class Tracer:
    """The trace settings and sinks of one server.

    :param settings: the command line's settings (what a null setting goes back to).
    :param otel: ``opentelemetry,<key>=<value>`` options (``url``, ``resource``...).
    :param known_model: tells whether a model name is in the repository.
    :raises TritonError: UNAVAILABLE when ``opentelemetry`` mode is asked and
        ``opentelemetry-sdk`` is not installed.
    """

    def __init__(
        self,
        settings: TraceSettings,
        otel: dict[str, str] | None = None,
        known_model: Callable[[str], bool] = lambda name: True,
    ) -> None:
        self._startup = replace(settings, level=list(settings.level))
        self.global_settings = replace(settings, level=list(settings.level))
        self._overrides: dict[str, dict[str, Any]] = {}
        self._models: dict[str, TraceSettings] = {}
        self._seen: dict[int, int] = {}
        self._known = known_model
        self._next_id = 1
        self._collected: list[Trace] = []
        self._file_index = 0
        self.exporter: Any = None
        if settings.mode == "opentelemetry":
            from .otel import OtlpExporter

            self.exporter = OtlpExporter(otel or {})
        elif settings.file:
            _check_writable(settings.file)
        if settings.mode == "triton" and not settings.file and settings.on:
            log.warning(
                "tracing is on but no trace file is given (--trace-config triton,file=PATH): traces are dropped"
            )
        #: whether any request may be traced (read by the frontends per request)
        self.enabled = False
        self._refresh()

    # -- settings ------------------------------------------------------------------------
    def _refresh(self) -> None:
        for name, override in self._overrides.items():
            effective = self._models.get(name)
            values = replace(self.global_settings, level=list(self.global_settings.level))
            for key, value in override.items():
                values.set(key, value)
            if effective is None:
                self._models[name] = values
            else:  # keep the object (its sampling counter); take the new values
                for key in CONFIGURABLE:
                    if key != "trace_count" or "trace_count" in override:
                        effective.set(key, getattr(values, _ATTR[key]))
        self.enabled = self.global_settings.on or any(s.on for s in self._models.values())

    def _check_model(self, model: str) -> None:
        if not self._known(model):
            raise TritonError(Code.INVALID_ARG, f"Request for unknown model : {model}")

    def settings(self, model: str = "") -> dict[str, Any]:
        """The settings of ``model`` ("" = the global ones) as Triton answers them.

        :raises TritonError: INVALID_ARG for an unknown model (Triton's message).
        """
        if not model:
            return self.global_settings.to_json()
        self._check_model(model)
        effective = self._models.get(model)
        if effective is None:
            return self.global_settings.to_json()
        out = effective.to_json()
        if "trace_count" not in self._overrides.get(model, {}):
            out["trace_count"] = str(self.global_settings.count)
        return out

    def update(self, model: str, body: Any) -> dict[str, Any]:
        """Apply a ``POST .../trace/setting`` body (all or nothing) and answer the new settings.

        :raises TritonError: as :func:`~.settings.parse_update`, or for an unknown model.
        """
        if model:
            self._check_model(model)
        changes = parse_update(body)
        level = changes.get("trace_level")
        if level and level != ["OFF"] and self.exporter is None and not self.global_settings.file:
            raise TritonError(Code.INVALID_ARG, "Attempting to set invalid trace setting :trace file name is not given")
        if model:
            override = self._overrides.setdefault(model, {})
            for key, value in changes.items():
                if value is None:
                    override.pop(key, None)
                else:
                    override[key] = value
            if not override:
                del self._overrides[model]
                self._models.pop(model, None)
        else:
            for key, value in changes.items():
                self.global_settings.set(key, getattr(self._startup, _ATTR[key]) if value is None else value)
        self._refresh()
        if not self.enabled and self._collected:
            self.flush()
        return self.settings(model)

    # -- requests --------------------------------------------------------------------------
    def sample(self, model: str, request_id: str, protocol: str, parent: str | None = None) -> Trace | None:
        """A new trace for a request to ``model`` when it is to be traced, else None.

        Call only while :attr:`enabled`. One request in ``trace_rate`` is traced, the first included.
        """
        settings = self._models.get(model, self.global_settings)
        if not settings.on:
            return None
        key = id(settings)
        seen = self._seen.get(key, 0)
        self._seen[key] = seen + 1
        if seen % settings.rate:
            return None
        owner = settings if "trace_count" in self._overrides.get(model, {}) else self.global_settings
        if owner.count > 0:
            owner.count -= 1
        trace = Trace(self._next_id, model, -1, request_id, protocol, settings, parent)
        self._next_id += 1
        if owner.count == 0:
            self.enabled = self.global_settings.on or any(s.on for s in self._models.values())
        return trace

    def finish(self, trace: Trace) -> None:
        """``trace``'s request is answered: export it, or collect it for the trace file."""
        if self.exporter is not None:
            self.exporter.export(trace)
            return
        if not self.global_settings.file:
            return
        self._collected.append(trace)
        frequency = trace.settings.log_frequency
        exhausted = trace.settings.count == 0 or self.global_settings.count == 0
        if (frequency and len(self._collected) >= frequency) or exhausted:
            self.flush()

    def flush(self, final: bool = False) -> None:
        """Write the collected traces: to ``<trace_file>.<n>`` (a new ``n`` each time) when
        ``log_frequency`` > 0, else (at shutdown) to ``<trace_file>``."""
        path = self.global_settings.file
        if not path or not self._collected:
            return
        traces, self._collected = self._collected, []
        if self.global_settings.log_frequency == 0 and final:
            target = path
        else:
            target = f"{path}.{self._file_index}"
            self._file_index += 1
        # written beside it under a hidden name, then renamed: a reader never sees a half-written file
        partial = os.path.join(os.path.dirname(target) or ".", f".{os.path.basename(target)}.partial")
        try:
            with open(partial, "w", encoding="utf-8") as out:
                out.write(dump_traces(traces))
            os.replace(partial, target)
        except OSError as exc:
            log.error("writing trace file %s failed: %s", target, exc)

    def close(self) -> None:
        """At shutdown: write what is collected; flush and stop the OTLP exporter."""
        self.flush(final=True)
        if self.exporter is not None:
            self.exporter.shutdown()


_ATTR = {"trace_level": "level", "trace_rate": "rate", "trace_count": "count", "log_frequency": "log_frequency"}
