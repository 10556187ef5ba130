"""Triton's documented python-backend examples, served by tritium, answer exactly as Triton 2.51 does.

Black-box: one tritium-server subprocess for the module on a copy of examples/python_models
(add_sub, the decoupled repeat_int32 and square_int32, the auto-complete pair, BLS with exec(),
async_exec() and exec(decoupled=True), args_params, raise_in_execute). The requests are the cases
of scripts/compare_triton.py (raw HTTP, raw gRPC stubs, gRPC streaming); EXPECTED holds the
answers real Triton 2.51 (nvidia-pytriton 0.7.0, python backend) gave to the same requests on
the same models, so CI needs no Triton. To re-record after changing a model or a case:

    /work/ref/start_triton.sh <abs path>/examples/python_models triton.pid triton.log
    python scripts/compare_triton.py --triton-http 127.0.0.1:18000 --triton-grpc 127.0.0.1:18001 \\
        --record triton.json

Paths to model.py in tracebacks are replaced by ``<repo>`` on both sides, and the line numbers in
them are those of the model.py files as they are.
"""

from __future__ import annotations

import contextlib
import queue
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.support.server import ServerProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples" / "python_models"
sys.path.insert(0, str(REPO_ROOT / "scripts"))
import compare_triton  # noqa: E402  (scripts/ is not a package)

MODELS = sorted(p.name for p in EXAMPLES.iterdir() if (p / "config.pbtxt").is_file())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("python_examples")
    repo = root / "models"
    shutil.copytree(EXAMPLES, repo, ignore=shutil.ignore_patterns("__pycache__"))
    proc = ServerProcess([repo], log_path=root / "server.log")
    proc.start()
    try:
        wait_models_ready(proc)
        yield proc
    finally:
        proc.stop()


def wait_models_ready(server: ServerProcess, timeout: float = 180.0) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                if all(client.is_model_ready(m) for m in MODELS):
                    return
            except InferenceServerException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"python example models not ready after {timeout} s:\n{server.log()}")
    finally:
        client.close()


@pytest.fixture(scope="module")
def target(server: ServerProcess) -> compare_triton.Target:
    return compare_triton.Target(server.http_url, server.grpc_url)


# -- the answers of Triton 2.51 --------------------------------------------------------------------
SUM = [2.0, 6.25, -1.0, 0.30000001192092896]  # A + B in float32
DIFF = [1.0, -1.75, -5.0, -0.10000000149011612]  # A - B
NEG_DIFF = [-1.0, 1.75, 5.0, 0.10000000149011612]  # B - A
NOTE = (
    " NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be "
    "prepended to each input shape. If you want to specify the full shape including the batch dim in your "
    "input dims config, try setting max_batch_size to zero. See the model configuration docs for more info "
    "on max_batch_size."
)
DECOUPLED_BLS = (
    "Model square_int32 - Error when running inference: Model square_int32 is using the decoupled. "
    "The current BLS request call doesn't support models using the decoupled transaction policy. Please use "
    "'decoupled=True' argument to the 'exec' or 'async_exec' calls for decoupled models.'"
)
NOT_READY_BLS = (
    "Model does_not_exist - Error when running inference: Failed for execute the inference request. "
    "Model 'does_not_exist' is not ready."
)


def tensor(name: str, datatype: str, shape: list[int], data: list[Any]) -> dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def fp32(name: str, data: list[float]) -> dict[str, Any]:
    return tensor(name, "FP32", [len(data)], data)


def http_ok(model: str, outputs: list[dict[str, Any]], request_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"model_name": model, "model_version": "1", "outputs": outputs}
    if request_id is not None:
        body["id"] = request_id
    return {"status": 200, "body": body}


def grpc_ok(model: str, outputs: list[dict[str, Any]], request_id: str = "") -> dict[str, Any]:
    return {
        "code": "OK",
        "response": {"id": request_id, "model_name": model, "model_version": "1", "outputs": outputs},
    }


def http_error(status: int, message: str) -> dict[str, Any]:
    return {"status": status, "body": {"error": message}}


def grpc_error(code: str, message: str) -> dict[str, Any]:
    return {"code": code, "details": message}


def both(name: str, status: int, code: str, message: str) -> dict[str, Any]:
    """The same error over HTTP (status) and gRPC (code)."""
    return {f"http {name}": http_error(status, message), f"grpc {name}": grpc_error(code, message)}


def both_ok(name: str, model: str, outputs: list[dict[str, Any]], request_id: str | None = None) -> dict[str, Any]:
    return {
        f"http {name}": http_ok(model, outputs, request_id),
        f"grpc {name}": grpc_ok(model, outputs, request_id or ""),
    }


def stream_response(
    request_id: str, model: str, outputs: list[dict[str, Any]], final: bool | None, version: str = "1"
) -> dict[str, Any]:
    response: dict[str, Any] = {"id": request_id, "model_name": model, "model_version": version, "outputs": outputs}
    if final is not None:
        response["parameters"] = {"triton_final_response": final}
    return {"response": response}


def final_only(request_id: str, model: str) -> dict[str, Any]:
    """The empty response that only carries the final flag (model_version is empty in it)."""
    return stream_response(request_id, model, [], True, version="")


def metadata(model: str, inputs: list[tuple[str, str, list[int]]], outputs: list[tuple[str, str, list[int]]]):
    return {
        "status": 200,
        "body": {
            "name": model,
            "versions": ["1"],
            "platform": "python",
            "inputs": [{"name": n, "datatype": d, "shape": s} for n, d, s in inputs],
            "outputs": [{"name": n, "datatype": d, "shape": s} for n, d, s in outputs],
        },
    }


def config_input(name: str, data_type: str, dims: list[int]) -> dict[str, Any]:
    return {
        "name": name, "data_type": data_type, "format": "FORMAT_NONE", "dims": dims, "is_shape_tensor": False,
        "allow_ragged_batch": False, "optional": False, "is_non_linear_format_io": False,
    }  # fmt: skip


def config_output(name: str, data_type: str, dims: list[int]) -> dict[str, Any]:
    return {
        "name": name, "data_type": data_type, "dims": dims, "label_filename": "", "is_shape_tensor": False,
        "is_non_linear_format_io": False,
    }  # fmt: skip


def model_config(
    name: str,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    max_batch_size: int = 0,
    group_name: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Triton's full config JSON for a python model (GET /v2/models/<m>/config)."""
    config: dict[str, Any] = {
        "name": name, "platform": "", "backend": "python", "runtime": "",
        "version_policy": {"latest": {"num_versions": 1}}, "max_batch_size": max_batch_size,
        "input": inputs, "output": outputs, "batch_input": [], "batch_output": [],
        "optimization": {
            "priority": "PRIORITY_DEFAULT", "input_pinned_memory": {"enable": True},
            "output_pinned_memory": {"enable": True}, "gather_kernel_buffer_threshold": 0,
            "eager_batching": False,
        },
        "instance_group": [
            {
                # "<model>_0" when config.pbtxt has an instance_group, "<model>" when Triton adds it
                "name": group_name or name, "kind": "KIND_CPU", "count": 1, "gpus": [],
                "secondary_devices": [], "profile": [], "passive": False, "host_policy": "",
            }
        ],
        "default_model_filename": "model.py", "cc_model_filenames": {}, "metric_tags": {},
        "parameters": {}, "model_warmup": [],
    }  # fmt: skip
    config.update(extra)
    return config


ADD_SUB_CONFIG_IO = {
    "inputs": [config_input("INPUT0", "TYPE_FP32", [4]), config_input("INPUT1", "TYPE_FP32", [4])],
    "outputs": [config_output("OUTPUT0", "TYPE_FP32", [4]), config_output("OUTPUT1", "TYPE_FP32", [4])],
}
ARGS = {
    "model_config": model_config(
        "args_params",
        [config_input("INPUT0", "TYPE_INT32", [1])],
        [config_output("ARGS", "TYPE_STRING", [1]), config_output("PARAMETERS", "TYPE_STRING", [1])],
        group_name="args_params_0",
        parameters={"greeting": {"string_value": "hello"}},
    ),
    "model_instance_device_id": "0",
    "model_instance_kind": "CPU",
    "model_instance_name": "args_params_0_0",
    "model_name": "args_params",
    "model_repository": "args_params",  # the last component of the model's folder
    "model_version": "1",
}
ADD_SUB_IO = [("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])], [("OUTPUT0", "FP32", [4]), ("OUTPUT1", "FP32", [4])]
BLS_IN = [("MODEL_NAME", "BYTES", [1]), ("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])]


def _execute_error(instance: str, message: str, line: int, model: str) -> str:
    """How Triton reports an exception that escaped execute (with the Python traceback)."""
    return (
        f"Failed to process the request(s) for model '{instance}', message: {message}\n\n"
        f"At:\n  <repo>/{model}/1/model.py({line}): execute\n"
    )


EXPECTED: dict[str, Any] = {
    # model metadata and auto-completed configs
    "http metadata add_sub": metadata("add_sub", *ADD_SUB_IO),
    "http metadata nobatch_auto_complete": metadata("nobatch_auto_complete", *ADD_SUB_IO),
    "http metadata batch_auto_complete": metadata(
        "batch_auto_complete",
        [("INPUT0", "FP32", [-1, 4]), ("INPUT1", "FP32", [-1, 4])],
        [("OUTPUT0", "FP32", [-1, 4]), ("OUTPUT1", "FP32", [-1, 4])],
    ),
    "http metadata repeat_int32": metadata(
        "repeat_int32",
        [("IN", "INT32", [-1]), ("DELAY", "UINT32", [-1]), ("WAIT", "UINT32", [1])],
        [("OUT", "INT32", [1]), ("IDX", "UINT32", [1])],
    ),
    "http metadata square_int32": metadata("square_int32", [("IN", "INT32", [1])], [("OUT", "INT32", [1])]),
    "http metadata bls_sync": metadata("bls_sync", BLS_IN, ADD_SUB_IO[1]),
    "http metadata bls_async": metadata("bls_async", BLS_IN, [*ADD_SUB_IO[1], ("OUTPUT2", "FP32", [4])]),
    "http metadata bls_decoupled": metadata(
        "bls_decoupled",
        [("IN", "INT32", [1]), ("DECOUPLED", "BOOL", [1])],  # DECOUPLED is optional: metadata does not say
        [("SUM", "INT32", [1]), ("COUNT", "INT32", [1])],
    ),
    "http metadata args_params": metadata(
        "args_params", [("INPUT0", "INT32", [1])], [("ARGS", "BYTES", [1]), ("PARAMETERS", "BYTES", [1])]
    ),
    "http metadata raise_in_execute": metadata(
        "raise_in_execute", [("INPUT0", "INT32", [1])], [("OUTPUT0", "INT32", [1])]
    ),
    "http config nobatch_auto_complete": {
        "status": 200,
        "body": model_config("nobatch_auto_complete", ADD_SUB_CONFIG_IO["inputs"], ADD_SUB_CONFIG_IO["outputs"]),
    },
    "http config batch_auto_complete": {
        "status": 200,
        "body": model_config(
            "batch_auto_complete",
            ADD_SUB_CONFIG_IO["inputs"],
            ADD_SUB_CONFIG_IO["outputs"],
            max_batch_size=4,
            dynamic_batching={
                "preferred_batch_size": [4],
                "max_queue_delay_microseconds": 0,
                "preserve_ordering": False,
                "priority_levels": 0,
                "default_priority_level": 0,
                "priority_queue_policy": {},
            },
        ),
    },
    "http config repeat_int32": {
        "status": 200,
        "body": model_config(
            "repeat_int32",
            [
                config_input("IN", "TYPE_INT32", [-1]),
                config_input("DELAY", "TYPE_UINT32", [-1]),
                config_input("WAIT", "TYPE_UINT32", [1]),
            ],
            [config_output("OUT", "TYPE_INT32", [1]), config_output("IDX", "TYPE_UINT32", [1])],
            group_name="repeat_int32_0",
            model_transaction_policy={"decoupled": True},
        ),
    },
    # add_sub
    "http add_sub": http_ok("add_sub", [fp32("OUTPUT0", SUM), fp32("OUTPUT1", DIFF)], request_id="add-1"),
    "grpc add_sub": grpc_ok("add_sub", [fp32("OUTPUT0", SUM), fp32("OUTPUT1", DIFF)], request_id="add-1"),
    "http add_sub binary (tritonclient)": {"OUTPUT0": SUM, "OUTPUT1": DIFF},
    **both_ok("add_sub only OUTPUT1", "add_sub", [fp32("OUTPUT1", DIFF)]),
    **both(
        "add_sub wrong shape",
        400,
        "INVALID_ARGUMENT",
        "[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [4], got [3]. ",
    ),
    **both(
        "add_sub batch dimension on a non-batching model",
        400,
        "INVALID_ARGUMENT",
        "[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [4], got [1,4]. ",
    ),
    **both(
        "add_sub wrong dtype",
        400,
        "INVALID_ARGUMENT",
        "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'INT32', but model 'add_sub' expects 'FP32'",
    ),
    **both(
        "add_sub missing input",
        400,
        "INVALID_ARGUMENT",
        "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], "
        "but missing required input(s) ['INPUT1']. Please provide all required input(s).",
    ),
    **both(
        "add_sub unknown output", 400, "INVALID_ARGUMENT", "unexpected inference output 'OUTPUT9' for model 'add_sub'"
    ),
    # auto-complete
    **both_ok("nobatch_auto_complete", "nobatch_auto_complete", [fp32("OUTPUT0", SUM), fp32("OUTPUT1", DIFF)]),
    "http batch_auto_complete batch of 2": http_ok(
        "batch_auto_complete",
        [
            tensor("OUTPUT0", "FP32", [2, 4], [*SUM, 3.5, 11.25, 2.0, 1.5]),
            tensor("OUTPUT1", "FP32", [2, 4], [*DIFF, 1.5, -4.75, -6.0, 0.7000000476837158]),
        ],
    ),
    "grpc batch_auto_complete batch of 2": grpc_ok(
        "batch_auto_complete",
        [
            tensor("OUTPUT0", "FP32", [2, 4], [SUM, [3.5, 11.25, 2.0, 1.5]]),
            tensor("OUTPUT1", "FP32", [2, 4], [DIFF, [1.5, -4.75, -6.0, 0.7000000476837158]]),
        ],
    ),
    **both(
        "batch_auto_complete batch of 5 (max 4)",
        400,
        "INVALID_ARGUMENT",
        "[request id: <id_unknown>] inference request batch-size must be <= 4 for 'batch_auto_complete'",
    ),
    "http batch_auto_complete without batch dimension": http_error(
        400,
        "[request id: <id_unknown>] unexpected shape for input 'INPUT1' for model 'batch_auto_complete'. "
        "Expected [-1,4], got [4]." + NOTE,
    ),
    # BLS
    **both_ok("bls_sync add_sub", "bls_sync", [fp32("OUTPUT0", SUM), fp32("OUTPUT1", DIFF)]),
    **both_ok(
        "bls_async add_sub", "bls_async", [fp32("OUTPUT0", SUM), fp32("OUTPUT1", DIFF), fp32("OUTPUT2", NEG_DIFF)]
    ),
    # bls_sync returns the inner call's error object as its error response: code INTERNAL
    **both("bls_sync missing model", 500, "INTERNAL", NOT_READY_BLS),
    "grpc bls_sync calls a decoupled model without decoupled=True": grpc_error("INTERNAL", DECOUPLED_BLS),
    # bls_async raises TritonModelException with the inner error's message
    **both(
        "bls_async missing model",
        500,
        "INTERNAL",
        _execute_error("bls_async_0_0", "TritonModelException: " + NOT_READY_BLS, 35, "bls_async"),
    ),
    "grpc bls_async calls a decoupled model without decoupled=True": grpc_error(
        "INTERNAL", _execute_error("bls_async_0_0", "TritonModelException: " + DECOUPLED_BLS, 35, "bls_async")
    ),
    "http bls_decoupled 3": http_ok(
        "bls_decoupled", [tensor("SUM", "INT32", [1], [9]), tensor("COUNT", "INT32", [1], [3])]
    ),
    "grpc bls_decoupled 4": grpc_ok(
        "bls_decoupled", [tensor("SUM", "INT32", [1], [16]), tensor("COUNT", "INT32", [1], [4])]
    ),
    "grpc bls_decoupled 0": grpc_ok(
        "bls_decoupled", [tensor("SUM", "INT32", [1], [0]), tensor("COUNT", "INT32", [1], [0])]
    ),
    # exec() without decoupled=True on a decoupled model: Triton refuses before sending, whatever n is
    "grpc bls_decoupled 2 with exec() without decoupled=True": grpc_error("INTERNAL", DECOUPLED_BLS),
    "grpc bls_decoupled 0 with exec() without decoupled=True": grpc_error("INTERNAL", DECOUPLED_BLS),
    # args and parameters (PARAMETERS_text, HTTP only: request.parameters() as the model got it)
    "http args_params": {
        "ARGS": ARGS,
        "PARAMETERS": {"s": "hello", "i": 42, "b": True},
        "PARAMETERS_text": '{"s":"hello","i":42,"b":true}',
    },
    "grpc args_params": {"ARGS": ARGS, "PARAMETERS": {"s": "hello", "i": 42, "b": True}},
    "http args_params without parameters": {"ARGS": ARGS, "PARAMETERS": {}, "PARAMETERS_text": "{}"},
    "grpc args_params without parameters": {"ARGS": ARGS, "PARAMETERS": {}},
    "grpc args_params double parameter": {"ARGS": ARGS, "PARAMETERS": {"d": 2.5}},
    # an exception escaping execute, then the model serves on
    **both(
        "raise_in_execute raises",
        500,
        "INTERNAL",
        _execute_error("raise_in_execute_0_0", "ValueError: INPUT0 was 1", 16, "raise_in_execute"),
    ),
    "http raise_in_execute serves after raising": http_ok("raise_in_execute", [tensor("OUTPUT0", "INT32", [1], [5])]),
    # decoupled models over gRPC streaming (each request asks for the empty final response)
    "grpc stream square_int32 3 then 0": [
        *[stream_response("sq-3", "square_int32", [tensor("OUT", "INT32", [1], [3])], False)] * 3,
        final_only("sq-3", "square_int32"),
        final_only("sq-0", "square_int32"),
    ],
    "grpc stream square_int32 wrong dtype": [
        {
            "error": "[request id: sq-bad] inference input 'IN' data-type is 'FP32', but model 'square_int32' expects 'INT32'",
            "response": {"id": "sq-bad", "model_name": "", "model_version": "", "outputs": []},
        }
    ],
    "grpc stream repeat_int32": [
        *[
            stream_response(
                "rep-1",
                "repeat_int32",
                [tensor("OUT", "INT32", [1], [value]), tensor("IDX", "UINT32", [1], [i])],
                False,
            )
            for i, value in enumerate([4, -2, 0, 2147483647])
        ],
        final_only("rep-1", "repeat_int32"),
    ],
    "grpc stream repeat_int32 empty IN": [final_only("rep-empty", "repeat_int32")],
    "grpc stream repeat_int32 IN and DELAY shapes differ": [
        {
            "error": "IN and DELAY must have the same shape, got [3] and [2]",
            "response": {
                "id": "rep-bad",
                "model_name": "repeat_int32",
                "model_version": "",
                "outputs": [],
                "parameters": {"triton_final_response": True},
            },
        }
    ],
    # without triton_enable_empty_final_response the final flag sends nothing
    "grpc stream repeat_int32 without empty final response": [
        stream_response(
            "rep-nofinal",
            "repeat_int32",
            [tensor("OUT", "INT32", [1], [value]), tensor("IDX", "UINT32", [1], [i])],
            False,
        )
        for i, value in enumerate([7, 8])
    ],
    "grpc stream add_sub (not decoupled)": [
        stream_response("as-stream", "add_sub", [fp32("OUTPUT0", SUM), fp32("OUTPUT1", DIFF)], True)
    ],
    "grpc unary square_int32 (decoupled)": grpc_error(
        "UNIMPLEMENTED", "ModelInfer RPC doesn't support models with decoupled transaction policy"
    ),
    "http infer square_int32 (decoupled)": http_error(
        501, "HTTP end point doesn't support models with decoupled transaction policy"
    ),
    "http generate_stream square_int32": {
        "status": 200,
        "text": 'data: {"OUT":2,"model_name":"square_int32","model_version":"1"}\n\n' * 2,
    },
}

# -- where tritium answers differently (known, reported; each entry says which side looks wrong) ----
#: case -> (why, what tritium answers instead, derived from Triton's answer)
KNOWN_DIFFERENCES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "http batch_auto_complete without batch dimension": (
        (
            "Triton names the last of two wrong inputs (its unordered_map order), tritium the first in "
            "request order; tritium's choice is the sensible one, but it is a difference"
        ),
        lambda e: {"status": 400, "body": {"error": e["body"]["error"].replace("'INPUT1'", "'INPUT0'")}},
    ),
}


def test_every_case_has_a_recorded_answer() -> None:
    assert sorted(EXPECTED) == sorted(compare_triton.CASES)
    assert set(KNOWN_DIFFERENCES) <= set(EXPECTED)


@pytest.mark.parametrize("case", sorted(compare_triton.CASES))
def test_answers_like_triton(target: compare_triton.Target, case: str) -> None:
    answer = compare_triton.run_case(case, target)
    expected = EXPECTED[case]
    if case in KNOWN_DIFFERENCES:
        why, tritium_answer = KNOWN_DIFFERENCES[case]
        if answer == expected:
            pytest.fail(f"tritium now answers {case!r} as Triton does: remove it from KNOWN_DIFFERENCES ({why})")
        expected = tritium_answer(expected)
    assert answer == expected


# -- decoupled behaviour through the stock streaming client ------------------------------------------
@contextlib.contextmanager
def _stream(server: ServerProcess) -> Iterator[tuple[grpcclient.InferenceServerClient, queue.Queue]]:
    """A started stream and the queue its callback fills with (arrival time, result, error)."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((time.monotonic(), result, error)))
    try:
        yield client, results
    except BaseException:
        client.stop_stream(cancel_requests=True)  # do not wait for responses that may never come
        raise
    else:
        client.stop_stream()
    finally:
        client.close()


def _repeat_inputs(values: list[int], delays: list[int], wait: int) -> list[grpcclient.InferInput]:
    arrays = {
        "IN": np.array(values, dtype=np.int32),
        "DELAY": np.array(delays, dtype=np.uint32),
        "WAIT": np.array([wait], dtype=np.uint32),
    }
    inputs = []
    for name, array in arrays.items():
        t = grpcclient.InferInput(name, list(array.shape), "UINT32" if array.dtype == np.uint32 else "INT32")
        t.set_data_from_numpy(array)
        inputs.append(t)
    return inputs


def test_repeat_streams_each_response_when_it_is_ready(server: ServerProcess) -> None:
    """DELAY spaces the responses and WAIT delays only the final flag: responses are not held back."""
    with _stream(server) as (client, results):
        sent = time.monotonic()
        client.async_stream_infer(
            "repeat_int32", _repeat_inputs([10, 20, 30], [300, 300, 300], 1000), request_id="timed",
            enable_empty_final_response=True,
        )  # fmt: skip
        arrivals = []
        while True:
            at, result, error = results.get(timeout=30)
            assert error is None
            response = result.get_response()
            final = response.parameters["triton_final_response"].bool_param
            arrivals.append((at - sent, None if final else int(result.as_numpy("OUT")[0]), final))
            if final:
                break
    assert [(v, f) for _, v, f in arrivals] == [(10, False), (20, False), (30, False), (None, True)]
    times = [t for t, _, _ in arrivals]
    assert times[0] >= 0.29 and times[2] >= 0.89  # each response waited for its DELAY
    assert times[3] >= 1.89  # and the final flag for WAIT as well
    assert times[2] < times[3] - 0.5  # the responses were not held back until the end
    assert times[1] - times[0] >= 0.1 and times[2] - times[1] >= 0.1  # they came one by one


def test_two_decoupled_requests_on_one_stream_interleave(server: ServerProcess) -> None:
    """Two requests in flight at once on one stream; each keeps its own order and its final flag."""
    with _stream(server) as (client, results):
        client.async_stream_infer(
            "repeat_int32", _repeat_inputs([1, 2, 3], [200, 200, 200], 0), request_id="slow",
            enable_empty_final_response=True,
        )  # fmt: skip
        client.async_stream_infer(
            "repeat_int32", _repeat_inputs([7, 8], [50, 50], 0), request_id="fast",
            enable_empty_final_response=True,
        )  # fmt: skip
        seen: dict[str, list[Any]] = {"slow": [], "fast": []}
        order = []
        finals = 0
        while finals < 2:
            _, result, error = results.get(timeout=30)
            assert error is None
            response = result.get_response()
            order.append(response.id)
            if response.parameters["triton_final_response"].bool_param:
                finals += 1
                seen[response.id].append("final")
            else:
                seen[response.id].append(int(result.as_numpy("OUT")[0]))
    assert seen == {"slow": [1, 2, 3, "final"], "fast": [7, 8, "final"]}
    assert order.index("fast") < order.index("slow")  # "fast" was not queued behind "slow"


def test_square_through_the_stream_client(server: ServerProcess) -> None:
    with _stream(server) as (client, results):
        for n in (2, 0, 5):
            t = grpcclient.InferInput("IN", [1], "INT32")
            t.set_data_from_numpy(np.array([n], dtype=np.int32))
            client.async_stream_infer("square_int32", [t], request_id=f"n{n}", enable_empty_final_response=True)
        counts: dict[str, int] = {}
        finals = 0
        while finals < 3:
            _, result, error = results.get(timeout=30)
            assert error is None
            response = result.get_response()
            if response.parameters["triton_final_response"].bool_param:
                finals += 1
                assert len(response.outputs) == 0
                counts.setdefault(response.id, 0)
            else:
                assert result.as_numpy("OUT").tolist() == [int(response.id[1:])]
                counts[response.id] = counts.get(response.id, 0) + 1
    assert counts == {"n2": 2, "n0": 0, "n5": 5}
