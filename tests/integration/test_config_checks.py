"""Load-time checks of model config fields, over HTTP and gRPC model load (explicit mode).

Each expected message is real Triton 2.51's for the same config (python models,
``tritonserver --exit-on-error=false``: its index shows the same reason), apart
from the refusals of what tritium does not implement, which name the field.
"""

from __future__ import annotations

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
