"""The ``identity`` backend: every output is a copy of the input with the same position.

The reference backend for tests and benchmarks, like Triton's identity
backend: the model config pairs inputs and outputs by position (``INPUT0`` ->
``OUTPUT0``); each output has the input's shape and datatype. Outputs are
sent straight from the request's input block in shared memory: no copy at all.

Optional config ``parameters``: ``execute_delay_ms`` (string) sleeps that
long in each execute (for scheduling tests).
"""

from __future__ import annotations

import time

from tritium.core.backend.api import Model, ModelInstance, Request
from tritium.core.errors import Code, TritonError


def TRITONBACKEND_ModelInitialize(model: Model) -> None:
    inputs = model.config.get("input", [])
    outputs = model.config.get("output", [])
    if len(inputs) != len(outputs):
        raise TritonError(
            Code.INVALID_ARG,
            f"identity model '{model.name}' needs as many outputs as inputs, "
            f"got {len(inputs)} inputs and {len(outputs)} outputs",
        )
    for inp, out in zip(inputs, outputs):
        if inp.get("data_type") != out.get("data_type"):
            raise TritonError(
                Code.INVALID_ARG,
                f"identity model '{model.name}': output '{out['name']}' must have the datatype of "
                f"input '{inp['name']}'",
            )
    model.state = {
        "pairs": [(i["name"], o["name"]) for i, o in zip(inputs, outputs)],
        "delay_s": float(model.parameter("execute_delay_ms", "0") or 0) / 1000.0,
    }


def TRITONBACKEND_ModelInstanceExecute(instance: ModelInstance, requests: list[Request]) -> None:
    state = instance.model.state
    if state["delay_s"]:
        time.sleep(state["delay_s"])
    for request in requests:
        outputs = {}
        for input_name, output_name in state["pairs"]:
            if input_name in request.inputs:
                outputs[output_name] = request.inputs[input_name]
        request.respond(outputs)
