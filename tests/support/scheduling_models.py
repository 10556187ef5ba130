"""Python models for the scheduling suites (also run unchanged on real Triton for comparison).

``batch_report``: echoes INPUT0 and reports, per request, the batch it was in:
BATCH = rows in the whole execute call, NREQ = requests in it, SEQNO = how
many execute calls this instance ran (1 = first), PID = the instance's
process, T0/T1 = when its execute began and ended (``time.time()``). Config ``parameters { key: "delay_ms" }`` sleeps in each execute.

``seq_sum``: running sum per sequence. Explicit state (kept in the model,
keyed by the CORRID control input) unless the config has a ``state`` entry
(implicit: STATE_IN -> STATE_OUT). Reports the START/END/READY control values
it saw (CTL), the CORRID (CORR_OUT), its PID and its index in the batch (SLOT); null requests (READY false)
get an empty response.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.repo import add_model

__all__ = [
    "BATCH_REPORT",
    "SEQ_SUM",
    "add_batch_model",
    "add_seq_model",
    "batch_config",
    "seq_config",
]

BATCH_REPORT = """
import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        delay = config.get("parameters", {}).get("delay_ms", {}).get("string_value", "0")
        self.delay = float(delay) / 1000.0
        self.calls = 0

    def execute(self, requests):
        self.calls += 1
        began = time.time()
        arrays = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        total = sum(int(a.shape[0]) for a in arrays)
        asked = [json.loads(r.parameters() or "{}").get("sleep_ms", 0) for r in requests]
        delay = max([self.delay] + [float(ms) / 1000.0 for ms in asked])
        if delay:
            time.sleep(delay)
        responses = []
        for x in arrays:
            rows = x.shape[0]
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT0", x.copy()),
                        pb_utils.Tensor("BATCH", np.full((rows, 1), total, np.int32)),
                        pb_utils.Tensor("NREQ", np.full((rows, 1), len(requests), np.int32)),
                        pb_utils.Tensor("SEQNO", np.full((rows, 1), self.calls, np.int32)),
                        pb_utils.Tensor("PID", np.full((rows, 1), os.getpid(), np.int32)),
                        pb_utils.Tensor("T0", np.full((rows, 1), began, np.float64)),
                        pb_utils.Tensor("T1", np.full((rows, 1), time.time(), np.float64)),
                    ]
                )
            )
        return responses
"""

SEQ_SUM = """
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


def _scalar(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy().reshape(-1)[0]


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.implicit = bool(config["sequence_batching"].get("state"))
        self.sums = {}

    def execute(self, requests):
        responses = []
        for slot, request in enumerate(requests):
            x = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            start, end, ready = (_scalar(request, n) for n in ("START", "END", "READY"))
            corr = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy()
            if not ready:  # a null request in an idle slot (direct strategy): its response is dropped
                responses.append(pb_utils.InferenceResponse([]))
                continue
            key = corr.reshape(-1)[0]
            if self.implicit:
                state = pb_utils.get_input_tensor_by_name(request, "STATE_IN").as_numpy()
                total = (np.zeros_like(x) if start else state) + x
            else:
                total = (np.zeros_like(x) if start else self.sums[key]) + x
                self.sums[key] = total
                if end:
                    del self.sums[key]
            ctl = np.array([[start, end, ready]], np.int32).reshape([1] * (x.ndim - 1) + [3])
            outputs = [
                pb_utils.Tensor("OUTPUT", total.astype(np.float32)),
                pb_utils.Tensor("CTL", ctl),
                pb_utils.Tensor("CORR_OUT", corr.copy()),
                pb_utils.Tensor("PID", np.full(x.shape, os.getpid(), np.int32)),
                pb_utils.Tensor("SLOT", np.full(x.shape, slot, np.int32)),
            ]
            if self.implicit:
                outputs.append(pb_utils.Tensor("STATE_OUT", total.astype(np.float32)))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
"""


def batch_config(
    max_batch_size: int = 8,
    dynamic: str | None = "",
    delay_ms: int = 0,
    count: int = 1,
    ragged: bool = False,
    groups: str | None = None,
) -> str:
    """config.pbtxt of a ``batch_report`` model.

    :param dynamic: the dynamic_batching body (None: no dynamic batcher).
    :param groups: the instance_group entries (default: ``count`` KIND_CPU instances).
    """
    batching = "" if dynamic is None else f"dynamic_batching {{ {dynamic} }}"
    groups = groups or f"{{ count: {count} kind: KIND_CPU }}"
    return f"""
        backend: "python"
        max_batch_size: {max_batch_size}
        input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] {"allow_ragged_batch: true" if ragged else ""} }} ]
        output [
          {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }},
          {{ name: "BATCH" data_type: TYPE_INT32 dims: [ 1 ] }},
          {{ name: "NREQ" data_type: TYPE_INT32 dims: [ 1 ] }},
          {{ name: "SEQNO" data_type: TYPE_INT32 dims: [ 1 ] }},
          {{ name: "PID" data_type: TYPE_INT32 dims: [ 1 ] }},
          {{ name: "T0" data_type: TYPE_FP64 dims: [ 1 ] }},
          {{ name: "T1" data_type: TYPE_FP64 dims: [ 1 ] }}
        ]
        {batching}
        parameters {{ key: "delay_ms" value {{ string_value: "{delay_ms}" }} }}
        instance_group [ {groups} ]
    """


def seq_config(
    strategy: str = "direct { }",
    implicit: bool = False,
    corrid_type: str = "TYPE_UINT64",
    idle_us: int = 5_000_000,
    count: int = 2,
    max_batch_size: int = 2,
) -> str:
    """config.pbtxt of a ``seq_sum`` model."""
    state = (
        """state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ]
                 initial_state { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true name: "zero" } } ]"""
        if implicit
        else ""
    )
    corr_out = "TYPE_STRING" if corrid_type == "TYPE_STRING" else corrid_type
    return f"""
        backend: "python"
        max_batch_size: {max_batch_size}
        input [ {{ name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] }} ]
        output [
          {{ name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] }},
          {{ name: "CTL" data_type: TYPE_INT32 dims: [ 3 ] }},
          {{ name: "CORR_OUT" data_type: {corr_out} dims: [ 1 ] }},
          {{ name: "PID" data_type: TYPE_INT32 dims: [ 1 ] }},
          {{ name: "SLOT" data_type: TYPE_INT32 dims: [ 1 ] }}
        ]
        sequence_batching {{
          max_sequence_idle_microseconds: {idle_us}
          {strategy}
          control_input [
            {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
            {{ name: "END" control [ {{ kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] }} ] }},
            {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] }} ] }},
            {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid_type} }} ] }}
          ]
          {state}
        }}
        instance_group [ {{ count: {count} kind: KIND_CPU }} ]
    """


def add_batch_model(repo: Path, name: str, config: str) -> None:
    """Add a ``batch_report`` model."""
    add_model(repo, name, config, files={"1/model.py": BATCH_REPORT})


def add_seq_model(repo: Path, name: str, config: str) -> None:
    """Add a ``seq_sum`` model."""
    add_model(repo, name, config, files={"1/model.py": SEQ_SUM})
