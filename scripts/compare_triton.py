#!/usr/bin/env python3
"""Run the python-model example requests against a real Triton and a tritium server; print differences.

Both servers must serve ``examples/python_models`` (Triton's documented python_backend examples,
written for tritium: add_sub, repeat_int32, square_int32, the auto-complete pair, BLS sync/async,
args_params, raise_in_execute). Every case sends the same request to both and reduces the answer
to plain JSON (HTTP status and body, gRPC status code and details, outputs, streamed responses);
machine-specific text (the absolute path of a model.py in a traceback) is replaced by ``<repo>``.

    # real Triton 2.51 (see /work/ref/start_triton.sh) and tritium, both on examples/python_models
    python scripts/compare_triton.py --triton-http 127.0.0.1:18000 --triton-grpc 127.0.0.1:18001 \\
        --tritium-http 127.0.0.1:8000 --tritium-grpc 127.0.0.1:8001

    # one server only: print (or --record) its answers
    python scripts/compare_triton.py --triton-http ... --triton-grpc ... --record triton.json

Exit status: 0 when every case agrees, 1 when any differs, 2 on a usage error.
``tests/integration/test_python_examples.py`` runs the same cases against tritium and compares
them with answers recorded from Triton 2.51, so CI needs no Triton.
"""

from __future__ import annotations

import argparse
import difflib
import http.client
import json
import queue
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CASES", "Target", "normalize_text", "run_case"]

A = [1.5, 2.25, -3.0, 0.1]
B = [0.5, 4.0, 2.0, 0.2]
TIMEOUT = 30.0


@dataclass(frozen=True)
class Target:
    """One server: ``host:port`` of its HTTP and gRPC endpoints."""

    http: str
    grpc: str


# -- normalisation -----------------------------------------------------------------------------
_MODEL_PY = re.compile(r"(?:[A-Za-z]:)?/[^\s\"'()]*?/([A-Za-z0-9_.-]+/[0-9]+/model\.py)")


def normalize_text(text: str) -> str:
    """Replace the absolute path of a model.py (tracebacks) with ``<repo>/<model>/<version>/model.py``."""
    return _MODEL_PY.sub(r"<repo>/\1", text)


def _normalize(value: Any) -> Any:
    if isinstance(value, str):
        return normalize_text(value)
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    return value


# -- HTTP (raw, so the exact status and body are seen) ------------------------------------------
def _http(target: Target, method: str, path: str, body: Any = None, raw: bool = False) -> dict[str, Any]:
    host, port = target.http.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        payload = resp.read()
    finally:
        conn.close()
    text = payload.decode("utf-8", errors="replace")
    if raw:
        return {"status": resp.status, "text": text}
    try:
        parsed: Any = json.loads(text) if text else None
    except ValueError:
        parsed = {"not_json": text}
    return {"status": resp.status, "body": parsed}


def _json_input(name: str, datatype: str, shape: list[int], data: list[Any]) -> dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def _http_infer(target: Target, model: str, inputs: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"inputs": inputs}
    body.update(extra)
    result = _http(target, "POST", f"/v2/models/{model}/infer", body)
    # the response id and the outputs' order are part of the answer; nothing else varies
    return result


# -- gRPC (raw stubs, so the exact status code and details are seen) ----------------------------
_NP = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
}  # fmt: skip


def _stub(target: Target):
    import grpc
    from tritonclient.grpc import service_pb2_grpc

    channel = grpc.insecure_channel(target.grpc)
    return channel, service_pb2_grpc.GRPCInferenceServiceStub(channel)


def _raw(datatype: str, values: list[Any]) -> bytes:
    if datatype == "BYTES":
        out = b""
        for v in values:
            b = v.encode() if isinstance(v, str) else bytes(v)
            out += len(b).to_bytes(4, "little") + b
        return out
    return np.array(values, dtype=_NP[datatype]).tobytes()


def _decode(datatype: str, shape: list[int], raw: bytes) -> list[Any]:
    if datatype == "BYTES":
        items, offset = [], 0
        while offset < len(raw):
            n = int.from_bytes(raw[offset : offset + 4], "little")
            items.append(raw[offset + 4 : offset + 4 + n].decode("utf-8", errors="replace"))
            offset += 4 + n
        return items
    return np.frombuffer(raw, dtype=_NP[datatype]).reshape(shape).tolist()


def _param_value(p: Any) -> Any:
    kind = p.WhichOneof("parameter_choice")
    return None if kind is None else getattr(p, kind)


def _grpc_response(response: Any) -> dict[str, Any]:
    outputs = []
    for i, out in enumerate(response.outputs):
        raw = response.raw_output_contents[i] if i < len(response.raw_output_contents) else b""
        outputs.append(
            {
                "name": out.name,
                "datatype": out.datatype,
                "shape": list(out.shape),
                "data": _decode(out.datatype, list(out.shape), raw),
            }
        )
    result: dict[str, Any] = {
        "model_name": response.model_name,
        "model_version": response.model_version,
        "id": response.id,
        "outputs": outputs,
    }
    params = {k: _param_value(v) for k, v in sorted(response.parameters.items())}
    if params:
        result["parameters"] = params
    return result


def _grpc_request(
    model: str,
    inputs: list[tuple[str, str, list[int], list[Any]]],
    outputs: list[str] | None = None,
    request_id: str = "",
    parameters: dict[str, Any] | None = None,
):
    from tritonclient.grpc import service_pb2 as pb

    request = pb.ModelInferRequest(model_name=model, id=request_id)
    for name, datatype, shape, values in inputs:
        request.inputs.add(name=name, datatype=datatype, shape=shape)
        request.raw_input_contents.append(_raw(datatype, values))
    for name in outputs or []:
        request.outputs.add(name=name)
    for key, value in (parameters or {}).items():
        p = request.parameters[key]
        if isinstance(value, bool):
            p.bool_param = value
        elif isinstance(value, int):
            p.int64_param = value
        elif isinstance(value, float):
            p.double_param = value
        else:
            p.string_param = value
    return request


def _grpc_infer(target: Target, *args: Any, **kwargs: Any) -> dict[str, Any]:
    import grpc

    channel, stub = _stub(target)
    try:
        response = stub.ModelInfer(_grpc_request(*args, **kwargs), timeout=TIMEOUT)
        return {"code": "OK", "response": _grpc_response(response)}
    except grpc.RpcError as e:
        return {"code": e.code().name, "details": e.details()}
    finally:
        channel.close()


def _grpc_stream(
    target: Target, requests: list[Any], settle: float = 0.5, expect: int | None = None
) -> list[dict[str, Any]]:
    """Send ``requests`` on one ModelStreamInfer stream, one after another: each is sent once the
    previous one got its final response or an error (or, with ``expect``, that many messages);
    after the last, wait ``settle`` seconds for stragglers. Returns every message in arrival order."""
    channel, stub = _stub(target)
    outgoing: queue.Queue[Any] = queue.Queue()
    incoming: queue.Queue[Any] = queue.Queue()

    def requests_iter() -> Iterator[Any]:
        while True:
            item = outgoing.get()
            if item is None:
                return
            yield item

    def reader() -> None:
        try:
            for message in stub.ModelStreamInfer(requests_iter(), timeout=TIMEOUT * 2):
                incoming.put(message)
        except Exception as e:  # noqa: BLE001 - recorded as the stream's end
            incoming.put(e)
        incoming.put(None)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    messages: list[dict[str, Any]] = []
    try:
        for request in requests:
            outgoing.put(request)
            deadline = time.monotonic() + TIMEOUT
            received = 0
            while expect is None or received < expect:
                received += 1
                item = incoming.get(timeout=max(0.1, deadline - time.monotonic()))
                if item is None or isinstance(item, Exception):
                    messages.append({"stream_ended": repr(item)})
                    return messages
                entry: dict[str, Any] = {}
                if item.error_message:
                    entry["error"] = item.error_message
                entry["response"] = _grpc_response(item.infer_response)
                messages.append(entry)
                final = entry["response"].get("parameters", {}).get("triton_final_response")
                if item.error_message or final:
                    break
        # anything that still arrives (after an error, say) is part of the answer too
        end = time.monotonic() + settle
        while time.monotonic() < end:
            try:
                item = incoming.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                break
            if item is None or isinstance(item, Exception):
                break
            messages.append({"late": _grpc_response(item.infer_response), "error": item.error_message})
    finally:
        outgoing.put(None)
        channel.close()
    return messages


def _stream_request(model: str, inputs: list[tuple[str, str, list[int], list[Any]]], request_id: str):
    request = _grpc_request(model, inputs, request_id=request_id)
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    return request


# -- cases -------------------------------------------------------------------------------------
CASES: dict[str, Callable[[Target], Any]] = {}


def case(name: str) -> Callable[[Callable[[Target], Any]], Callable[[Target], Any]]:
    def register(fn: Callable[[Target], Any]) -> Callable[[Target], Any]:
        CASES[name] = fn
        return fn

    return register


def _add_sub_inputs(a: list[Any] = A, b: list[Any] = B, dtype: str = "FP32", shape: list[int] | None = None):
    shape = shape or [len(a)]
    return [("INPUT0", dtype, shape, a), ("INPUT1", "FP32", [len(b)], b)]


def _json_inputs(inputs: list[tuple[str, str, list[int], list[Any]]]) -> list[dict[str, Any]]:
    return [_json_input(*i) for i in inputs]


MODELS = [
    "add_sub", "repeat_int32", "square_int32", "nobatch_auto_complete", "batch_auto_complete",
    "bls_sync", "bls_async", "bls_decoupled", "args_params", "raise_in_execute",
]  # fmt: skip

for _model in MODELS:
    case(f"http metadata {_model}")(lambda t, m=_model: _http(t, "GET", f"/v2/models/{m}"))
for _model in ("nobatch_auto_complete", "batch_auto_complete", "repeat_int32"):
    case(f"http config {_model}")(lambda t, m=_model: _http(t, "GET", f"/v2/models/{m}/config"))


@case("http add_sub")
def _(t: Target) -> Any:
    return _http_infer(t, "add_sub", _json_inputs(_add_sub_inputs()), id="add-1")


@case("grpc add_sub")
def _(t: Target) -> Any:
    return _grpc_infer(t, "add_sub", _add_sub_inputs(), request_id="add-1")


@case("http add_sub binary (tritonclient)")
def _(t: Target) -> Any:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(t.http)
    try:
        inputs = []
        for name, values in (("INPUT0", A), ("INPUT1", B)):
            tensor = httpclient.InferInput(name, [4], "FP32")
            tensor.set_data_from_numpy(np.array(values, dtype=np.float32), binary_data=True)
            inputs.append(tensor)
        outputs = [httpclient.InferRequestedOutput(n, binary_data=True) for n in ("OUTPUT0", "OUTPUT1")]
        result = client.infer("add_sub", inputs, outputs=outputs)
        return {n: result.as_numpy(n).tolist() for n in ("OUTPUT0", "OUTPUT1")}
    finally:
        client.close()


@case("http add_sub only OUTPUT1")
def _(t: Target) -> Any:
    return _http_infer(t, "add_sub", _json_inputs(_add_sub_inputs()), outputs=[{"name": "OUTPUT1"}])


@case("grpc add_sub only OUTPUT1")
def _(t: Target) -> Any:
    return _grpc_infer(t, "add_sub", _add_sub_inputs(), outputs=["OUTPUT1"])


@case("http add_sub wrong shape")
def _(t: Target) -> Any:
    return _http_infer(t, "add_sub", _json_inputs(_add_sub_inputs(a=A[:3])))


@case("grpc add_sub wrong shape")
def _(t: Target) -> Any:
    return _grpc_infer(t, "add_sub", _add_sub_inputs(a=A[:3]))


@case("http add_sub batch dimension on a non-batching model")
def _(t: Target) -> Any:
    return _http_infer(t, "add_sub", _json_inputs(_add_sub_inputs(shape=[1, 4])))


@case("grpc add_sub batch dimension on a non-batching model")
def _(t: Target) -> Any:
    return _grpc_infer(t, "add_sub", _add_sub_inputs(shape=[1, 4]))


@case("http add_sub wrong dtype")
def _(t: Target) -> Any:
    return _http_infer(t, "add_sub", _json_inputs(_add_sub_inputs(a=[1, 2, 3, 4], dtype="INT32")))


@case("grpc add_sub wrong dtype")
def _(t: Target) -> Any:
    return _grpc_infer(t, "add_sub", _add_sub_inputs(a=[1, 2, 3, 4], dtype="INT32"))


@case("http add_sub missing input")
def _(t: Target) -> Any:
    return _http_infer(t, "add_sub", _json_inputs(_add_sub_inputs()[:1]))


@case("grpc add_sub missing input")
def _(t: Target) -> Any:
    return _grpc_infer(t, "add_sub", _add_sub_inputs()[:1])


@case("http add_sub unknown output")
def _(t: Target) -> Any:
    return _http_infer(t, "add_sub", _json_inputs(_add_sub_inputs()), outputs=[{"name": "OUTPUT9"}])


@case("grpc add_sub unknown output")
def _(t: Target) -> Any:
    return _grpc_infer(t, "add_sub", _add_sub_inputs(), outputs=["OUTPUT9"])


@case("http nobatch_auto_complete")
def _(t: Target) -> Any:
    return _http_infer(t, "nobatch_auto_complete", _json_inputs(_add_sub_inputs()))


@case("grpc nobatch_auto_complete")
def _(t: Target) -> Any:
    return _grpc_infer(t, "nobatch_auto_complete", _add_sub_inputs())


def _batch_inputs(rows: int) -> list[tuple[str, str, list[int], list[Any]]]:
    a = [x + r for r in range(rows) for x in A]
    b = [x * (r + 1) for r in range(rows) for x in B]
    return [("INPUT0", "FP32", [rows, 4], a), ("INPUT1", "FP32", [rows, 4], b)]


@case("http batch_auto_complete batch of 2")
def _(t: Target) -> Any:
    return _http_infer(t, "batch_auto_complete", _json_inputs(_batch_inputs(2)))


@case("grpc batch_auto_complete batch of 2")
def _(t: Target) -> Any:
    return _grpc_infer(t, "batch_auto_complete", _batch_inputs(2))


@case("http batch_auto_complete batch of 5 (max 4)")
def _(t: Target) -> Any:
    return _http_infer(t, "batch_auto_complete", _json_inputs(_batch_inputs(5)))


@case("grpc batch_auto_complete batch of 5 (max 4)")
def _(t: Target) -> Any:
    return _grpc_infer(t, "batch_auto_complete", _batch_inputs(5))


@case("http batch_auto_complete without batch dimension")
def _(t: Target) -> Any:
    return _http_infer(t, "batch_auto_complete", _json_inputs(_add_sub_inputs()))


def _bls_inputs(target_model: str) -> list[tuple[str, str, list[int], list[Any]]]:
    return [("MODEL_NAME", "BYTES", [1], [target_model])] + _add_sub_inputs()


for _bls in ("bls_sync", "bls_async"):
    case(f"http {_bls} add_sub")(lambda t, m=_bls: _http_infer(t, m, _json_inputs(_bls_inputs("add_sub"))))
    case(f"grpc {_bls} add_sub")(lambda t, m=_bls: _grpc_infer(t, m, _bls_inputs("add_sub")))
    case(f"http {_bls} missing model")(lambda t, m=_bls: _http_infer(t, m, _json_inputs(_bls_inputs("does_not_exist"))))
    case(f"grpc {_bls} missing model")(lambda t, m=_bls: _grpc_infer(t, m, _bls_inputs("does_not_exist")))
    # square_int32 is decoupled and its input is not INPUT0/INPUT1: two mistakes in one call
    case(f"grpc {_bls} calls a decoupled model without decoupled=True")(
        lambda t, m=_bls: _grpc_infer(t, m, _bls_inputs("square_int32"))
    )


@case("http bls_decoupled 3")
def _(t: Target) -> Any:
    return _http_infer(t, "bls_decoupled", [_json_input("IN", "INT32", [1], [3])])


@case("grpc bls_decoupled 4")
def _(t: Target) -> Any:
    return _grpc_infer(t, "bls_decoupled", [("IN", "INT32", [1], [4])])


@case("grpc bls_decoupled 0")
def _(t: Target) -> Any:
    return _grpc_infer(t, "bls_decoupled", [("IN", "INT32", [1], [0])])


@case("grpc bls_decoupled 2 with exec() without decoupled=True")
def _(t: Target) -> Any:
    return _grpc_infer(t, "bls_decoupled", [("IN", "INT32", [1], [2]), ("DECOUPLED", "BOOL", [1], [False])])


@case("grpc bls_decoupled 0 with exec() without decoupled=True")
def _(t: Target) -> Any:
    return _grpc_infer(t, "bls_decoupled", [("IN", "INT32", [1], [0]), ("DECOUPLED", "BOOL", [1], [False])])


PARAMS = {"s": "hello", "i": 42, "b": True}


def _args_params(result: dict[str, Any], http: bool) -> dict[str, Any]:
    """Parse the two JSON strings the model returns. Over HTTP the text of request.parameters() is
    kept too (Triton keeps the request's key order); gRPC's parameters map has no order."""
    try:
        outputs = result["body"]["outputs"] if http else result["response"]["outputs"]
        values = {o["name"]: o["data"][0] for o in outputs}
        answer = {"ARGS": json.loads(values["ARGS"]), "PARAMETERS": json.loads(values["PARAMETERS"])}
        if http:
            answer["PARAMETERS_text"] = values["PARAMETERS"]
        return answer
    except (KeyError, IndexError, TypeError, ValueError):
        return result


@case("http args_params")
def _(t: Target) -> Any:
    return _args_params(
        _http_infer(t, "args_params", [_json_input("INPUT0", "INT32", [1], [7])], parameters=PARAMS), True
    )


@case("grpc args_params")
def _(t: Target) -> Any:
    return _args_params(_grpc_infer(t, "args_params", [("INPUT0", "INT32", [1], [7])], parameters=PARAMS), False)


@case("http args_params without parameters")
def _(t: Target) -> Any:
    return _args_params(_http_infer(t, "args_params", [_json_input("INPUT0", "INT32", [1], [7])]), True)


@case("grpc args_params without parameters")
def _(t: Target) -> Any:
    return _args_params(_grpc_infer(t, "args_params", [("INPUT0", "INT32", [1], [7])]), False)


@case("grpc args_params double parameter")
def _(t: Target) -> Any:
    return _args_params(_grpc_infer(t, "args_params", [("INPUT0", "INT32", [1], [7])], parameters={"d": 2.5}), False)


@case("http raise_in_execute raises")
def _(t: Target) -> Any:
    return _http_infer(t, "raise_in_execute", [_json_input("INPUT0", "INT32", [1], [1])])


@case("grpc raise_in_execute raises")
def _(t: Target) -> Any:
    return _grpc_infer(t, "raise_in_execute", [("INPUT0", "INT32", [1], [1])])


@case("http raise_in_execute serves after raising")
def _(t: Target) -> Any:
    return _http_infer(t, "raise_in_execute", [_json_input("INPUT0", "INT32", [1], [5])])


@case("grpc stream square_int32 3 then 0")
def _(t: Target) -> Any:
    return _grpc_stream(
        t,
        [
            _stream_request("square_int32", [("IN", "INT32", [1], [3])], "sq-3"),
            _stream_request("square_int32", [("IN", "INT32", [1], [0])], "sq-0"),
        ],
    )


@case("grpc stream square_int32 wrong dtype")
def _(t: Target) -> Any:
    return _grpc_stream(t, [_stream_request("square_int32", [("IN", "FP32", [1], [3.0])], "sq-bad")])


@case("grpc stream repeat_int32")
def _(t: Target) -> Any:
    inputs = [
        ("IN", "INT32", [4], [4, -2, 0, 2147483647]),
        ("DELAY", "UINT32", [4], [1, 2, 3, 4]),
        ("WAIT", "UINT32", [1], [5]),
    ]
    return _grpc_stream(t, [_stream_request("repeat_int32", inputs, "rep-1")])


@case("grpc stream repeat_int32 empty IN")
def _(t: Target) -> Any:
    inputs = [("IN", "INT32", [0], []), ("DELAY", "UINT32", [0], []), ("WAIT", "UINT32", [1], [0])]
    return _grpc_stream(t, [_stream_request("repeat_int32", inputs, "rep-empty")])


@case("grpc stream repeat_int32 IN and DELAY shapes differ")
def _(t: Target) -> Any:
    inputs = [("IN", "INT32", [3], [1, 2, 3]), ("DELAY", "UINT32", [2], [0, 0]), ("WAIT", "UINT32", [1], [0])]
    return _grpc_stream(t, [_stream_request("repeat_int32", inputs, "rep-bad")])


@case("grpc stream repeat_int32 without empty final response")
def _(t: Target) -> Any:
    inputs = [("IN", "INT32", [2], [7, 8]), ("DELAY", "UINT32", [2], [0, 0]), ("WAIT", "UINT32", [1], [0])]
    request = _grpc_request("repeat_int32", inputs, request_id="rep-nofinal")
    return _grpc_stream(t, [request], settle=1.0, expect=2)


@case("grpc stream add_sub (not decoupled)")
def _(t: Target) -> Any:
    return _grpc_stream(t, [_stream_request("add_sub", _add_sub_inputs(), "as-stream")])


@case("grpc unary square_int32 (decoupled)")
def _(t: Target) -> Any:
    return _grpc_infer(t, "square_int32", [("IN", "INT32", [1], [2])])


@case("http infer square_int32 (decoupled)")
def _(t: Target) -> Any:
    return _http_infer(t, "square_int32", [_json_input("IN", "INT32", [1], [2])])


@case("http generate_stream square_int32")
def _(t: Target) -> Any:
    return _http(t, "POST", "/v2/models/square_int32/generate_stream", {"IN": 2}, raw=True)


def run_case(name: str, target: Target) -> Any:
    """The normalised answer of ``target`` to case ``name``."""
    try:
        return _normalize(CASES[name](target))
    except Exception as e:  # noqa: BLE001 - a failure is an answer to compare too
        return {"exception": f"{type(e).__name__}: {e}"}


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triton-http", help="host:port of the real Triton's HTTP endpoint")
    parser.add_argument("--triton-grpc", help="host:port of the real Triton's gRPC endpoint")
    parser.add_argument("--tritium-http", help="host:port of tritium's HTTP endpoint")
    parser.add_argument("--tritium-grpc", help="host:port of tritium's gRPC endpoint")
    parser.add_argument("--only", default="", help="run the cases whose name contains this text")
    parser.add_argument("--record", help="write {case: answer} of the one server given to this JSON file")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)

    names = [n for n in CASES if args.only in n]
    if args.list:
        print("\n".join(names))
        return 0
    targets = {}
    if args.triton_http and args.triton_grpc:
        targets["triton"] = Target(args.triton_http, args.triton_grpc)
    if args.tritium_http and args.tritium_grpc:
        targets["tritium"] = Target(args.tritium_http, args.tritium_grpc)
    if not targets:
        parser.error("give the HTTP and gRPC addresses of at least one server")

    answers: dict[str, dict[str, Any]] = {side: {} for side in targets}
    for name in names:
        for side, target in targets.items():
            answers[side][name] = run_case(name, target)

    if len(targets) == 1:
        (side,) = targets
        if args.record:
            with open(args.record, "w", encoding="utf-8") as f:
                f.write(_dump(answers[side]) + "\n")
            print(f"recorded {len(names)} cases from {side} in {args.record}")
        else:
            for name in names:
                print(f"== {name}\n{_dump(answers[side][name])}")
        return 0

    differ = 0
    for name in names:
        left, right = answers["triton"][name], answers["tritium"][name]
        if left == right:
            print(f"same     {name}")
            continue
        differ += 1
        print(f"DIFFERS  {name}")
        diff = difflib.unified_diff(
            _dump(left).splitlines(), _dump(right).splitlines(), "triton", "tritium", lineterm=""
        )
        print("\n".join("    " + line for line in diff))
    print(f"{len(names) - differ} of {len(names)} cases agree")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
