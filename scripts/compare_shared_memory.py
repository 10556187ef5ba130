#!/usr/bin/env python3
"""Send the same shared-memory calls to a real Triton and to tritium; print where the answers differ.

Both servers must serve ``identity_fp32`` (python or identity backend, FP32 [16], max_batch_size 8)
and ``identity_bytes`` (TYPE_STRING [-1], max_batch_size 0), e.g. /work/ref/models. Each server
gets its own shared-memory keys; the key prefix is replaced by ``<key>`` before comparing. The
differences tritium makes on purpose (see docs/compatibility.md) are marked as such.

    python scripts/compare_shared_memory.py --triton 127.0.0.1:18000,127.0.0.1:18001 \
        --tritium 127.0.0.1:8000,127.0.0.1:8001

Exit status: 0 when every difference is a known one, 1 otherwise.
``tests/integration/test_shared_memory_errors.py`` holds the same answers as recorded from Triton
2.51, so CI needs no Triton.
"""

from __future__ import annotations

import argparse
import base64
import http.client as hc
import json
import struct
import sys
import uuid
import warnings
from typing import Any

import numpy as np

warnings.simplefilter("ignore")  # tritonclient.utils.shared_memory imports pkg_resources
import tritonclient.grpc as gc  # noqa: E402
import tritonclient.utils.shared_memory as shm  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

#: cases where tritium answers differently on purpose (docs/compatibility.md)
KNOWN = {
    "register small": "Triton 2.51 refuses a second region on a key already registered",
    "status all": "follows from 'register small'",
    "infer out too small": "follows from 'register small'",
    "infer bytes out small": "follows from 'register small'",
    "grpc status": "follows from 'register small'",
    "grpc register toobig": "Triton's answer comes from its second-region-on-one-key bug",
    "grpc register badoff": "Triton's answer comes from its second-region-on-one-key bug",
    "grpc infer out too small": "follows from 'register small'",
    "grpc infer bytes out small": "follows from 'register small'",
    "grpc cuda register": "tritium says CUDA is unavailable and why",
    "cuda register": "tritium says CUDA is unavailable and why",
}


def probe(http_url: str, grpc_url: str, P: str) -> list[tuple[str, Any]]:
    """Run every case against one server; return ``(label, answer)`` pairs in order."""
    host, port = http_url.rsplit(":", 1)
    out: list[tuple[str, Any]] = []

    def http(method: str, path: str, body: Any = None) -> tuple[int, str]:
        c = hc.HTTPConnection(host, int(port), timeout=60)
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace")

    def show(label: str, result: Any) -> None:
        out.append((label, result))

    # regions
    ins = shm.create_shared_memory_region("in", f"/{P}_in", 64)
    outs = shm.create_shared_memory_region("out", f"/{P}_out", 64)
    small = shm.create_shared_memory_region("small", f"/{P}_small", 32)
    shm.set_shared_memory_region(ins, [np.arange(16, dtype=np.float32)])
    show("status empty", http("GET", "/v2/systemsharedmemory/status"))
    show(
        "register in",
        http("POST", "/v2/systemsharedmemory/region/in/register", {"key": f"/{P}_in", "offset": 0, "byte_size": 64}),
    )
    show(
        "register dup",
        http("POST", "/v2/systemsharedmemory/region/in/register", {"key": f"/{P}_in", "offset": 0, "byte_size": 64}),
    )
    show(
        "register nokey",
        http("POST", "/v2/systemsharedmemory/region/nk/register", {"key": f"/{P}_nokey", "offset": 0, "byte_size": 64}),
    )
    show(
        "register toobig",
        http(
            "POST", "/v2/systemsharedmemory/region/big/register", {"key": f"/{P}_small", "offset": 0, "byte_size": 64}
        ),
    )
    show(
        "register badoff",
        http("POST", "/v2/systemsharedmemory/region/bo/register", {"key": f"/{P}_small", "offset": 40, "byte_size": 8}),
    )
    show(
        "register missing key", http("POST", "/v2/systemsharedmemory/region/mk/register", {"offset": 0, "byte_size": 8})
    )
    show(
        "register str size",
        http(
            "POST", "/v2/systemsharedmemory/region/ss/register", {"key": f"/{P}_small", "offset": 0, "byte_size": "8"}
        ),
    )
    show(
        "register no offset",
        http("POST", "/v2/systemsharedmemory/region/no/register", {"key": f"/{P}_small", "byte_size": 8}),
    )
    show("register bad json", http("POST", "/v2/systemsharedmemory/region/bj/register", b"{"))
    show(
        "register out",
        http("POST", "/v2/systemsharedmemory/region/out/register", {"key": f"/{P}_out", "offset": 0, "byte_size": 64}),
    )
    show(
        "register small",
        http(
            "POST", "/v2/systemsharedmemory/region/small/register", {"key": f"/{P}_small", "offset": 0, "byte_size": 32}
        ),
    )
    show("status all", http("GET", "/v2/systemsharedmemory/status"))
    show("status one", http("GET", "/v2/systemsharedmemory/region/in/status"))
    show("status unknown", http("GET", "/v2/systemsharedmemory/region/zz/status"))
    show("status POST", http("POST", "/v2/systemsharedmemory/status"))

    def infer(inp_params, out_params=None, shape=(1, 16), model="identity_fp32", dt="FP32"):
        body = {"inputs": [{"name": "INPUT0", "datatype": dt, "shape": list(shape), "parameters": inp_params}]}
        if out_params is not None:
            body["outputs"] = [{"name": "OUTPUT0", "parameters": out_params}]
        return http("POST", f"/v2/models/{model}/infer", body)

    show(
        "infer shm in/out",
        infer(
            {"shared_memory_region": "in", "shared_memory_byte_size": 64},
            {"shared_memory_region": "out", "shared_memory_byte_size": 64},
        ),
    )
    out.append(("  out contents", shm.get_contents_as_numpy(outs, np.float32, [16]).tolist()))
    show("infer shm in, json out", infer({"shared_memory_region": "in", "shared_memory_byte_size": 64}))
    show(
        "infer shm in, binary out",
        infer({"shared_memory_region": "in", "shared_memory_byte_size": 64}, {"binary_data": True}),
    )
    show(
        "infer out with offset",
        infer(
            {"shared_memory_region": "in", "shared_memory_byte_size": 64},
            {"shared_memory_region": "out", "shared_memory_byte_size": 32, "shared_memory_offset": 32},
            shape=(1, 16),
        ),
    )
    show("infer unknown region", infer({"shared_memory_region": "zz", "shared_memory_byte_size": 64}))
    show("infer no byte size", infer({"shared_memory_region": "in"}))
    show(
        "infer off+size beyond",
        infer({"shared_memory_region": "in", "shared_memory_byte_size": 64, "shared_memory_offset": 8}),
    )
    show(
        "infer offset beyond",
        infer({"shared_memory_region": "in", "shared_memory_byte_size": 4, "shared_memory_offset": 80}),
    )
    show("infer size mismatch", infer({"shared_memory_region": "in", "shared_memory_byte_size": 60}))
    show("infer size mismatch2", infer({"shared_memory_region": "in", "shared_memory_byte_size": 32}))
    show(
        "infer out too small",
        infer(
            {"shared_memory_region": "in", "shared_memory_byte_size": 64},
            {"shared_memory_region": "small", "shared_memory_byte_size": 32},
        ),
    )
    show(
        "infer out region unknown",
        infer(
            {"shared_memory_region": "in", "shared_memory_byte_size": 64},
            {"shared_memory_region": "zz", "shared_memory_byte_size": 64},
        ),
    )
    show(
        "infer out beyond",
        infer(
            {"shared_memory_region": "in", "shared_memory_byte_size": 64},
            {"shared_memory_region": "out", "shared_memory_byte_size": 64, "shared_memory_offset": 8},
        ),
    )
    show(
        "infer out no size",
        infer({"shared_memory_region": "in", "shared_memory_byte_size": 64}, {"shared_memory_region": "out"}),
    )
    show(
        "infer out + classification",
        infer(
            {"shared_memory_region": "in", "shared_memory_byte_size": 64},
            {"shared_memory_region": "out", "shared_memory_byte_size": 64, "classification": 2},
        ),
    )
    show(
        "infer in offset str",
        infer({"shared_memory_region": "in", "shared_memory_byte_size": 64, "shared_memory_offset": "0"}),
    )
    # bytes
    bs = shm.create_shared_memory_region("bs", f"/{P}_bs", 64)
    good = struct.pack("<I", 3) + b"abc" + struct.pack("<I", 2) + b"de"
    bad = struct.pack("<I", 3) + b"abc" + struct.pack("<I", 50) + b"de"
    shm.set_shared_memory_region(bs, [np.frombuffer(good + bad, dtype=np.uint8)])
    show(
        "register bs",
        http("POST", "/v2/systemsharedmemory/region/bs/register", {"key": f"/{P}_bs", "offset": 0, "byte_size": 64}),
    )
    show(
        "infer bytes good",
        infer(
            {"shared_memory_region": "bs", "shared_memory_byte_size": len(good)},
            shape=(2,),
            model="identity_bytes",
            dt="BYTES",
        ),
    )
    show(
        "infer bytes good out shm",
        infer(
            {"shared_memory_region": "bs", "shared_memory_byte_size": len(good)},
            {"shared_memory_region": "out", "shared_memory_byte_size": 64},
            shape=(2,),
            model="identity_bytes",
            dt="BYTES",
        ),
    )
    out.append(("  out bytes", bytes(shm.get_contents_as_numpy(outs, np.uint8, [64]))[:20]))
    show(
        "infer bytes bad prefix",
        infer(
            {"shared_memory_region": "bs", "shared_memory_byte_size": len(bad), "shared_memory_offset": len(good)},
            shape=(2,),
            model="identity_bytes",
            dt="BYTES",
        ),
    )
    show(
        "infer bytes count mismatch",
        infer(
            {"shared_memory_region": "bs", "shared_memory_byte_size": len(good)},
            shape=(3,),
            model="identity_bytes",
            dt="BYTES",
        ),
    )
    show(
        "infer bytes out small",
        infer(
            {"shared_memory_region": "bs", "shared_memory_byte_size": len(good)},
            {"shared_memory_region": "small", "shared_memory_byte_size": 4},
            shape=(2,),
            model="identity_bytes",
            dt="BYTES",
        ),
    )
    # gRPC
    g = gc.InferenceServerClient(grpc_url)

    def gtry(label, fn):
        try:
            out.append((f"grpc {label}", ("OK", fn())))
        except InferenceServerException as e:
            out.append((f"grpc {label}", (e.status(), e.message())))

    gtry("status", lambda: g.get_system_shared_memory_status(as_json=True))
    gtry("status one", lambda: g.get_system_shared_memory_status("in", as_json=True))
    gtry("status unknown", lambda: g.get_system_shared_memory_status("zz", as_json=True))
    gtry("register dup", lambda: g.register_system_shared_memory("in", f"/{P}_in", 64))
    gtry("register nokey", lambda: g.register_system_shared_memory("nk", f"/{P}_nokey", 64))
    gtry("register toobig", lambda: g.register_system_shared_memory("big", f"/{P}_small", 64))
    gtry("register badoff", lambda: g.register_system_shared_memory("bo", f"/{P}_small", 8, offset=40))

    def ginf(
        in_region,
        in_size,
        out_region=None,
        out_size=64,
        in_off=0,
        out_off=0,
        shape=(1, 16),
        model="identity_fp32",
        dt="FP32",
    ):
        i = gc.InferInput("INPUT0", list(shape), dt)
        i.set_shared_memory(in_region, in_size, in_off)
        outs_ = None
        if out_region:
            o = gc.InferRequestedOutput("OUTPUT0")
            o.set_shared_memory(out_region, out_size, out_off)
            outs_ = [o]
        r = g.infer(model, [i], outputs=outs_)
        return r.get_response(as_json=True)

    gtry("infer in/out", lambda: ginf("in", 64, "out", 64))
    gtry("infer in only", lambda: ginf("in", 64))
    gtry("infer unknown", lambda: ginf("zz", 64))
    gtry("infer beyond", lambda: ginf("in", 64, in_off=8))
    gtry("infer offset beyond", lambda: ginf("in", 4, in_off=80))
    gtry("infer size mismatch", lambda: ginf("in", 60))
    gtry("infer out too small", lambda: ginf("in", 64, "small", 32))
    gtry("infer out unknown", lambda: ginf("in", 64, "zz", 64))
    gtry("infer out beyond", lambda: ginf("in", 64, "out", 64, out_off=8))
    gtry(
        "infer bytes bad",
        lambda: ginf("bs", len(bad), in_off=len(good), shape=(2,), model="identity_bytes", dt="BYTES"),
    )
    gtry(
        "infer bytes out small",
        lambda: ginf("bs", len(good), "small", 4, shape=(2,), model="identity_bytes", dt="BYTES"),
    )
    gtry("unregister unknown", lambda: g.unregister_system_shared_memory("zz"))
    gtry("cuda status", lambda: g.get_cuda_shared_memory_status(as_json=True))
    gtry("cuda status one", lambda: g.get_cuda_shared_memory_status("zz", as_json=True))
    gtry("cuda register", lambda: g.register_cuda_shared_memory("c", b"\0" * 64, 0, 64))
    gtry("cuda unregister all", lambda: g.unregister_cuda_shared_memory())
    gtry("cuda unregister one", lambda: g.unregister_cuda_shared_memory("zz"))
    show("cuda status", http("GET", "/v2/cudasharedmemory/status"))
    show("cuda status one", http("GET", "/v2/cudasharedmemory/region/zz/status"))
    show(
        "cuda register",
        http(
            "POST",
            "/v2/cudasharedmemory/region/c/register",
            {"raw_handle": {"b64": base64.b64encode(b"\0" * 64).decode()}, "device_id": 0, "byte_size": 64},
        ),
    )
    show("cuda unregister", http("POST", "/v2/cudasharedmemory/unregister"))
    show("cuda unregister one", http("POST", "/v2/cudasharedmemory/region/zz/unregister"))
    # deleted by client: unlink then infer
    shm.destroy_shared_memory_region(ins)  # unlinks /in (server keeps mapping)
    show(
        "infer after unlink",
        infer(
            {"shared_memory_region": "in", "shared_memory_byte_size": 64},
            {"shared_memory_region": "out", "shared_memory_byte_size": 64},
        ),
    )
    show("unregister unknown", http("POST", "/v2/systemsharedmemory/region/zz/unregister"))
    show("unregister in", http("POST", "/v2/systemsharedmemory/region/in/unregister"))
    show("unregister in again", http("POST", "/v2/systemsharedmemory/region/in/unregister"))
    show(
        "register after unlink",
        http("POST", "/v2/systemsharedmemory/region/in/register", {"key": f"/{P}_in", "offset": 0, "byte_size": 64}),
    )
    show("unregister all", http("POST", "/v2/systemsharedmemory/unregister"))
    show("status after", http("GET", "/v2/systemsharedmemory/status"))
    for h in (outs, small, bs):
        shm.destroy_shared_memory_region(h)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triton", required=True, help="HTTP,gRPC addresses of the real Triton")
    parser.add_argument("--tritium", required=True, help="HTTP,gRPC addresses of tritium")
    args = parser.parse_args()
    answers = []
    for target in (args.triton, args.tritium):
        prefix = f"cmp{uuid.uuid4().hex[:8]}"
        http_url, grpc_url = target.split(",")
        answers.append(
            [(label, str(result).replace(prefix, "<key>")) for label, result in probe(http_url, grpc_url, prefix)]
        )
    unexpected = 0
    for (label, triton), (_, tritium) in zip(*answers):
        if triton == tritium:
            continue
        known = KNOWN.get(label)
        unexpected += known is None
        print(
            f"{'KNOWN' if known else 'DIFF '} {label}{': ' + known if known else ''}\n  triton:  {triton}\n  tritium: {tritium}"
        )
    print(f"{len(answers[0])} cases, {unexpected} unexpected differences")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
