"""Tests of proto/: generated modules are fresh, wire-compatible with Triton, and parse configs.

tritium's generated modules and tritonclient's cannot share a process (both register
``model_config.proto`` / ``inference.*`` in protobuf's default descriptor pool), so every
check that imports a generated module runs in a subprocess of the same interpreter. This
module itself imports neither, so it coexists with tests that use tritonclient in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

TRITONCLIENT_MODULES = ("tritonclient.grpc.model_config_pb2", "tritonclient.grpc.service_pb2")
TRITIUM_MODULES = ("tritium.proto.model_config_pb2", "tritium.proto.grpc_service_pb2")

# Entries tritium has beyond Triton 2.51's schema (what tritonclient 2.51 ships):
# ModelMetrics (ModelConfig field 26) comes from Triton 2.52. Key prefixes of _flatten().
ALLOWED_EXTRAS: tuple[str, ...] = ()

# A config touching most ModelConfig features; serialized by both schemas and compared.
WIRE_SAMPLE_PBTXT = """
name: "sample"
backend: "onnxruntime"
max_batch_size: 8
version_policy { specific { versions: [1, 3] } }
input { name: "IN" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [3, -1] reshape { shape: [3] } }
output { name: "OUT" data_type: TYPE_STRING dims: [1] label_filename: "labels.txt" }
batch_input { kind: BATCH_ITEM_SHAPE target_name: "T" data_type: TYPE_INT64 source_input: "IN" }
batch_output { target_name: "OUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "IN" }
instance_group {
  name: "g" kind: KIND_GPU count: 2 gpus: [0, 1]
  rate_limiter { resources { name: "R" global: true count: 2 } priority: 3 }
  secondary_devices { kind: KIND_NVDLA device_id: 1 }
}
optimization {
  priority: PRIORITY_MAX
  cuda { graphs: true graph_spec { batch_size: 4 input { key: "IN" value { dim: [3, 2] } } } }
  execution_accelerators {
    gpu_execution_accelerator {
      name: "tensorrt" parameters { key: "precision_mode" value: "FP16" }
    }
  }
  input_pinned_memory { enable: false }
}
dynamic_batching {
  preferred_batch_size: [4, 8]
  max_queue_delay_microseconds: 100
  priority_levels: 2
  default_priority_level: 1
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5 max_queue_size: 9 }
  priority_queue_policy { key: 2 value { allow_timeout_override: true } }
}
default_model_filename: "m.onnx"
cc_model_filenames { key: "8.6" value: "m86.onnx" }
metric_tags { key: "team" value: "x" }
parameters { key: "p" value { string_value: "v" } }
model_warmup {
  name: "w" batch_size: 1 count: 2
  inputs { key: "IN" value { data_type: TYPE_FP32 dims: [3, 2] random_data: true } }
}
model_operations { op_library_filename: "libop.so" }
model_transaction_policy { decoupled: true }
model_repository_agents { agents { name: "checksum" parameters { key: "k" value: "v" } } }
response_cache { enable: true }
"""

# Prints, as JSON, a flat description of every file, message, field, enum and service
# method defined by the modules named in argv, plus the bytes of WIRE_SAMPLE_PBTXT.
_DUMP_SCRIPT = r"""
import importlib, json, sys, warnings
from google.protobuf import text_format

warnings.simplefilter("ignore")  # e.g. newer protobuf deprecating FieldDescriptor.label
sample_pbtxt = sys.stdin.read()
out = {}


def dump_enum(e):
    out["enum " + e.full_name] = {"values": [[v.name, v.number] for v in e.values]}


def dump_message(m):
    out["message " + m.full_name] = {
        "map_entry": m.GetOptions().map_entry,
        "oneofs": [[o.name, [f.name for f in o.fields]] for o in m.oneofs],
        "fields": sorted(f.name for f in m.fields),
    }
    for f in m.fields:
        out["field " + f.full_name] = {
            "number": f.number,
            "type": f.type,
            "label": f.label,
            "type_name": (f.message_type or f.enum_type).full_name
            if (f.message_type or f.enum_type)
            else "",
            "oneof": f.containing_oneof.name if f.containing_oneof else None,
            "json_name": f.json_name,
        }
    for e in m.enum_types:
        dump_enum(e)
    for n in m.nested_types:
        dump_message(n)


config_class = None
for name in sys.argv[1:]:
    fd = importlib.import_module(name).DESCRIPTOR
    out["file " + fd.name] = {
        "package": fd.package,
        "dependencies": [d.name for d in fd.dependencies],
    }
    for e in fd.enum_types_by_name.values():
        dump_enum(e)
    for m in fd.message_types_by_name.values():
        dump_message(m)
    for s in fd.services_by_name.values():
        out["service " + s.full_name] = {"methods": [m.name for m in s.methods]}
        for m in s.methods:
            out["method " + m.full_name] = {
                "input": m.input_type.full_name,
                "output": m.output_type.full_name,
                "client_streaming": m.client_streaming,
                "server_streaming": m.server_streaming,
            }
    module = importlib.import_module(name)
    if hasattr(module, "ModelConfig"):
        config_class = module.ModelConfig

sample = text_format.Parse(sample_pbtxt, config_class())
print(json.dumps({"schema": out, "wire": sample.SerializeToString(deterministic=True).hex()}))
"""

# Parses each {name: pbtxt} of stdin as a tritium ModelConfig; prints {name: error or None}.
_PARSE_SCRIPT = r"""
import json, sys
from google.protobuf import text_format
from tritium.proto import model_config_pb2

results = {}
for name, pbtxt in json.load(sys.stdin).items():
    try:
        text_format.Parse(pbtxt, model_config_pb2.ModelConfig())
        results[name] = None
    except text_format.ParseError as e:
        results[name] = str(e)
print(json.dumps(results))
"""


def _run_python(args: list[str], stdin: str = "") -> str:
    proc = subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=os.environ.copy(),
        timeout=120,
    )
    assert proc.returncode == 0, f"{args[:2]} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _dump(modules: tuple[str, ...]) -> dict:
    return json.loads(_run_python(["-c", _DUMP_SCRIPT, *modules], stdin=WIRE_SAMPLE_PBTXT))


def _is_allowed_extra(key: str) -> bool:
    return key.startswith(ALLOWED_EXTRAS)


def test_generated_modules_are_fresh():
    proc = subprocess.run(
        [sys.executable, str(REPO / "proto" / "codegen.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, f"run `python proto/codegen.py`:\n{proc.stdout}{proc.stderr}"


def test_schema_matches_tritonclient():
    reference = _dump(TRITONCLIENT_MODULES)
    ours = _dump(TRITIUM_MODULES)
    ref_schema, our_schema = reference["schema"], ours["schema"]

    # Guard against a dump that silently compares nothing.
    assert len([k for k in ref_schema if k.startswith("message ")]) > 100
    assert "method inference.GRPCInferenceService.ModelStreamInfer" in ref_schema
    assert "field inference.ModelConfig.instance_group" in ref_schema

    missing = sorted(k for k in ref_schema if k not in our_schema)
    extra = sorted(k for k in our_schema if k not in ref_schema and not _is_allowed_extra(k))
    differing = {}
    for key in sorted(set(ref_schema) & set(our_schema)):
        want, got = ref_schema[key], dict(our_schema[key])
        if key.startswith("message "):
            # A message may list allowed extra fields (ModelConfig.model_metrics).
            name = key[len("message ") :]
            got["fields"] = [f for f in got["fields"] if not _is_allowed_extra(f"field {name}.{f}")]
        if want != got:
            differing[key] = {"tritonclient": want, "tritium": our_schema[key]}

    problems = []
    if missing:
        problems.append(f"missing in tritium: {missing}")
    if extra:
        problems.append(f"not in Triton 2.51 (add to ALLOWED_EXTRAS if deliberate): {extra}")
    if differing:
        problems.append("differs from tritonclient:\n" + json.dumps(differing, indent=1))
    assert not problems, "\n".join(problems)
    assert ours["wire"] == reference["wire"], "ModelConfig sample serializes differently"


REALISTIC_CONFIGS = {
    "onnx_instance_group": """
        name: "densenet_onnx"
        platform: "onnxruntime_onnx"
        max_batch_size: 0
        input [
          {
            name: "data_0"
            data_type: TYPE_FP32
            format: FORMAT_NCHW
            dims: [ 3, 224, 224 ]
            reshape { shape: [ 1, 3, 224, 224 ] }
          }
        ]
        output [
          {
            name: "fc6_1"
            data_type: TYPE_FP32
            dims: [ 1000 ]
            reshape { shape: [ 1, 1000, 1, 1 ] }
            label_filename: "densenet_labels.txt"
          }
        ]
        instance_group [ { count: 2, kind: KIND_CPU } ]
        version_policy: { latest { num_versions: 2 } }
        """,
    "dynamic_batching_priority": """
        name: "simple"
        backend: "onnxruntime"
        max_batch_size: 16
        input [ { name: "INPUT0", data_type: TYPE_INT32, dims: [ 16 ] } ]
        output [ { name: "OUTPUT0", data_type: TYPE_INT32, dims: [ 16 ] } ]
        dynamic_batching {
          preferred_batch_size: [ 4, 8 ]
          max_queue_delay_microseconds: 100
          preserve_ordering: true
          priority_levels: 2
          default_priority_level: 2
          default_queue_policy { max_queue_size: 8 }
          priority_queue_policy {
            key: 1
            value {
              timeout_action: REJECT
              default_timeout_microseconds: 10000
              allow_timeout_override: true
              max_queue_size: 4
            }
          }
        }
        response_cache { enable: true }
        """,
    "sequence_batching_state": """
        name: "accumulator"
        backend: "python"
        max_batch_size: 4
        input [ { name: "INPUT", data_type: TYPE_INT32, dims: [ 1 ] } ]
        output [ { name: "OUTPUT", data_type: TYPE_INT32, dims: [ 1 ] } ]
        sequence_batching {
          max_sequence_idle_microseconds: 5000000
          oldest {
            max_candidate_sequences: 4
            preferred_batch_size: [ 2 ]
            max_queue_delay_microseconds: 100
          }
          control_input [
            {
              name: "START"
              control [ { kind: CONTROL_SEQUENCE_START, fp32_false_true: [ 0, 1 ] } ]
            },
            {
              name: "READY"
              control [ { kind: CONTROL_SEQUENCE_READY, bool_false_true: [ false, true ] } ]
            },
            { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID, data_type: TYPE_UINT64 } ] }
          ]
          state [
            {
              input_name: "INPUT_STATE"
              output_name: "OUTPUT_STATE"
              data_type: TYPE_INT32
              dims: [ 1 ]
              initial_state: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true name: "init" }
            }
          ]
        }
        instance_group [ { kind: KIND_CPU } ]
        """,
    "ensemble": """
        name: "ensemble_model"
        platform: "ensemble"
        max_batch_size: 1
        input [ { name: "IMAGE", data_type: TYPE_STRING, dims: [ 1 ] } ]
        output [ { name: "CLASSIFICATION", data_type: TYPE_FP32, dims: [ 1000 ] } ]
        ensemble_scheduling {
          step [
            {
              model_name: "preprocess"
              model_version: -1
              input_map { key: "INPUT_0" value: "IMAGE" }
              output_map { key: "OUTPUT_0" value: "preprocessed_image" }
            },
            {
              model_name: "classifier"
              model_version: -1
              input_map { key: "data_0" value: "preprocessed_image" }
              output_map { key: "fc6_1" value: "CLASSIFICATION" }
            }
          ]
        }
        """,
    "parameters_and_warmup": """
        name: "model_py"
        backend: "python"
        max_batch_size: 8
        input [ { name: "IN", data_type: TYPE_FP32, dims: [ -1 ], optional: true } ]
        output [ { name: "OUT", data_type: TYPE_FP32, dims: [ -1 ] } ]
        parameters: {
          key: "EXECUTION_ENV_PATH",
          value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" }
        }
        parameters { key: "FORCE_CPU_ONLY_INPUT_TENSORS" value { string_value: "no" } }
        model_transaction_policy { decoupled: True }
        model_warmup [
          {
            name: "zeros"
            batch_size: 8
            count: 2
            inputs { key: "IN" value { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } }
          },
          {
            name: "from_file"
            batch_size: 1
            inputs {
              key: "IN"
              value { data_type: TYPE_FP32 dims: [ 16 ] input_data_file: "raw_in" }
            }
          }
        ]
        """,
}


def test_text_format_parses_realistic_configs_and_rejects_unknown_fields():
    configs = {k: textwrap.dedent(v) for k, v in REALISTIC_CONFIGS.items()}
    configs["unknown_field"] = 'name: "m"\nmax_batch_size: 1\nno_such_field: 3\n'
    configs["unknown_nested_field"] = 'name: "m"\ndynamic_batching { max_delay: 5 }\n'
    results = json.loads(_run_python(["-c", _PARSE_SCRIPT], stdin=json.dumps(configs)))

    for name in REALISTIC_CONFIGS:
        assert results[name] is None, f"{name}: {results[name]}"
    assert results["unknown_field"] and "no_such_field" in results["unknown_field"]
    assert results["unknown_nested_field"] and "max_delay" in results["unknown_nested_field"]
