"""The gRPC endpoint's transport as the tests expect to see it named: in the start-up table and the log.

The expected lines are written here from sources other than the server's own
choice where there are some: the gRPC C++ version from ``pkg-config
--modversion grpc++`` (what setup.py built the extension against), grpcio's
from this interpreter (the server runs on it). Whether the native transport
loads is asked in a subprocess (tritium's generated protobuf modules stay out
of the test process, which uses tritonclient's).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys

__all__ = ["native_unavailable", "grpc_cxx_version", "transport_line", "endpoints_cell"]


@functools.cache
def native_unavailable() -> str:
    """Why the native transport cannot load here ("" when it can)."""
    code = "from tritium.frontends.kserve_grpc import load_native_transport; print(load_native_transport()[1])"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return result.stdout.strip()


@functools.cache
def grpc_cxx_version() -> str:
    """``pkg-config --modversion grpc++`` ("" without pkg-config or grpc++)."""
    if shutil.which("pkg-config") is None:
        return ""
    result = subprocess.run(["pkg-config", "--modversion", "grpc++"], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else ""


def transport_line(setting: str = "auto", tls: bool = False) -> str:
    """The line that names the transport a server with ``[frontends.grpc] transport = setting`` uses."""
    import grpc

    aio = f"grpc.aio (grpcio {grpc.__version__})"
    if tls:
        return f"{aio}: TLS (--grpc-use-ssl) is served by grpc.aio only"
    if setting == "aio":
        return f'{aio}: [frontends.grpc] transport = "aio"'
    reason = native_unavailable()
    if not reason:
        assert grpc_cxx_version(), "the native transport loads, but pkg-config does not know grpc++"
        return f"native (gRPC C++ {grpc_cxx_version()})"
    return f"{aio}: native transport not available ({reason})"


def endpoints_cell(log: str) -> list[str]:
    """The lines of the ``endpoints`` cell of the options table in a server's log (stripped)."""
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| endpoints "))
    cell = []
    for line in lines[start:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("+") or (cell and cells[0]):
            break
        cell.append(cells[1])
    return cell
