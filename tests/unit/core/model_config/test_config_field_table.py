"""The model config field table of docs/compatibility.md against the compiled ``model_config.proto``.

Walks ``ModelConfig``'s descriptors (nested messages as dotted paths, a map's
message values under the map's name) and checks the table names each field once,
with a status, and that every field tritium refuses in code
(:data:`tritium.core.model_config.unsupported.REFUSED`) is listed as refused with
its message.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf import text_format
from google.protobuf.descriptor import Descriptor

from tritium.core.errors import Code, TritonError
from tritium.core.model_config.unsupported import REFUSED, refuse_unsupported
from tritium.proto import model_config_pb2 as mc

DOC = Path(__file__).resolve().parents[4] / "docs" / "compatibility.md"
BEGIN = "<!-- model-config-fields: begin"
END = "<!-- model-config-fields: end -->"
STATUSES = ("honoured", "refused", "N/A on CPU")
ROW = re.compile(r"^\| `([a-z0-9_.]+)` \| ([^|]+) \| (.*) \|$")


def proto_fields(descriptor: Descriptor, prefix: str = "", seen: frozenset[str] = frozenset()) -> list[str]:
    """Dotted paths of every field reachable from ``descriptor`` (a message type is not re-entered)."""
    paths = []
    for field in descriptor.fields:
        path = prefix + field.name
        paths.append(path)
        message = field.message_type
        if message is None:
            continue
        if message.GetOptions().map_entry:
            message = message.fields_by_name["value"].message_type
            if message is None:
                continue
        if message.full_name not in seen:
            paths += proto_fields(message, path + ".", seen | {message.full_name})
    return paths


def table() -> dict[str, tuple[str, str]]:
    text = DOC.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    section = text[text.index(BEGIN) : text.index(END)]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        match = ROW.match(line)
        assert match, f"malformed row: {line}"
        field, status, note = match.groups()
        assert field not in rows, f"{field} is listed twice"
        rows[field] = (status.strip(), note.strip())
    return rows


def test_walk_finds_nested_and_map_fields() -> None:
    fields = proto_fields(mc.ModelConfig.DESCRIPTOR, seen=frozenset({mc.ModelConfig.DESCRIPTOR.full_name}))
    assert "optimization.cuda.graph_spec.graph_lower_bound.input.dim" in fields
    assert "dynamic_batching.priority_queue_policy.max_queue_size" in fields
    assert "model_repository_agents.agents.parameters" in fields
    assert len(fields) == len(set(fields)) == 166


def test_table_lists_every_proto_field_and_no_other() -> None:
    fields = set(proto_fields(mc.ModelConfig.DESCRIPTOR, seen=frozenset({mc.ModelConfig.DESCRIPTOR.full_name})))
    rows = set(table())
    assert sorted(fields - rows) == [], "fields of model_config.proto missing from docs/compatibility.md"
    assert sorted(rows - fields) == [], "docs/compatibility.md lists fields model_config.proto lacks"


def test_each_row_has_a_status_and_refusals_their_error() -> None:
    rows = table()
    for field, (status, note) in rows.items():
        assert any(s in status for s in STATUSES), f"{field}: unknown status {status!r}"
        if "refused" in status or "N/A on CPU" in status:
            parent = re.fullmatch(r"see `([a-z0-9_.]+)`", note)
            if parent:  # a nested field follows its message's row, which must carry the error
                assert parent.group(1) in rows and field.startswith(parent.group(1) + "."), field
                assert rows[parent.group(1)][0] == status, field
            else:
                assert "`" in note, f"{field}: a {status} field must show its load error"


def test_fields_refused_in_code_are_refused_in_the_table() -> None:
    rows = table()
    for refusal in REFUSED:
        status, note = rows[refusal.field]
        assert "refused" in status, refusal.field
        assert f"'{refusal.field}' is not supported: {refusal.instead}" in note, refusal.field


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ('backend: "pytorch" optimization { graph { level: 1 } }', "optimization.graph"),
        ('backend: "onnxruntime" optimization { graph { level: 1 } }', None),
        ('backend: "tensorflow" optimization { graph { level: 1 } }', None),
        (
            'backend: "openvino" model_operations { op_library_filename: "ops.so" }',
            "model_operations.op_library_filename",
        ),
        ('backend: "tensorflow" model_operations { op_library_filename: "ops.so" }', None),
        (
            'backend: "python" optimization { execution_accelerators { cpu_execution_accelerator { name: "x" } } }',
            "optimization.execution_accelerators",
        ),
        (
            'backend: "tensorflow" optimization { execution_accelerators { gpu_execution_accelerator { name: "gpu_io" } } }',
            None,
        ),
    ],
)
def test_fields_only_some_backends_read_are_refused_elsewhere(text: str, refused: str | None) -> None:
    config = text_format.Parse('name: "m" ' + text, mc.ModelConfig())
    if refused is None:
        refuse_unsupported(config)
        return
    with pytest.raises(TritonError) as caught:
        refuse_unsupported(config)
    assert caught.value.code is Code.UNSUPPORTED
    assert caught.value.message.startswith(
        f"model 'm': '{refused}' is not supported: only the onnxruntime and tensorflow"
    )
