"""An example third-party backend for tritium: ``add_sub``.

Copy this folder into a backends directory (``<backends>/add_sub/``) and
start ``tritium-server --backend-directory=<backends> ...``; a model whose
config says ``backend: "add_sub"`` is then served by this file, with no
change to tritium. See docs/backend_api.md.

The model takes two tensors of the same shape and datatype, ``INPUT0`` and
``INPUT1``, and returns ``OUTPUT0 = INPUT0 + INPUT1`` and
``OUTPUT1 = INPUT0 - INPUT1``. It shows every entry point:

* auto-complete: a config without inputs/outputs gets FP32 ``[-1]``
  tensors (the ``datatype`` model parameter changes the type);
* backend settings from ``--backend-config=add_sub,<key>=<value>``;
* per-instance state, batches of several requests, error responses for one
  bad request without failing the others, and an output written straight
  into shared memory with ``request.output_buffer``.
"""

from __future__ import annotations

import logging

import numpy as np

from tritium.core.backend.api import Backend, Model, ModelInstance, Request
from tritium.core.errors import Code, TritonError

#: the API major version this backend was written against
TRITONBACKEND_API_VERSION = (1, 0)

log = logging.getLogger("tritium.backend.add_sub")


def TRITONBACKEND_Initialize(backend: Backend) -> None:
    """Once per worker process: read the backend settings."""
    backend.state = {"greeting": backend.config.get("greeting", "")}
    if backend.state["greeting"]:
        log.info("add_sub backend says: %s", backend.state["greeting"])


def TRITONBACKEND_ModelInitialize(model: Model) -> None:
    """Check (and, with auto-complete, complete) the model config."""
    config = model.config
    if model.auto_complete_config and not config.get("input"):
        dtype = model.parameter("datatype", "TYPE_FP32")
        config = dict(config)
        config["input"] = [{"name": f"INPUT{i}", "data_type": dtype, "dims": [-1]} for i in range(2)]
        config["output"] = [{"name": f"OUTPUT{i}", "data_type": dtype, "dims": [-1]} for i in range(2)]
        model.set_config(config)
    names = sorted(i["name"] for i in model.config.get("input", []))
    if names != ["INPUT0", "INPUT1"]:
        raise TritonError(Code.INVALID_ARG, f"add_sub model '{model.name}' needs inputs INPUT0 and INPUT1, got {names}")


def TRITONBACKEND_ModelInstanceInitialize(instance: ModelInstance) -> None:
    """Once per instance (this worker): keep a counter of executions."""
    instance.state = {"executions": 0}


def TRITONBACKEND_ModelInstanceExecute(instance: ModelInstance, requests: list[Request]) -> None:
    """Answer every request of the batch; a bad request gets an error response, the others succeed."""
    instance.state["executions"] += 1
    for request in requests:
        a, b = request.input("INPUT0"), request.input("INPUT1")
        if a.shape != b.shape:
            request.respond(
                error=TritonError(Code.INVALID_ARG, f"INPUT0 shape {list(a.shape)} != INPUT1 shape {list(b.shape)}")
            )
            continue
        total = request.output_buffer("OUTPUT0", _kserve(a.dtype), a.shape)
        np.add(a, b, out=total)  # written straight into shared memory: no copy on the way out
        request.respond({"OUTPUT0": total, "OUTPUT1": a - b}, parameters={"executions": instance.state["executions"]})


def TRITONBACKEND_ModelInstanceFinalize(instance: ModelInstance) -> None:
    log.info("add_sub instance %s ran %d executions", instance.name, instance.state["executions"])


def _kserve(dtype: np.dtype) -> str:
    return {
        np.dtype("float32"): "FP32",
        np.dtype("float64"): "FP64",
        np.dtype("int32"): "INT32",
        np.dtype("int64"): "INT64",
    }[np.dtype(dtype)]
