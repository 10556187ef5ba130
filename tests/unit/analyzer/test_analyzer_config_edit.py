"""tritium-analyzer writes each candidate's config.pbtxt as an edit of the model's own file:
comments, field order and layout kept, only the fields the candidate sets changed (exact diffs)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from google.protobuf import text_format

from tritium.analyzer.config_edit import edit_config_text
from tritium.analyzer.space import FULL, Candidate, candidate_config, candidate_text, candidates
from tritium.core.model_config.parser import parse_config_text
from tritium.proto import model_config_pb2 as mc

ORIGINAL = """\
# An image model: batches of up to 8.
name: "m"
platform: "onnxruntime_onnx"
max_batch_size: 8  # what the model takes
input [
  {
    name: "x"   # NCHW, scaled
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
output [ { name: "y", data_type: TYPE_FP32, dims: [ 4 ] } ]
instance_group [
  {
    name: "cpu_pool"  # named group
    count: 3
    kind: KIND_CPU
  }
]
dynamic_batching {
  # tuned by hand
  max_queue_delay_microseconds: 7
}
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
# end of file
"""


def _diff(old: str, new: str) -> list[str]:
    """The changed lines, '-' and '+' prefixed (no context)."""
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
    return [line for line in lines if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def _edit(text: str, candidate: Candidate) -> str:
    config = parse_config_text(text)
    edited = edit_config_text(text, config, candidate_config(config, candidate))
    assert parse_config_text(edited) == candidate_config(config, candidate)
    return edited


def test_only_the_changed_fields_are_edited_and_comments_survive() -> None:
    edited = _edit(ORIGINAL, Candidate(2, 4, True, (4,), 500))
    assert _diff(ORIGINAL, edited) == [
        "-max_batch_size: 8  # what the model takes",
        "+max_batch_size: 4  # what the model takes",
        '-    name: "cpu_pool"  # named group',
        "-    count: 3",
        "+    count: 2",
        "-  max_queue_delay_microseconds: 7",
        "+  max_queue_delay_microseconds: 500",
        "+  preferred_batch_size: 4",
    ]
    for comment in ("# An image model", "# NCHW, scaled", "# tuned by hand", "# end of file"):
        assert comment in edited


def test_the_batcher_off_deletes_its_block_and_nothing_else() -> None:
    edited = _edit(ORIGINAL, Candidate(3, 8))
    assert _diff(ORIGINAL, edited) == [
        '-    name: "cpu_pool"  # named group',
        "-dynamic_batching {",
        "-  # tuned by hand",
        "-  max_queue_delay_microseconds: 7",
        "-}",
    ]


def test_fields_the_file_lacks_are_appended_inline_or_at_the_end() -> None:
    add_sub = Path(__file__).resolve().parents[3] / "examples" / "python_models" / "add_sub" / "config.pbtxt"
    text = add_sub.read_text().replace('backend: "python"', 'backend: "python"\nmax_batch_size: 8')
    edited = _edit(text, Candidate(2, 8, True, (), 100))
    assert _diff(text, edited) == [
        "-instance_group [ { kind: KIND_CPU } ]",
        "+instance_group [ { kind: KIND_CPU count: 2 } ]",
        "+dynamic_batching {",
        "+  max_queue_delay_microseconds: 100",
        "+}",
    ]
    assert edited.startswith('# Triton\'s python_backend "add_sub" example')
    bare = '# no instance group\nname: "p"\nbackend: "python"'  # and no final newline
    assert _diff(bare, _edit(bare, Candidate(3))) == ["+instance_group {", "+  count: 3", "+}"]


def test_every_full_search_candidate_parses_back_exactly() -> None:
    config = parse_config_text(ORIGINAL)
    found = candidates(config, FULL)
    assert len(found) == 3 * (1 + 2 * 3 * 2)
    for candidate in found:
        edited = _edit(ORIGINAL, candidate)
        assert "# tuned by hand" in edited or not candidate.batcher


def test_text_it_does_not_follow_falls_back_to_the_full_rendering() -> None:
    config = parse_config_text('name: "m"')
    wanted = candidate_config(config, Candidate(2))
    # a text that does not parse to `config`: the edit would not give `wanted`, so it is not used
    assert edit_config_text('name: "other"', config, wanted) == text_format.MessageToString(wanted)
    assert edit_config_text('name: "m" {', config, wanted) == text_format.MessageToString(wanted)


@pytest.mark.parametrize("with_file", [True, False])
def test_candidate_text_reads_the_models_file(tmp_path: Path, with_file: bool) -> None:
    if with_file:
        (tmp_path / "config.pbtxt").write_text('# mine\nname: "m"\nbackend: "python"\n')
    text = candidate_text(tmp_path, Candidate(2))
    expected = mc.ModelConfig(name="m" if with_file else tmp_path.name, backend="python" if with_file else "")
    expected.instance_group.add(count=2)
    assert parse_config_text(text) == expected
    assert text.startswith("# mine\n") == with_file
