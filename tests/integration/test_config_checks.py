"""Load-time checks of model config fields, over HTTP and gRPC model load (explicit mode).

Each expected message is real Triton 2.51's for the same config (python models,
``tritonserver --exit-on-error=false``: its index shows the same reason), apart
from the refusals of what tritium does not implement, which name the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from tests.support.clients import grpc_call, http_call
from tests.support.repo import add_model
from tests.support.server import ServerProcess
from tritium.proto import grpc_service_pb2 as pb

IO = {
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [1]}],
}


def config(**fields: Any) -> dict[str, Any]:
    """An identity model's config (``max_batch_size`` 4 unless given) with ``fields`` added."""
    return {"backend": "identity", "max_batch_size": 4, **IO, **fields}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("checks")
    add_model(root / "models", "m", None)
    add_model(root / "models", "strategy", None, files={"1/batchstrategy.so": "not a library"})
    add_model(root / "models", "ens", None)
    add_model(root / "models", "agent", None, files={"1/weights.bin": WEIGHTS.decode()})
    proc = ServerProcess([root / "models"], ["--model-control-mode=explicit"], log_path=root / "server.log")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def load_http(server: ServerProcess, name: str, cfg: dict[str, Any]) -> tuple[int, str]:
    body = json.dumps({"parameters": {"config": json.dumps(cfg)}}).encode()
    status, _, reply = http_call(server, "POST", f"/v2/repository/models/{name}/load", body)
    return status, json.loads(reply)["error"] if reply else ""


def load_grpc(server: ServerProcess, name: str, cfg: dict[str, Any]) -> tuple[Any, str]:
    request = pb.RepositoryModelLoadRequest(model_name=name)
    request.parameters["config"].string_param = json.dumps(cfg)
    code, reply = grpc_call(server, "RepositoryModelLoad", request)
    return code, reply if isinstance(reply, str) else ""


PRIORITIES = {"priority_levels": 3}
CASES = [
    # (id, config, reason: Triton 2.51's words)
    (
        "default-level-unset",
        config(dynamic_batching=PRIORITIES),
        "default priority level must be in range [1, 3] for m",
    ),
    (
        "default-level-above",
        config(dynamic_batching={**PRIORITIES, "default_priority_level": 4}),
        "default priority level must be in range [1, 3] for m",
    ),
    (
        "policy-key-above",
        config(
            dynamic_batching={
                **PRIORITIES,
                "default_priority_level": 1,
                "priority_queue_policy": {"4": {"max_queue_size": 2}},
            }
        ),
        "priority queue policy must have priority level in range [1, 3] for m",
    ),
    (
        "policy-key-zero",
        config(
            dynamic_batching={
                **PRIORITIES,
                "default_priority_level": 1,
                "priority_queue_policy": {"0": {"max_queue_size": 2}},
            }
        ),
        "priority queue policy must have priority level in range [1, 3] for m",
    ),
    (
        "ordering-with-levels",
        config(dynamic_batching={"preserve_ordering": True, "priority_levels": 2, "default_priority_level": 1}),
        "Only one priority level is allowed when 'preserve_ordering' is true for m",
    ),
    (
        "ordering-with-delay",
        config(
            dynamic_batching={
                "preserve_ordering": True,
                "default_queue_policy": {"timeout_action": "DELAY", "default_timeout_microseconds": 1000},
            }
        ),
        "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for m",
    ),
    (
        "profile-outside-tensorrt",
        config(instance_group=[{"kind": "KIND_CPU", "count": 1, "profile": ["0"]}]),
        "instance group m_0 of model m and platform specifies profile field which is only supported for "
        "TensorRT models",
    ),
    (
        "oldest-preferred-above-max",
        config(sequence_batching={"oldest": {"max_candidate_sequences": 4, "preferred_batch_size": [8]}}),
        "sequence batching preferred batch size must be <= max batch size for m",
    ),
    (
        "oldest-preferred-zero",
        config(sequence_batching={"oldest": {"max_candidate_sequences": 4, "preferred_batch_size": [0]}}),
        "sequence batching preferred batch size must be positive for m",
    ),
    (
        "slot-utilization-above-one",
        config(sequence_batching={"direct": {"minimum_slot_utilization": 1.5}}),
        "sequence batching minimum slot utilization must be in range (0.0, 1.0] for m",
    ),
    (
        "batch-input-source",
        config(
            batch_input=[
                {
                    "kind": "BATCH_ELEMENT_COUNT",
                    "target_name": ["BI"],
                    "data_type": "TYPE_FP32",
                    "source_input": ["NOPE"],
                }
            ]
        ),
        "unknown source input name 'NOPE' for m",
    ),
    (
        "batch-input-type",
        config(
            batch_input=[
                {
                    "kind": "BATCH_ELEMENT_COUNT",
                    "target_name": ["BI"],
                    "data_type": "TYPE_INT64",
                    "source_input": ["INPUT0"],
                }
            ]
        ),
        "batch input data type must be TYPE_INT32 or TYPE_FP32 for m",
    ),
    (
        "batch-input-sources",
        config(
            batch_input=[
                {
                    "kind": "BATCH_ITEM_SHAPE",
                    "target_name": ["BI"],
                    "data_type": "TYPE_INT32",
                    "source_input": ["INPUT0", "INPUT0"],
                }
            ]
        ),
        "batch input kind 'BATCH_ITEM_SHAPE' expects 1 source input, got 2 for m",
    ),
    (
        "batch-output-target",
        config(
            batch_output=[
                {"kind": "BATCH_SCATTER_WITH_INPUT_SHAPE", "target_name": ["NOPE"], "source_input": ["INPUT0"]}
            ]
        ),
        "unknown target output name 'NOPE' for m",
    ),
    (
        "batch-output-target-twice",
        config(
            batch_output=[
                {
                    "kind": "BATCH_SCATTER_WITH_INPUT_SHAPE",
                    "target_name": ["OUTPUT0", "OUTPUT0"],
                    "source_input": ["INPUT0"],
                }
            ]
        ),
        "target output name 'OUTPUT0' can only be specified once for m",
    ),
    (
        "batch-strategy-missing",
        config(
            dynamic_batching={}, parameters={"TRITON_BATCH_STRATEGY_PATH": {"string_value": "/nonexistent/libx.so"}}
        ),
        "Batching library path not found: /nonexistent/libx.so",
    ),
    (
        "batch-strategy-present",
        config(dynamic_batching={}, parameters={"TRITON_BATCH_STRATEGY_PATH": {"string_value": "/dev/null"}}),
        "model 'm': parameter 'TRITON_BATCH_STRATEGY_PATH' is not supported: tritium does not call custom batching "
        "strategies (TRITONBACKEND_ModelBatch* functions); remove it to use the built-in dynamic batcher",
    ),
    (
        "batch-strategy-sequence",
        config(
            sequence_batching={}, parameters={"TRITON_BATCH_STRATEGY_PATH": {"string_value": "/nonexistent/libx.so"}}
        ),
        "TRITON_BATCH_STRATEGY_PATH cannot be specified with sequence batcher, using default batching strategy",
    ),
]


#: checks Triton makes when it reads the config (its "Poll failed"): the answer names no reason, the log does
AT_POLL = {
    "default-level-unset",
    "default-level-above",
    "policy-key-above",
    "policy-key-zero",
    "ordering-with-levels",
    "ordering-with-delay",
    "oldest-preferred-above-max",
    "oldest-preferred-zero",
    "slot-utilization-above-one",
}


@pytest.mark.parametrize(("case", "cfg", "reason"), CASES, ids=[c[0] for c in CASES])
def test_load_refused_with_reason(server: ServerProcess, case: str, cfg: dict[str, Any], reason: str) -> None:
    status, message = load_http(server, "m", cfg)
    if case in AT_POLL:
        # Triton 2.51's answer for a config it cannot read; the reason goes to the log
        assert (status, message) == (500, "failed to load 'm', failed to poll from model repository")
        assert f"Poll failed for model directory 'm': {reason}\n" in server.log()
        expected_code = grpc.StatusCode.INTERNAL
    else:
        kind = {"batch-strategy-missing": "Not found", "batch-strategy-present": "Unsupported"}.get(
            case, "Invalid argument"
        )
        assert (status, message) == (
            400,
            f"load failed for model 'm': version 1 is at UNAVAILABLE state: {kind}: {reason};\n",
        )
        expected_code = grpc.StatusCode.INVALID_ARGUMENT
    code, details = load_grpc(server, "m", cfg)
    assert (code, details) == (expected_code, message)
    # the same config without the offending setting loads
    assert load_http(server, "m", config()) == (200, "")


def test_batchstrategy_file_in_the_model_folder_refused(server: ServerProcess) -> None:
    cfg = config(dynamic_batching={})
    status, message = load_http(server, "strategy", cfg)
    assert (status, message) == (
        400,
        "load failed for model 'strategy': version 1 is at UNAVAILABLE state: Unsupported: model 'strategy': the custom batching "
        "strategy library 'batchstrategy.so' in its folder is not supported: tritium does not call custom batching "
        "strategies (TRITONBACKEND_ModelBatch* functions); remove it to use the built-in dynamic batcher;\n",
    )
    # Triton looks for the file for every scheduler but the sequence batcher
    assert load_http(server, "strategy", config(sequence_batching={}))[0] == 200


def test_valid_priority_config_loads(server: ServerProcess) -> None:
    cfg = config(
        dynamic_batching={
            **PRIORITIES,
            "default_priority_level": 3,
            "priority_queue_policy": {"1": {"max_queue_size": 2}, "3": {"max_queue_size": 1}},
        }
    )
    assert load_http(server, "m", cfg) == (200, "")


# -- fields tritium does not implement: refused, naming the field -----------------------------------------------
REFUSED_CASES = [
    ("optimization.priority", {"optimization": {"priority": "PRIORITY_MAX"}}),
    ("optimization.cuda.graphs", {"optimization": {"cuda": {"graphs": True}}}),
    ("optimization.cuda.busy_wait_events", {"optimization": {"cuda": {"busy_wait_events": True}}}),
    ("optimization.cuda.graph_spec", {"optimization": {"cuda": {"graph_spec": [{"batch_size": 1}]}}}),
    ("optimization.cuda.output_copy_stream", {"optimization": {"cuda": {"output_copy_stream": True}}}),
    ("optimization.gather_kernel_buffer_threshold", {"optimization": {"gather_kernel_buffer_threshold": 4}}),
    ("optimization.eager_batching", {"optimization": {"eager_batching": True}}),
    ("optimization.graph", {"optimization": {"graph": {"level": 1}}}),
    (
        "optimization.execution_accelerators",
        {"optimization": {"execution_accelerators": {"cpu_execution_accelerator": [{"name": "openvino"}]}}},
    ),
    (
        "input.is_non_linear_format_io",
        {"input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [1], "is_non_linear_format_io": True}]},
    ),
    (
        "output.is_non_linear_format_io",
        {"output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [1], "is_non_linear_format_io": True}]},
    ),
    (
        "instance_group.secondary_devices",
        {"instance_group": [{"kind": "KIND_CPU", "secondary_devices": [{"kind": "KIND_NVDLA", "device_id": 0}]}]},
    ),
    ("instance_group.host_policy", {"instance_group": [{"kind": "KIND_CPU", "host_policy": "numa0"}]}),
    ("cc_model_filenames", {"cc_model_filenames": {"9.0": "model_sm90.plan"}}),
    ("model_operations.op_library_filename", {"model_operations": {"op_library_filename": ["libcustom_op.so"]}}),
    (
        "sequence_batching.state.use_same_buffer_for_input_output",
        {
            "sequence_batching": {
                "state": [
                    {
                        "input_name": "S_IN",
                        "output_name": "S_OUT",
                        "data_type": "TYPE_FP32",
                        "dims": [1],
                        "use_same_buffer_for_input_output": True,
                    }
                ]
            }
        },
    ),
    (
        "sequence_batching.state.use_growable_memory",
        {
            "sequence_batching": {
                "state": [
                    {
                        "input_name": "S_IN",
                        "output_name": "S_OUT",
                        "data_type": "TYPE_FP32",
                        "dims": [1],
                        "use_growable_memory": True,
                    }
                ]
            }
        },
    ),
]


def test_every_refusal_is_exercised() -> None:
    from tritium.core.model_config.unsupported import REFUSED

    exercised = {field for field, _ in REFUSED_CASES} | {"ensemble_scheduling.step.model_namespace"}
    assert exercised == {r.field for r in REFUSED}


@pytest.mark.parametrize(("field", "fields"), REFUSED_CASES, ids=[c[0] for c in REFUSED_CASES])
def test_unsupported_field_refused(server: ServerProcess, field: str, fields: dict[str, Any]) -> None:
    from tritium.core.model_config.unsupported import REFUSED

    instead = next(r.instead for r in REFUSED if r.field == field)
    message = (
        f"load failed for model 'm': version 1 is at UNAVAILABLE state: Unsupported: model 'm': '{field}' is not "
        f"supported: {instead};\n"
    )
    assert load_http(server, "m", config(**fields)) == (400, message)
    assert load_grpc(server, "m", config(**fields)) == (grpc.StatusCode.INVALID_ARGUMENT, message)


def test_ensemble_model_namespace_refused(server: ServerProcess) -> None:
    assert load_http(server, "m", config()) == (200, "")
    ensemble = {
        "platform": "ensemble",
        **IO,
        "ensemble_scheduling": {
            "step": [
                {
                    "model_name": "m",
                    "model_namespace": "team",
                    "input_map": {"INPUT0": "INPUT0"},
                    "output_map": {"OUTPUT0": "OUTPUT0"},
                }
            ]
        },
    }
    status, message = load_http(server, "ens", ensemble)
    assert (status, message) == (
        400,
        "load failed for model 'ens': model 'ens': 'ensemble_scheduling.step.model_namespace' is not supported: "
        "model namespacing is not supported (--model-namespacing)\n",
    )


# -- repository agents -------------------------------------------------------------------------------------------
WEIGHTS = b"tritium checksum agent\n"


def agent_config(name: str, parameters: dict[str, str]) -> dict[str, Any]:
    return config(model_repository_agents={"agents": [{"name": name, "parameters": parameters}]})


def test_checksum_agent_right_digest_loads(server: ServerProcess) -> None:
    digest = hashlib.md5(WEIGHTS).hexdigest()
    assert load_http(server, "agent", agent_config("checksum", {"MD5:1/weights.bin": digest})) == (200, "")
    # the algorithm name is case-insensitive, as in Triton's agent
    assert load_grpc(server, "agent", agent_config("checksum", {"md5:1/weights.bin": digest})) == (
        grpc.StatusCode.OK,
        "",
    )


AGENT_FAILURES = [
    (
        {"MD5:1/weights.bin": "0" * 32},
        "Mismatched MD5 hash for file 1/weights.bin, expect: 00000000000000000000000000000000, got: "
        + hashlib.md5(WEIGHTS).hexdigest(),
    ),
    ({"MD5:1/missing.bin": "0" * 32}, "failed to open text file for read 1/missing.bin: No such file or directory"),
    ({"SHA1:1/weights.bin": "0" * 40}, "Unsupported checksum algorithm: SHA1"),
    ({"1/weights.bin": "0" * 32}, "failed to parse key: 1/weights.bin"),
    (
        {"MD5:../m/config.pbtxt": "0" * 32},
        "invalid checksum agent file '../m/config.pbtxt': it must be a file name inside the model folder",
    ),
]


@pytest.mark.parametrize(("parameters", "reason"), AGENT_FAILURES, ids=["mismatch", "missing", "sha1", "key", "escape"])
def test_checksum_agent_failures(server: ServerProcess, parameters: dict[str, str], reason: str) -> None:
    status, message = load_http(server, "agent", agent_config("checksum", parameters))
    assert (status, message) == (500, "failed to load 'agent', failed to poll from model repository")
    assert f"Poll failed for model directory 'agent': {reason}\n" in server.log()
    assert load_grpc(server, "agent", agent_config("checksum", parameters)) == (grpc.StatusCode.INTERNAL, message)


def test_unknown_agent_refused(server: ServerProcess) -> None:
    status, message = load_http(server, "agent", agent_config("nope", {}))
    assert (status, message) == (500, "failed to load 'agent', failed to poll from model repository")
    reason = (
        "unable to find 'libtritonrepoagent_nope.so' for repo agent 'nope': tritium has only the 'checksum' "
        "repository agent"
    )
    assert f"Poll failed for model directory 'agent': {reason}\n" in server.log()


def test_model_with_only_passive_instances_answers_unavailable(server: ServerProcess) -> None:
    # Triton 2.51 loads it and crashes (SIGSEGV) on the first request; tritium refuses the request
    cfg = config(instance_group=[{"kind": "KIND_CPU", "count": 2, "passive": True}])
    assert load_http(server, "m", cfg) == (200, "")
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}).encode()
    status, _, reply = http_call(server, "POST", "/v2/models/m/infer", body)
    assert (status, json.loads(reply)) == (503, {"error": "model 'm' version 1 has no available instance"})
    assert load_http(server, "m", config()) == (200, "")


def test_metric_tags_label_the_model_metrics(server: ServerProcess) -> None:
    # Triton 2.51 (probed): each tag is a label "_<key>" on every nv_inference_* family of the model
    cfg = config(metric_tags={"team": "blue", "tier": "gold"})
    assert load_grpc(server, "m", cfg) == (grpc.StatusCode.OK, "")
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [1.0]}]}).encode()
    assert http_call(server, "POST", "/v2/models/m/infer", body)[0] == 200
    text = server.wait_metrics()
    tags = '_team="blue",_tier="gold",model="m"'
    lines = [line for line in text.splitlines() if 'model="m"' in line and not line.startswith("#")]
    assert lines and [line for line in lines if '{_team="blue",_tier="gold",' not in line] == []
    assert f'nv_inference_request_success{{{tags},version="1"}} 1' in lines
    assert f'nv_inference_request_failure{{{tags},reason="REJECTED",version="1"}} 0' in lines
    assert f'nv_inference_pending_request_count{{{tags},version="1"}} 0' in lines
    # a reload without tags drops them
    assert load_http(server, "m", config()) == (200, "")
    assert 'nv_inference_request_success{model="m",version="1"} 0' in server.wait_metrics().splitlines()
