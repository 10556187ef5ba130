"""Two gRPC cores in one process: grpcio's and the system's never bind each other's symbols.

The core process runs grpcio (grpc.aio: ``grpc/_cython/cygrpc*.so`` carries its own
gRPC core, BoringSSL, abseil, re2, zlib and upb, built in) and, where it is built,
the native transport (``_native*.so``, linked against the system's libgrpc++ /
libgrpc 1.51 and their abseil, OpenSSL, re2, c-ares and upb shared libraries).
protobuf's ``google/_upb/_message*.so`` carries a third upb. Where two of them
define a symbol of the same name in the dynamic symbol table, the dynamic linker
binds every reference to that name to one definition (ELF interposition): one
core's calls would land in the other's code, of another version, on its data.

Checked here, on the files this environment really loads:

- ``nm -D``: no name that grpcio's or protobuf's extension exports is exported
  or imported by the native transport or a library it loads (not counting the C
  and C++ runtimes, which both sides share by design), and no name they import
  is exported by the system's libraries;
- ``LD_DEBUG=bindings``: in a process that serves a call on the native transport
  to a grpc.aio client (both cores working) and parses a protobuf message, no
  symbol binds from one side to the other: with Python's default ``dlopen``
  flags (``RTLD_LOCAL``), and with ``RTLD_GLOBAL`` (as some packages set it)
  with either side loaded first;
- and that the check can fail: a preloaded library exporting ``gpr_free`` (as
  a grpcio built with default symbol visibility would) is reported taking the
  system core's calls.

Skipped where the native transport is not built (then only grpcio's core is in
the process), or without ``nm``/``ldd``. docs/grpc_transport.md has the findings.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

import pytest

#: the C and C++ runtimes, loaded once and shared by both sides on purpose
RUNTIME = re.compile(r"^(libc|libm|libstdc\+\+|libgcc_s|ld-linux[-\w]*|libpthread|libdl|librt|linux-vdso)\.so")
#: never bound through a symbol lookup (the loader runs DT_INIT/DT_FINI directly)
LOADER_ONLY = {"_init", "_fini"}
BINDING = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `([^']+)'")

WHERE = textwrap.dedent(
    """
    import glob, json, os
    import google.protobuf, grpc
    from tritium.frontends.kserve_grpc import load_native_transport
    native, reason = load_native_transport()
    if native is not None:
        from tritium.frontends.kserve_grpc import _native
    bundled = glob.glob(os.path.join(os.path.dirname(grpc.__file__), "**", "*.so"), recursive=True)
    bundled += glob.glob(os.path.join(os.path.dirname(google.protobuf.__file__), "..", "_upb", "*.so"))
    print(json.dumps({"unavailable": reason, "native": native and _native.__file__, "bundled": bundled}))
    """
)

#: run under LD_DEBUG: argv = flags ("local"/"global"), first ("native"/"grpc"), the extension's path
PROBE = textwrap.dedent(
    """
    import asyncio, importlib.machinery, importlib.util, os, socket, sys

    flags, first, path = sys.argv[1:4]
    if flags == "global":
        sys.setdlopenflags(os.RTLD_NOW | os.RTLD_GLOBAL)

    def load_native():
        loader = importlib.machinery.ExtensionFileLoader("_native", path)
        module = importlib.util.module_from_spec(importlib.util.spec_from_file_location("_native", path, loader=loader))
        loader.exec_module(module)
        return module

    if first == "native":
        native = load_native()
        import grpc
    else:
        import grpc
        native = load_native()
    from google.protobuf import descriptor_pb2

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = native.Server()
    server.start(f"127.0.0.1:{port}", -1, [])

    async def main():
        loop = asyncio.get_running_loop()

        def answer():  # every call: its first message is answered with the bytes of ServerReadyResponse(ready=true)
            for call, kind, payload in server.drain():
                if call.handler is None and kind == native.MESSAGE:
                    call.handler = True
                    call.finish(b"\\x08\\x01", 0, "")

        loop.add_reader(server.fileno(), answer)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            ready = channel.unary_unary("/inference.GRPCInferenceService/ServerReady")
            replies = [await ready(b"", timeout=30) for _ in range(3)]
        loop.remove_reader(server.fileno())
        return replies

    replies = asyncio.run(main())
    server.shutdown(1.0)
    server.drain()
    parsed = descriptor_pb2.FileDescriptorProto.FromString(descriptor_pb2.FileDescriptorProto(name="x").SerializeToString())
    print("OK" if replies == [b"\\x08\\x01"] * 3 and parsed.name == "x" else f"WRONG {replies} {parsed}")
    """
)


def _where() -> dict:
    result = subprocess.run([sys.executable, "-c", WHERE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


WHERE_NOW = _where()
pytestmark = pytest.mark.skipif(
    WHERE_NOW["native"] is None, reason=f"the native gRPC transport is not built here: {WHERE_NOW['unavailable']}"
)


def _tools() -> None:
    for tool in ("nm", "ldd"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found (binutils / libc-bin): the symbol tables cannot be read")


def bundled_side() -> set[str]:
    """grpcio's and protobuf's extension modules (the gRPC core, upb, BoringSSL... built in)."""
    return {os.path.realpath(p) for p in WHERE_NOW["bundled"]}


def system_side() -> set[str]:
    """The native transport's extension and the shared libraries it loads, less the C/C++ runtimes."""
    native = WHERE_NOW["native"]
    listed = subprocess.run(["ldd", native], capture_output=True, text=True, check=True).stdout
    libraries = [m.group(1) for m in re.finditer(r"=> (/\S+)", listed)]
    return {os.path.realpath(p) for p in [native, *libraries] if not RUNTIME.match(os.path.basename(p))}


def dynamic_symbols(path: str, which: str) -> set[str]:
    """``nm -D --defined-only`` (which="defined") or ``--undefined-only``: the names, without versions."""
    out = subprocess.run(["nm", "-D", f"--{which}-only", path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()} - LOADER_ONLY


def crossings(
    bindings: Iterable[tuple[str, str, str]], bundled: set[str], system: set[str]
) -> list[tuple[str, str, str]]:
    """The bindings (file, definition, symbol) from one side to the other (paths compared resolved)."""
    bundled, system = {os.path.realpath(p) for p in bundled}, {os.path.realpath(p) for p in system}
    out = []
    for file, target, symbol in bindings:
        a, b = os.path.realpath(file), os.path.realpath(target)
        if (a in bundled and b in system) or (a in system and b in bundled):
            out.append((file, target, symbol))
    return out


def read_bindings(folder: Path) -> list[tuple[str, str, str]]:
    """Every ``binding file A to B: normal symbol S`` of LD_DEBUG's output files in ``folder``."""
    found = []
    for output in folder.iterdir():
        with output.open(errors="replace") as lines:
            found += [m.groups() for m in map(BINDING.search, lines) if m]
    return found


def run_probe(folder: Path, flags: str, first: str, preload: str = "") -> list[tuple[str, str, str]]:
    """Run :data:`PROBE` under ``LD_DEBUG=bindings``; its bindings (it must have served its calls)."""
    out = folder / "ld_debug"
    out.mkdir()
    env = dict(os.environ, LD_DEBUG="bindings", LD_DEBUG_OUTPUT=str(out / "bindings"))
    if preload:
        env["LD_PRELOAD"] = preload
    result = subprocess.run(
        [sys.executable, "-c", PROBE, flags, first, WHERE_NOW["native"]],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0 and result.stdout.strip() == "OK", result.stdout + result.stderr
    return read_bindings(out)


def test_no_symbol_is_exported_by_both_sides() -> None:
    _tools()
    bundled, system = bundled_side(), system_side()
    assert any("cygrpc" in p for p in bundled), bundled
    assert any("libgrpc." in os.path.basename(p) for p in system), system
    system_exports = set().union(*(dynamic_symbols(p, "defined") for p in system))
    system_imports = set().union(*(dynamic_symbols(p, "undefined") for p in system))
    assert len(system_exports) > 1000  # the system's gRPC libraries export their whole API
    for path in sorted(bundled):
        exports, imports = dynamic_symbols(path, "defined"), dynamic_symbols(path, "undefined")
        assert exports & system_exports == set(), f"{path} and the system's libraries both export these"
        assert exports & system_imports == set(), f"the system's libraries would bind these to {path}"
        assert imports & system_exports == set(), f"{path} would bind these to the system's libraries"


@pytest.mark.parametrize(
    ("flags", "first"),
    [("local", "grpc"), ("global", "native"), ("global", "grpc")],
    ids=["default-dlopen-flags", "rtld-global-native-first", "rtld-global-grpcio-first"],
)
def test_no_symbol_binds_across_the_two_cores(tmp_path: Path, flags: str, first: str) -> None:
    _tools()
    bindings = run_probe(tmp_path, flags, first)
    bundled, system = bundled_side(), system_side()
    names = {os.path.basename(f) for binding in bindings for f in binding[:2]}
    # what was seen: both cores loaded and bound, and bindings between two objects are recorded
    # (the native extension's calls into libgrpc++), so an empty or unreadable trace cannot pass
    assert any(n.startswith("cygrpc") for n in names) and any(n.startswith("libgrpc.so") for n in names), names
    assert any(
        os.path.basename(file).startswith("_native") and os.path.basename(target).startswith("libgrpc++")
        for file, target, _ in bindings
    )
    crossed = crossings(bindings, bundled, system)
    assert crossed == [], "\n".join(f"{s}: {f} -> {t}" for f, t, s in crossed[:50])


def test_the_check_sees_a_crossing() -> None:
    """A binding either way between the sides is reported (lines as LD_DEBUG writes them)."""
    bundled, system = {"/venv/grpc/_cython/cygrpc.so"}, {"/lib/libgrpc.so.29", "/venv/_native.so"}
    lines = [
        "  7:\tbinding file /lib/libgrpc.so.29 [0] to /venv/grpc/_cython/cygrpc.so [0]: normal symbol `grpc_init'",
        "  7:\tbinding file /venv/grpc/_cython/cygrpc.so [0] to /lib/libgrpc.so.29 [0]: normal symbol `gpr_malloc'",
        "  7:\tbinding file /venv/_native.so [0] to /lib/libgrpc.so.29 [0]: normal symbol `grpc_init'",
        "  7:\tbinding file /venv/grpc/_cython/cygrpc.so [0] to /lib/libc.so.6 [0]: normal symbol `malloc' [GLIBC_2.2.5]",
    ]
    bindings = [m.groups() for m in map(BINDING.search, lines) if m]
    assert len(bindings) == 4
    assert crossings(bindings, bundled, system) == [
        ("/lib/libgrpc.so.29", "/venv/grpc/_cython/cygrpc.so", "grpc_init"),
        ("/venv/grpc/_cython/cygrpc.so", "/lib/libgrpc.so.29", "gpr_malloc"),
    ]


def test_a_real_interposition_is_caught(tmp_path: Path) -> None:
    """The check fails on the real thing: a library on the bundled side that exports ``gpr_free``
    (as a grpcio built with default visibility would), preloaded, takes the system core's calls."""
    _tools()
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the interposing library")
    source = tmp_path / "interposer.c"
    source.write_text("#include <stdlib.h>\nvoid gpr_free(void *p) { free(p); }\n")
    library = tmp_path / "libinterposer.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    bindings = run_probe(tmp_path, "local", "grpc", preload=str(library))
    crossed = crossings(bindings, bundled_side() | {str(library)}, system_side())
    assert {os.path.basename(file).split(".so")[0] for file, _, symbol in crossed if symbol == "gpr_free"} >= {
        "libgrpc",
        "libgpr",
    }, crossed
