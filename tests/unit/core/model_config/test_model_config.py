"""Model config parsing, defaults and validation (Triton's messages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritium.core.errors import Code, TritonError
from tritium.core.model_config import normalize
from tritium.core.model_config.parser import config_to_dict, parse_config_text

IO = """
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def prepare(text: str, tmp_path: Path, name: str = "m", auto: bool = False, files: tuple[str, ...] = ()):
    (tmp_path / "1").mkdir(exist_ok=True)
    for f in files:
        (tmp_path / "1" / f).write_text("x")
    config = parse_config_text(text) if text is not None else None
    return normalize.instance_groups(normalize.prepare(config, name, tmp_path, auto, gpus=()), gpus=())


def error_of(text: str, tmp_path: Path, **kw) -> TritonError:
    with pytest.raises(TritonError) as info:
        prepare(text, tmp_path, **kw)
    assert info.value.code == Code.INVALID_ARG
    return info.value


def test_defaults_match_triton(tmp_path):
    config = config_to_dict(prepare('backend: "python"\n' + IO, tmp_path))
    assert config["name"] == "m"
    assert config["version_policy"] == {"latest": {"num_versions": 1}}
    assert config["instance_group"] == [
        {
            "name": "m",
            "kind": "KIND_CPU",
            "count": 1,
            "gpus": [],
            "secondary_devices": [],
            "profile": [],
            "passive": False,
            "host_policy": "",
        }
    ]
    assert config["optimization"]["input_pinned_memory"] == {"enable": True}
    assert config["default_model_filename"] == "model.py"
    assert config["input"][0]["dims"] == [4]


def test_unnamed_groups_are_numbered_and_onnxruntime_cpu_groups_default_to_two(tmp_path):
    config = prepare(
        'platform: "onnxruntime_onnx"\n' + IO + "instance_group [ { kind: KIND_CPU }, { count: 3 } ]", tmp_path
    )
    assert config.backend == "onnxruntime" and config.default_model_filename == "model.onnx"
    assert [(g.name, g.count) for g in config.instance_group] == [("m_0", 2), ("m_1", 3)]


def test_backend_is_found_from_the_model_file(tmp_path):
    config = prepare(IO, tmp_path, files=("model.onnx",))
    assert (config.backend, config.platform) == ("onnxruntime", "onnxruntime_onnx")


def test_unknown_field_and_bad_datatype_name_the_line(tmp_path):
    with pytest.raises(TritonError, match='1:1 : Message type "inference.ModelConfig" has no field named "bogus"'):
        parse_config_text("bogus: 1")
    with pytest.raises(TritonError, match='Enum type "inference.DataType" has no value named TYPE_FOO'):
        parse_config_text('input [ { name: "a" data_type: TYPE_FOO } ]')


@pytest.mark.parametrize(
    "text, message",
    [
        ('backend: "python"\nmax_batch_size: -1\n' + IO, "'max_batch_size' must be non-negative value for m"),
        (
            'name: "other"\nbackend: "python"\n' + IO,
            "unexpected directory name 'm' for model 'other', directory name must equal model name",
        ),
        (
            'backend: "python"\ninput [ { name: "IN" data_type: TYPE_FP32 dims: [ 0 ] } ]\noutput [ { name: "O" data_type: TYPE_FP32 dims: [1] } ]',
            "model input 'IN' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m",
        ),
        (
            'backend: "python"\ninput [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 3 ] } } ]\noutput [ { name: "O" data_type: TYPE_FP32 dims: [1] } ]',
            "model input 'IN' has different size for dims and reshape for m",
        ),
        (
            'backend: "python"\ninput [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "O" data_type: TYPE_FP32 dims: [1] } ]',
            "model input 'IN' is specified more than once for m",
        ),
        (
            'backend: "python"\ninput [ { name: "IN" dims: [ 4 ] } ]\noutput [ { name: "O" data_type: TYPE_FP32 dims: [1] } ]',
            "model input 'IN' must specify 'data_type' for m",
        ),
        (
            'platform: "onnxruntime_onnx"\nbackend: "pytorch"\n' + IO,
            "unexpected 'platform' and 'backend' pair, got:onnxruntime_onnx, pytorch",
        ),
        (
            'backend: "python"\n' + IO + "instance_group [ { kind: KIND_GPU } ]",
            "instance group m_0 of model m has kind KIND_GPU but no GPUs are available",
        ),
        (
            'backend: "python"\n' + IO + "dynamic_batching { preferred_batch_size: [ 4 ] }",
            "dynamic batching preferred size must be <= max batch size for m",
        ),
    ],
)
def test_invalid_configs_get_triton_messages(tmp_path, text, message):
    assert error_of(text, tmp_path).message == message


def test_a_model_name_without_backend_hint_is_refused(tmp_path):
    assert "Could not determine backend for model 'm'" in error_of(IO, tmp_path).message


def test_missing_config_needs_auto_complete(tmp_path):
    assert "auto-complete is disabled" in error_of(None, tmp_path, files=("model.onnx",)).message
    assert prepare(None, tmp_path, auto=True, files=("model.onnx",)).backend == "onnxruntime"


def test_json_form_is_byte_identical_to_triton(tmp_path):
    """Fields in declaration order, every default printed, int64 as numbers (recorded from Triton 2.51)."""
    import json

    model = tmp_path / "identity_fp32"
    (model / "1").mkdir(parents=True)
    config = normalize.prepare(
        parse_config_text(
            'name: "identity_fp32"\nbackend: "python"\nmax_batch_size: 8\n'
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
            'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
            "instance_group [ { count: 1 kind: KIND_CPU } ]"
        ),
        "identity_fp32",
        model,
        False,
        gpus=(),
    )
    config = normalize.instance_groups(config, gpus=())
    triton = (
        '{"name":"identity_fp32","platform":"","backend":"python","runtime":"","version_policy":{"latest":'
        '{"num_versions":1}},"max_batch_size":8,"input":[{"name":"INPUT0","data_type":"TYPE_FP32","format":'
        '"FORMAT_NONE","dims":[16],"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,'
        '"is_non_linear_format_io":false}],"output":[{"name":"OUTPUT0","data_type":"TYPE_FP32","dims":[16],'
        '"label_filename":"","is_shape_tensor":false,"is_non_linear_format_io":false}],"batch_input":[],'
        '"batch_output":[],"optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory":{"enable":true},'
        '"output_pinned_memory":{"enable":true},"gather_kernel_buffer_threshold":0,"eager_batching":false},'
        '"instance_group":[{"name":"identity_fp32_0","kind":"KIND_CPU","count":1,"gpus":[],"secondary_devices":[],'
        '"profile":[],"passive":false,"host_policy":""}],"default_model_filename":"model.py","cc_model_filenames":{},'
        '"metric_tags":{},"parameters":{},"model_warmup":[]}'
    )
    assert json.dumps(config_to_dict(config), separators=(",", ":")) == triton


def test_version_policies_choose_among_the_version_folders(tmp_path):
    from tritium.core.model_repository.repository import ModelSource, versions_to_load

    for folder in ("1", "2", "3", "07", "x", "10"):
        (tmp_path / folder).mkdir()
    source = ModelSource("m", tmp_path, tmp_path.parent)

    def chosen(policy: str) -> list[int]:
        return versions_to_load(source, parse_config_text(f"version_policy {{ {policy} }}"))

    assert chosen("latest { num_versions: 2 }") == [3, 10]
    assert chosen("all { }") == [1, 2, 3, 10]
    assert chosen("specific { versions: [ 2, 5 ] }") == [2]  # 5 has no folder: logged and skipped
    assert versions_to_load(source, parse_config_text("")) == [10]
