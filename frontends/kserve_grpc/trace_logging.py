"""gRPC ``TraceSetting`` and ``LogSettings``: Triton's trace and logging extensions.

The messages carry each setting as a ``SettingValue``: a list of strings for
trace settings (an empty list clears a setting), a bool, uint32 or string
for log settings. The settings themselves are the core's
(:class:`~tritium.core.tracing.Tracer`, :class:`~tritium.core.observability.logging.LogManager`);
a bad value is INVALID_ARGUMENT with Triton's message, ``trace_file`` and
``log_file`` are UNIMPLEMENTED, as in Triton. Runs on the core's event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...core.api import TritonError
from ...proto import grpc_service_pb2 as pb
from ..base import grpc_status

if TYPE_CHECKING:  # pragma: no cover
    from ...core.api import ServerAPI

__all__ = ["TraceLoggingRpcs"]


def _trace_response(settings: dict[str, Any]) -> pb.TraceSettingResponse:
    response = pb.TraceSettingResponse()
    for key, value in settings.items():
        response.settings[key].value.extend(value if isinstance(value, list) else [value])
    return response


def _log_response(settings: dict[str, Any]) -> pb.LogSettingsResponse:
    response = pb.LogSettingsResponse()
    for key, value in settings.items():
        entry = response.settings[key]
        if isinstance(value, bool):
            entry.bool_param = value
        elif isinstance(value, int):
            entry.uint32_param = value
        else:
            entry.string_param = value
    return response


def _answer(context: Any, empty: Any, call: Callable[[], Any]) -> Any:
    """``call()``'s response, or ``empty`` with the gRPC status of the TritonError it raised."""
    try:
        return call()
    except TritonError as exc:
        context.set_code(grpc_status(exc.code))
        context.set_details(exc.message)
        return empty


def _trace_update(request: pb.TraceSettingRequest) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for key, setting in request.settings.items():
        values = list(setting.value)
        if not values:
            body[key] = None  # an empty list clears the setting
        elif key == "trace_level":
            body[key] = values
        else:
            body[key] = values[0] if len(values) == 1 else values
    return body


def _log_update(request: pb.LogSettingsRequest) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for key, setting in request.settings.items():
        kind = setting.WhichOneof("parameter_choice")
        body[key] = None if kind is None else getattr(setting, kind)
    return body


class TraceLoggingRpcs:
    """Mixin of :class:`~.servicer.InferenceServicer`: the trace and logging RPCs (needs ``self.server``)."""

    server: ServerAPI

    async def TraceSetting(self, request: pb.TraceSettingRequest, context: Any) -> pb.TraceSettingResponse:
        server = self.server
        if request.settings:
            return _answer(
                context,
                pb.TraceSettingResponse(),
                lambda: _trace_response(server.update_trace_settings(request.model_name, _trace_update(request))),
            )
        return _answer(
            context, pb.TraceSettingResponse(), lambda: _trace_response(server.trace_settings(request.model_name))
        )

    async def LogSettings(self, request: pb.LogSettingsRequest, context: Any) -> pb.LogSettingsResponse:
        server = self.server
        if request.settings:
            return _answer(
                context,
                pb.LogSettingsResponse(),
                lambda: _log_response(server.update_log_settings(_log_update(request))),
            )
        return _log_response(server.log_settings())
