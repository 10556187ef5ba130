"""``config.pbtxt`` (protobuf text format of Triton's ``ModelConfig``) in, JSON-style dicts out.

The JSON form is the one ``GET /v2/models/<m>/config`` returns: proto field
names, every scalar field present (defaults included), enums as names, and
64-bit integers as JSON numbers (protobuf's JSON mapping writes them as
strings; Triton rewrites them to numbers, and so do we).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf import json_format, text_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from ...proto import model_config_pb2 as mc
from ..errors import Code, TritonError

__all__ = ["ModelConfig", "parse_config_text", "read_config_file", "config_to_dict", "config_from_dict"]

ModelConfig = mc.ModelConfig

_INT64_TYPES = (
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
)


def parse_config_text(text: str, source: str = "config.pbtxt") -> mc.ModelConfig:
    """Parse protobuf text format into a ``ModelConfig``.

    :raises TritonError: INVALID_ARG naming ``source``, the line and the
        field for a syntax error, an unknown field or a bad enum value.
    """
    config = mc.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise TritonError(Code.INVALID_ARG, f"failed to parse {source}: {exc}") from None
    return config


def read_config_file(path: Path) -> mc.ModelConfig:
    """Read and parse ``path`` (see :func:`parse_config_text`).

    :raises TritonError: INVALID_ARG when the file cannot be read or parsed.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TritonError(Code.INVALID_ARG, f"failed to read {path}: {exc}") from None
    return parse_config_text(text, str(path))


def _canonical(message_desc: Descriptor, value: Any) -> Any:
    """Rebuild protobuf's JSON dict the way Triton prints it: fields in declaration
    order (protobuf puts set fields before defaulted ones) and 64-bit integers as
    numbers (protobuf writes them as strings), recursively."""
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for field in message_desc.fields:
        if field.name not in value:
            continue
        item = value[field.name]
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            sub = field.message_type
            if sub.GetOptions().map_entry:
                val_field = sub.fields_by_name["value"]
                if val_field.type == FieldDescriptor.TYPE_MESSAGE:
                    item = {k: _canonical(val_field.message_type, v) for k, v in item.items()}
                elif val_field.type in _INT64_TYPES:
                    item = {k: int(v) for k, v in item.items()}
            elif field.label == FieldDescriptor.LABEL_REPEATED:
                item = [_canonical(sub, x) for x in item]
            else:
                item = _canonical(sub, item)
        elif field.type in _INT64_TYPES:
            item = [int(x) for x in item] if field.label == FieldDescriptor.LABEL_REPEATED else int(item)
        out[field.name] = item
    return out


def config_to_dict(config: mc.ModelConfig) -> dict[str, Any]:
    """The JSON form of ``config`` (as Triton's model configuration extension returns it)."""
    try:  # protobuf >= 5.26 renamed the option
        data = json_format.MessageToDict(
            config, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
        )
    except TypeError:
        data = json_format.MessageToDict(config, including_default_value_fields=True, preserving_proto_field_name=True)
    return _canonical(mc.ModelConfig.DESCRIPTOR, data)


def config_from_dict(data: dict[str, Any], what: str = "model configuration") -> mc.ModelConfig:
    """Parse the JSON form (e.g. a config completed by a backend, or sent in a load request).

    :raises TritonError: INVALID_ARG for unknown fields or values of the wrong type.
    """
    config = mc.ModelConfig()
    try:
        json_format.ParseDict(data, config)
    except json_format.ParseError as exc:
        raise TritonError(Code.INVALID_ARG, f"failed to parse {what}: {exc}") from None
    return config
