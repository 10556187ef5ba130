"""Unit tests of the trace settings, the log manager, the worker log relay and the latency summaries."""

from __future__ import annotations

import json
import logging
import math

import pytest

from tritium.core.errors import Code, TritonError
from tritium.core.observability.logging import WORKER_RECORD, LogManager, TritonFormatter, relay_worker_line
from tritium.core.observability.stats import LatencySummaries, parse_metrics_config
from tritium.core.tracing import Tracer, TraceSettings, parse_trace_config
from tritium.frontends.metrics.system import read_cpu_times, read_memory


def test_tracing_is_off_by_default_and_costs_one_read() -> None:
    tracer = Tracer(TraceSettings())
    assert tracer.enabled is False  # the frontends read only this attribute per request
    assert tracer.settings()["trace_level"] == ["OFF"]


def test_trace_config_flags() -> None:
    settings, otel = parse_trace_config(
        [
            "level=TIMESTAMPS",
            "level=TENSORS",
            "rate=5",
            "count=3",
            "log_frequency=2",
            "triton,file=/tmp/t.json",
            "mode=opentelemetry",
            "opentelemetry,url=http://h:4318/v1/traces",
        ]
    )
    assert settings.level == ["TIMESTAMPS", "TENSORS"] and settings.rate == 5 and settings.count == 3
    assert settings.log_frequency == 2 and settings.file == "/tmp/t.json" and settings.mode == "opentelemetry"
    assert otel == {"url": "http://h:4318/v1/traces"}
    for bad, message in [
        ("rate=0", "sample rate must be non-zero"),
        ("level=x", "unknown trace level"),
        ("count=-2", "Expecting value >= -1"),
        ("jaeger,url=x", "unknown trace mode"),
        ("colour=blue", "unknown --trace-config setting"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_trace_config([bad])


def test_sampling_rate_and_count() -> None:
    tracer = Tracer(TraceSettings(level=["TIMESTAMPS"], rate=3, count=2))
    assert tracer.enabled
    sampled = [tracer.sample("m", "", "HTTP") is not None for _ in range(9)]
    assert sampled == [True, False, False, True, False, False, False, False, False]
    assert tracer.settings()["trace_count"] == "0" and not tracer.enabled


def test_model_override_is_all_or_nothing() -> None:
    tracer = Tracer(TraceSettings(level=["TIMESTAMPS"], rate=1), known_model=lambda name: name == "m")
    with pytest.raises(TritonError) as info:
        tracer.update("m", {"trace_rate": "2", "trace_count": "-9"})
    assert info.value.code == Code.INVALID_ARG
    assert tracer.settings("m")["trace_rate"] == "1"
    with pytest.raises(TritonError, match="Request for unknown model : x"):
        tracer.settings("x")


def test_log_manager_update_is_all_or_nothing() -> None:
    manager = LogManager()
    with pytest.raises(TritonError) as info:
        manager.update({"log_info": False, "log_format": "xml"})
    assert info.value.code == Code.INVALID_ARG and manager.log_info is True
    assert manager.update({"log_info": None, "unknown": 1, "log_verbose_level": 3})["log_verbose_level"] == 3
    with pytest.raises(TritonError) as info:
        manager.update({"log_file": "/tmp/x"})
    assert info.value.code == Code.UNSUPPORTED


def _record(message: str, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("tritium.x", logging.WARNING, "/a/b/server.py", 12, message, None, None)
    record.created = 1764691200.25  # 2025-12-02T16:00:00.25Z
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_formats() -> None:
    record = _record("hello", model="m", instance="m_0", worker_pid=77)
    data = json.loads(TritonFormatter(fmt="json").format(record))
    assert data == {
        "time": "2025-12-02T16:00:00.250000Z",
        "level": "WARNING",
        "pid": 77,
        "source": "server.py:12",
        "model": "m",
        "instance": "m_0",
        "request_id": None,
        "message": "hello",
    }
    assert TritonFormatter(fmt="ISO8601").format(record) == "2025-12-02T16:00:00Z W 77 server.py:12] m (m_0): hello"
    assert TritonFormatter().format(record).endswith(" 77 server.py:12] m (m_0): hello")


def test_relay_keeps_level_source_and_model() -> None:
    records: list[logging.LogRecord] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("tritium.worker")
    handler, level, propagate = _Keep(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        relay_worker_line(WORKER_RECORD + json.dumps({"l": 40, "s": "model.py:9", "m": "add", "t": "boom"}), "add_0", 5)
        relay_worker_line("a plain print", "add_0", 5)
        relay_worker_line(WORKER_RECORD + "{not json", "add_0", 5)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
    first, second, third = records
    assert (first.levelno, first.filename, first.lineno, first.getMessage()) == (40, "model.py", 9, "boom")
    assert (first.model, first.instance, first.worker_pid) == ("add", "add_0", 5)  # type: ignore[attr-defined]
    assert (second.levelno, second.getMessage()) == (logging.INFO, "a plain print")
    assert third.getMessage().endswith("{not json")


def test_latency_summaries() -> None:
    summaries = LatencySummaries(((0.5, 0.05), (0.99, 0.001)))
    assert all(math.isnan(v) for _q, v in summaries.quantiles("request"))
    for us in range(1, 101):
        summaries.observe(us * 1000, 0, 0, 0, 0)
    assert summaries.count["request"] == 100 and summaries.sum_us["request"] == 5050.0
    assert summaries.quantiles("request") == [(0.5, 51.0), (0.99, 100.0)]


def test_metrics_config() -> None:
    assert parse_metrics_config({}) == {
        "summary_latencies": False,
        "summary_quantiles": ((0.5, 0.05), (0.9, 0.01), (0.95, 0.001), (0.99, 0.001), (0.999, 0.0001)),
        "counter_latencies": True,
    }
    assert parse_metrics_config({"summary_quantiles": "0.5:0.1,0.75:0.01"})["summary_quantiles"] == (
        (0.5, 0.1),
        (0.75, 0.01),
    )


def test_proc_readers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    stat = tmp_path / "stat"
    stat.write_text("cpu  10 0 5 80 5 0 0 0 0 0\ncpu0 1 2 3 4\n")
    assert read_cpu_times(str(stat)) == (15, 100)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\n")
    assert read_memory(str(meminfo)) == (1024000, 614400)
    assert read_cpu_times(str(tmp_path / "missing")) is None and read_memory(str(tmp_path / "missing")) is None
