"""frontends/kserve_grpc: which transport ``[frontends.grpc] transport`` gives when the extension cannot load.

Runs in a subprocess (tritium's generated protobuf modules stay out of the test
process; see test_proto.py) with the extension's loader made to fail, as on a
machine installed without libgrpc++-dev.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHECK = textwrap.dedent(
    r"""
    import importlib.util, json, logging, types
    import tritium.frontends.kserve_grpc as grpc_endpoint
    from tritium.core.errors import TritonError

    records = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append((record.levelname, record.getMessage()))
    logging.getLogger("tritium.grpc").addHandler(handler)
    out = {}
    real_find_spec = importlib.util.find_spec  # an install without the extension: no such module
    importlib.util.find_spec = lambda name, *a: None if name.endswith("._native") else real_find_spec(name, *a)
    out["reason"] = grpc_endpoint.load_native_transport()
    importlib.util.find_spec = real_find_spec
    grpc_endpoint.load_native_transport = lambda: (None, "the extension was not built: test")
    server = types.SimpleNamespace(body_budget=None)  # what the servicers read of the server at creation
    frontend = grpc_endpoint.GRPCFrontend(server, "127.0.0.1", 1, transport="auto")
    out["auto"] = type(frontend._make_transport()).__name__
    out["auto_log"] = records[:]
    out["aio"] = type(grpc_endpoint.GRPCFrontend(server, "127.0.0.1", 1, transport="aio")._make_transport()).__name__
    try:
        grpc_endpoint.GRPCFrontend(server, "127.0.0.1", 1, transport="native")._make_transport()
    except TritonError as exc:
        out["native"] = [exc.code.name, exc.message]
    print(json.dumps(out))
    """
)


def test_auto_falls_back_to_grpc_aio_and_says_so_once_native_refuses_to_start() -> None:
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["reason"] == [
        None,
        "the extension was not built: install libgrpc++-dev, pkg-config and g++, then reinstall tritium",
    ]
    assert out["auto"] == "AioTransport"
    assert out["auto_log"] == [
        ["WARNING", "gRPC: native transport not available (the extension was not built: test); using grpc.aio"]
    ]
    assert out["aio"] == "AioTransport"
    assert out["native"] == ["UNAVAILABLE", "gRPC: native transport not available (the extension was not built: test)"]
