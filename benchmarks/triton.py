"""The real Triton 2.51 server (from the ``nvidia-pytriton`` wheel), run beside tritium for comparisons.

Facts this relies on (see the project's REFERENCE notes): the wheel ships the
``tritonserver`` binary, its libraries (``nvidia_pytriton.libs``) and the
python backend; the 3.11 python-backend stub embeds Debian's libpython3.11
and takes its standard library and numpy from the first ``python3`` on
``PATH`` (Debian's ``python3-numpy``). It wants numpy < 2, so it lives in its
own virtual environment.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tritium.perf import stop_process

__all__ = ["TritonServer", "install_triton"]


def _site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def install_triton(venv: Path) -> None:
    """Create ``venv`` with nvidia-pytriton 0.7.0 (Triton 2.51) and the Debian packages its stub needs."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "nvidia-pytriton==0.7.0"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-q", "python3-numpy", "libpython3.11"], check=True)
    backend = _site_packages(venv) / "pytriton" / "tritonserver" / "backends" / "python"
    stub = (
        _site_packages(venv)
        / "pytriton"
        / "tritonserver"
        / "python_backend_stubs"
        / "3.11"
        / "triton_python_backend_stub"
    )
    shutil.copy(stub, backend / "triton_python_backend_stub")


def add_arguments(parser: argparse.ArgumentParser, triton: bool = True) -> None:
    """The options every benchmark script shares: --install, --output and (with ``triton``) the Triton venv."""
    from .common import ROOT

    parser.add_argument("--install", action="store_true", help="install perf_analyzer's libraries first")
    if triton:
        parser.add_argument("--install-triton", action="store_true", help="set up --triton-venv first")
        parser.add_argument("--triton-venv", type=Path, default=ROOT / "benchmarks" / ".triton-venv")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "performance.md")


def prepare(args: argparse.Namespace) -> None:
    """Install what :func:`add_arguments`' --install / --install-triton ask for."""
    from .common import install_perf_analyzer_libraries

    if args.install:
        install_perf_analyzer_libraries()
    if getattr(args, "install_triton", False):
        install_triton(args.triton_venv)


class TritonServer:
    """One ``tritonserver`` process on loopback ports, stopped by its PID.

    :param venv: the virtual environment holding nvidia-pytriton.
    :param repository: the model repository.
    """

    def __init__(
        self, venv: Path, repository: Path, http_port: int, grpc_port: int, metrics_port: int, log: Path
    ) -> None:
        self.venv, self.repository, self.log_path = venv, repository, log
        self.http_port, self.grpc_port, self.metrics_port = http_port, grpc_port, metrics_port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self, timeout: float = 180.0) -> TritonServer:
        site = _site_packages(self.venv)
        binary = site / "pytriton" / "tritonserver" / "bin" / "tritonserver"
        if not binary.exists():
            raise SystemExit(f"no tritonserver in {self.venv}: run with --install-triton")
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = str(site / "nvidia_pytriton.libs") + os.pathsep + env.get("LD_LIBRARY_PATH", "")
        env["PATH"] = "/usr/bin:" + env.get("PATH", "")
        cmd = [
            str(binary),
            f"--model-repository={self.repository}",
            f"--backend-directory={site / 'pytriton' / 'tritonserver' / 'backends'}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            "--metrics-address=127.0.0.1",
        ]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritonserver exited with {self.proc.returncode}:\n{self.log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"http://{self.http_url}/v2/health/ready", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"tritonserver not ready after {timeout} s:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        """SIGTERM by PID, then SIGKILL after 60 s."""
        if self.proc is not None:
            stop_process(self.proc)
        self._log.close()
