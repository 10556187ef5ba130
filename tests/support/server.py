"""Start ``tritium-server`` as a subprocess on free loopback ports, and stop it by PID."""

from __future__ import annotations

import collections
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ServerProcess", "free_port"]


#: the ports free_port handed out lately, never handed out again while remembered
_GIVEN: collections.deque[int] = collections.deque(maxlen=4096)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, and not one this process was given lately.

    The kernel may hand back the port it gave the previous ``bind(0)`` once that socket is
    closed: two calls in a row (a server's HTTP and metrics ports) then got the same port,
    and the server refused to start.
    """
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.append(port)
            return port
    raise RuntimeError("no free port on 127.0.0.1 that was not handed out lately")


def free_reserved_port() -> int:
    """A free TCP port on 127.0.0.1 below the kernel's ephemeral range, for a server that binds it
    long after it is picked while other processes start (a Ray cluster).

    A port from :func:`free_port` lies in the ephemeral range, so any process binding port 0 or
    connecting out in the meantime may be given it: Ray's proxy once failed with "Failed to bind
    to address '127.0.0.1:40209'". Below the range only an explicit bind can take it.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = secrets.randbelow(low - 20000) + 20000 if low > 21000 else free_port()
        if port in _GIVEN:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _GIVEN.append(port)
        return port
    raise RuntimeError("no free port on 127.0.0.1 below the ephemeral range")


#: the checkout (its plugins.toml)
REPO_ROOT = Path(__file__).resolve().parents[2]


def transport_plugins(folder: Path, transport: str) -> dict[str, str]:
    """The environment for a server on the project's plugins.toml with ``[frontends.grpc] transport``
    forced to ``transport`` (``"native"``, ``"aio"``): the file is written into ``folder``."""
    text = (REPO_ROOT / "plugins.toml").read_text()
    assert "[frontends.grpc]\n" in text
    plugins = folder / f"plugins-{transport}.toml"
    plugins.write_text(text.replace("[frontends.grpc]\n", f'[frontends.grpc]\ntransport = "{transport}"\n'))
    return {"TRITIUM_PLUGINS": str(plugins)}


class ServerProcess:
    """One ``python -m tritium`` process with its own ports and log file.

    :param repositories: model repository folders.
    :param args: extra command-line flags.
    :param log_path: where its stdout/stderr go.
    :param python: the interpreter to run it with (default: this one), e.g. a composed environment's.
    :param cwd: its working folder (default: this one's; ``python -m`` puts it first on ``sys.path``).
    """

    def __init__(
        self,
        repositories: Sequence[str | Path],
        args: Sequence[str] = (),
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
        python: str | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.repositories = [str(r) for r in repositories]
        self.args = list(args)
        self.http_port = free_port()
        self.grpc_port = free_port()
        self.metrics_port = free_port()
        self.log_path = log_path or Path(f"/tmp/tritium-test-{os.getpid()}-{self.http_port}.log")
        self.env = dict(os.environ, **(env or {}))
        self.proc: subprocess.Popen[bytes] | None = None
        self.python = python or sys.executable
        self.cwd = cwd

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def command(self) -> list[str]:
        cmd = [self.python, "-m", "tritium"]
        for repo in self.repositories:
            cmd.append(f"--model-repository={repo}")
        cmd += [
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            "--metrics-address=127.0.0.1",
        ]
        return cmd + self.args

    def start(self, wait_ready: bool = True, timeout: float = 120.0) -> ServerProcess:
        """Spawn; by default wait until ``/v2/health/live`` answers.

        :raises RuntimeError: when the process exits first or the timeout passes (with the log).
        """
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            self.command(), stdout=self._log, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd
        )
        if wait_ready:
            try:
                self.wait_live(timeout)
            except RuntimeError:  # the caller gets no object to stop: stop it (by PID) and close the log here
                self.stop()
                raise
        return self

    def wait_live(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://{self.http_url}/v2/health/live"
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritium-server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(url, timeout=1) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"tritium-server not live after {timeout} s:\n{self.log()}")

    def wait_metrics(self, timeout: float = 30.0) -> str:
        """The metrics endpoint's first answer (its text), once it listens: the endpoints start one
        after another, so ``/v2/health/live`` may answer before the metrics port is bound.

        :raises RuntimeError: when it does not answer within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.metrics_url, timeout=5) as resp:
                    return resp.read().decode()
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.1)
        raise RuntimeError(f"the metrics endpoint did not answer within {timeout} s:\n{self.log()}")

    def instance_pids(self, model: str) -> dict[str, int]:
        """Instance name -> the pid of the worker process it runs in, for the READY versions of
        ``model`` (read from the metrics endpoint's ``tritium_instance_worker_pid``)."""
        pattern = re.compile(r"^tritium_instance_worker_pid\{([^}]*)\} ([0-9.e+]+)$", re.M)
        out: dict[str, int] = {}
        for labels, value in pattern.findall(self.wait_metrics()):
            fields = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            if fields.get("model") == model:
                out[fields["instance"]] = int(float(value))
        return out

    def wait_exit(self, timeout: float = 60.0) -> int:
        """Wait for the process to exit on its own; return its status."""
        assert self.proc is not None
        return self.proc.wait(timeout)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM the server (by PID), wait, SIGKILL if it does not exit; return its status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
