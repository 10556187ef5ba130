"""``--trace-config mode=opentelemetry``: traced requests as OpenTelemetry spans, sent over OTLP/HTTP.

Spans are built with ``opentelemetry-sdk`` (the ``trace`` extra) and batched by its
``BatchSpanProcessor``; the exporter posts OTLP/HTTP protobuf
(``ExportTraceServiceRequest``, ``opentelemetry-proto``) to
``opentelemetry,url=<url>`` (default ``http://localhost:4318/v1/traces``). It
is written here over ``opentelemetry-proto`` rather than taken from
``opentelemetry-exporter-otlp-proto-http`` because that package pins a
protobuf major version the gRPC code generation of this project cannot use.

Each traced request gives three spans, as Triton's OpenTelemetry mode does: a
root ``InferRequest`` span (the HTTP/gRPC receive and send events), a child
span named after the model (``REQUEST_START``, ``QUEUE_START``,
``INFER_RESPONSE_COMPLETE``, ``REQUEST_END`` events) and under it a
``compute`` span (``COMPUTE_START`` ... ``COMPUTE_END``). A client's W3C
``traceparent`` header makes the root span a child of the client's span, in
the client's trace. Spans are built on the event loop; the exporter's thread
sends them.
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from ..errors import Code, TritonError
from .trace import Trace

log = logging.getLogger("tritium.trace")

__all__ = ["OtlpExporter", "DEFAULT_URL"]

DEFAULT_URL = "http://localhost:4318/v1/traces"
_COMPUTE = ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")
_REQUEST = ("REQUEST_START", "QUEUE_START", "INFER_RESPONSE_COMPLETE", "REQUEST_END")


def _any_value(value: Any) -> Any:
    from opentelemetry.proto.common.v1 import common_pb2

    if isinstance(value, bool):
        return common_pb2.AnyValue(bool_value=value)
    if isinstance(value, int):
        return common_pb2.AnyValue(int_value=value)
    if isinstance(value, float):
        return common_pb2.AnyValue(double_value=value)
    return common_pb2.AnyValue(string_value=str(value))


def _attributes(attrs: Any) -> list[Any]:
    from opentelemetry.proto.common.v1 import common_pb2

    return [common_pb2.KeyValue(key=k, value=_any_value(v)) for k, v in (attrs or {}).items()]


def encode_spans(spans: Sequence[Any]) -> bytes:
    """An OTLP ``ExportTraceServiceRequest`` (serialized) of ``opentelemetry-sdk`` ``ReadableSpan`` s."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.resource.v1 import resource_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2

    request = trace_service_pb2.ExportTraceServiceRequest()
    by_resource: dict[int, Any] = {}
    for span in spans:
        resource_spans = by_resource.get(id(span.resource))
        if resource_spans is None:
            resource_spans = request.resource_spans.add(
                resource=resource_pb2.Resource(attributes=_attributes(span.resource.attributes))
            )
            resource_spans.scope_spans.add(scope=common_pb2.InstrumentationScope(name="tritium"))
            by_resource[id(span.resource)] = resource_spans
        out = resource_spans.scope_spans[0].spans.add(
            trace_id=span.context.trace_id.to_bytes(16, "big"),
            span_id=span.context.span_id.to_bytes(8, "big"),
            name=span.name,
            kind=trace_pb2.Span.SpanKind.SPAN_KIND_SERVER
            if span.parent is None or span.parent.is_remote
            else trace_pb2.Span.SpanKind.SPAN_KIND_INTERNAL,
            start_time_unix_nano=span.start_time or 0,
            end_time_unix_nano=span.end_time or 0,
            attributes=_attributes(span.attributes),
        )
        if span.parent is not None:
            out.parent_span_id = span.parent.span_id.to_bytes(8, "big")
        for event in span.events:
            out.events.add(time_unix_nano=event.timestamp, name=event.name, attributes=_attributes(event.attributes))
        if span.status.status_code.name == "ERROR":
            out.status.code = trace_pb2.Status.StatusCode.STATUS_CODE_ERROR
            out.status.message = span.status.description or ""
    return request.SerializeToString()


class OtlpExporter:
    """Turns finished traces into spans and exports them (one per server).

    :param options: the ``--trace-config opentelemetry,<key>=<value>`` options: ``url``,
        ``resource`` (``<key>=<value>``, repeatable as ``resource=a=1,b=2``),
        ``bsp_max_queue_size``, ``bsp_schedule_delay`` (ms), ``bsp_max_export_batch_size``.
    :raises TritonError: UNAVAILABLE when ``opentelemetry-sdk`` or ``opentelemetry-proto`` is missing.
    """

    def __init__(self, options: dict[str, str]) -> None:
        try:
            from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError as exc:
            raise TritonError(
                Code.UNAVAILABLE,
                f"--trace-config mode=opentelemetry needs opentelemetry-sdk and opentelemetry-proto "
                f"(pip install 'tritium[trace]'): {exc}",
            ) from None
        url = options.get("url", DEFAULT_URL)
        if "://" not in url:
            url = "http://" + url
        resource: dict[str, str] = {"service.name": "triton-inference-server"}
        for item in options.get("resource", "").split(","):
            key, eq, value = item.partition("=")
            if eq and key:
                resource[key.strip()] = value
        timeout = 10.0

        class _Exporter(SpanExporter):
            def export(self, spans: Sequence[Any]) -> Any:
                body = encode_spans(spans)
                req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/x-protobuf"})
                try:
                    with urllib.request.urlopen(req, timeout=timeout) as answer:
                        answer.read(1 << 16)
                except (urllib.error.URLError, OSError) as exc:
                    log.warning("OTLP export to %s failed: %s", url, exc)
                    return SpanExportResult.FAILURE
                return SpanExportResult.SUCCESS

        def _int(key: str, default: int) -> int:
            try:
                return int(options.get(key, default))
            except ValueError:
                raise TritonError(Code.INVALID_ARG, f"--trace-config opentelemetry,{key} must be an integer") from None

        self.provider = TracerProvider(resource=Resource.create(resource))
        self.provider.add_span_processor(
            BatchSpanProcessor(
                _Exporter(),
                max_queue_size=_int("bsp_max_queue_size", 2048),
                schedule_delay_millis=_int("bsp_schedule_delay", 5000),
                max_export_batch_size=_int("bsp_max_export_batch_size", 512),
            )
        )
        self.tracer = self.provider.get_tracer("tritium")
        self.propagator = TraceContextTextMapPropagator()
        self.url = url
        # perf_counter_ns (the trace's clock) to Unix time
        self._offset = time.time_ns() - time.perf_counter_ns()

    def export(self, trace: Trace) -> None:
        """Queue ``trace``'s spans for export (on the event loop; the sending happens in the SDK's thread)."""
        from opentelemetry.trace import Status, StatusCode

        offset = self._offset
        stamps = sorted(trace.timestamps, key=lambda item: item[1])
        if not stamps:
            return
        times = dict(stamps)
        context = self.propagator.extract({"traceparent": trace.parent}) if trace.parent else None
        root = self.tracer.start_span("InferRequest", context=context, start_time=stamps[0][1] + offset)
        root.set_attribute("triton.trace_id", trace.id)
        root.set_attribute("triton.protocol", trace.protocol)
        if trace.request_id:
            root.set_attribute("triton.request_id", trace.request_id)
        from opentelemetry import trace as otel_trace

        root_context = otel_trace.set_span_in_context(root)
        for name, ns in stamps:
            if name.startswith(trace.protocol + "_"):
                root.add_event(name, timestamp=ns + offset)
        start = times.get("REQUEST_START", stamps[0][1])
        end = times.get("REQUEST_END", stamps[-1][1])
        model = self.tracer.start_span(trace.model_name, context=root_context, start_time=start + offset)
        model.set_attribute("triton.model_name", trace.model_name)
        model.set_attribute("triton.model_version", trace.model_version)
        if trace.request_id:
            model.set_attribute("triton.request_id", trace.request_id)
        for name in _REQUEST:
            if name in times:
                model.add_event(name, timestamp=times[name] + offset)
        if "COMPUTE_START" in times:
            compute = self.tracer.start_span(
                "compute", context=otel_trace.set_span_in_context(model), start_time=times["COMPUTE_START"] + offset
            )
            for name in _COMPUTE:
                if name in times:
                    compute.add_event(name, timestamp=times[name] + offset)
            compute.end(end_time=times.get("COMPUTE_END", times["COMPUTE_START"]) + offset)
        if trace.error:
            model.set_status(Status(StatusCode.ERROR, trace.error))
            root.set_status(Status(StatusCode.ERROR, trace.error))
        model.end(end_time=end + offset)
        root.end(end_time=stamps[-1][1] + offset)

    def shutdown(self) -> None:
        """Send what is queued and stop the exporter's thread."""
        self.provider.shutdown()
