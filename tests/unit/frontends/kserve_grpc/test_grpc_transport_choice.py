"""frontends/kserve_grpc: which transport ``[frontends.grpc] transport`` gives when the extension cannot load,
and the line that names it (the start-up table, the log, ``python -m tritium.frontends.kserve_grpc``).

Runs in a subprocess (tritium's generated protobuf modules stay out of the test
process; see test_proto.py) with the extension's loader made to fail, as on a
machine installed without libgrpc++-dev.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import grpc

from tests.support.grpc_transport import transport_line

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
    out["lines"] = [grpc_endpoint.transport_choice(s, tls).line for s in ("auto", "aio", "native") for tls in (False, True)]
    out["note"] = frontend.startup_note
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
    aio = f"grpc.aio (grpcio {grpc.__version__})"
    tls = f"{aio}: TLS (--grpc-use-ssl) is served by grpc.aio only"
    assert out["lines"] == [
        f"{aio}: native transport not available (the extension was not built: test)",
        tls,
        f'{aio}: [frontends.grpc] transport = "aio"',
        tls,
        "native transport not available (the extension was not built: test)",
        'the native transport does not serve TLS; use transport = "auto"',
    ]
    assert out["note"] == f"transport: {out['lines'][0]}"


def test_the_module_says_which_transport_this_install_uses() -> None:
    run = [sys.executable, "-m", "tritium.frontends.kserve_grpc"]
    result = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"gRPC transport: {transport_line()}",
        f"with --grpc-use-ssl: {transport_line(tls=True)}",
    ]
    required = subprocess.run([*run, "--require-native"], capture_output=True, text=True, timeout=120)
    native = transport_line().startswith("native (gRPC C++ ")
    assert required.returncode == (0 if native else 1), required.stderr
    aio = subprocess.run([*run, "--transport", "aio"], capture_output=True, text=True, timeout=120)
    assert aio.stdout.splitlines()[0] == f"gRPC transport: {transport_line('aio')}"
