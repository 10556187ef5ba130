"""A real one-node Ray cluster on loopback for the Ray Serve tests and benchmark, stopped by PID.

``ray start --head --block`` runs as a subprocess in its own session with
everything bound to 127.0.0.1 (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes
Ray keep the loopback address it is given), token authentication with a
token of its own, no dashboard, a small object store and a temporary folder
of its own. Applications are deployed with the ``serve run CONFIG
--non-blocking`` command line, as a user would. :meth:`RayCluster.stop` ends
the ``ray start`` process and every process below it (raylet, GCS, workers,
Serve replicas and their tritium workers), found by parent PID, and removes
the temporary folder.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.support.procs import children_of
from tests.support.server import free_reserved_port

__all__ = ["RayCluster", "descendants", "replica_pids", "replicas_in_metrics", "RAY", "SERVE"]

# Ray's two command lines, run by this interpreter (a console script's shebang may name another venv's)
RAY = [sys.executable, "-m", "ray.scripts.scripts"]
SERVE = [sys.executable, "-m", "ray.serve.scripts"]


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, ...), by parent PID."""
    found, todo = [], [pid]
    while todo:
        for child in children_of(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def replica_pids(deployment: str = "TritiumServer", app: str = "tritium") -> list[int]:
    """PIDs of the Serve replica processes of ``app``'s ``deployment`` (Ray names them in their title)."""
    prefix = f"ray::ServeReplica:{app}:{deployment}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(prefix):
                    out.append(int(entry.name))
            except OSError:
                continue
    return sorted(out)


def replicas_in_metrics(http_url: str) -> list[str]:
    """The replica ids the application's ``/metrics`` answer labels (one per live replica)."""
    with urllib.request.urlopen(f"http://{http_url}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return sorted(set(re.findall(r'tritium_arena_reserved_bytes\{replica="([^"]+)"\}', text)))


class RayCluster:
    """A local Ray head node on 127.0.0.1 with Serve's proxies on free ports.

    :param num_cpus: the node's logical CPUs (Ray schedules replicas against them).
    :param env: extra environment for every Ray process (e.g. Serve's metric push intervals).
    """

    def __init__(self, num_cpus: int = 2, env: dict[str, str] | None = None) -> None:
        self.num_cpus = num_cpus
        self.dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
        # bound later, while Ray's processes take ephemeral ports: picked below that range
        self.gcs_port = free_reserved_port()
        self.http_port = free_reserved_port()
        self.grpc_port = free_reserved_port()
        self.metrics_port = free_reserved_port()
        token = self.dir / "auth_token"
        token.write_text(secrets.token_hex(32))
        self.env = dict(
            os.environ,
            RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
            RAY_AUTH_MODE="token",
            RAY_AUTH_TOKEN_PATH=str(token),
            RAY_USAGE_STATS_ENABLED="0",
            **(env or {}),
        )
        self.env.pop("RAY_ADDRESS", None)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.dir / "ray-start.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self, timeout: float = 60.0) -> RayCluster:
        """Start the head node and wait until it takes drivers."""
        return self.launch().wait_started(timeout)

    def launch(self) -> RayCluster:
        """Start the head node without waiting (see :meth:`wait_started`)."""
        cmd = [
            *RAY,
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={self.gcs_port}",
            f"--ray-client-server-port={free_reserved_port()}",
            f"--dashboard-agent-listen-port={free_reserved_port()}",
            f"--metrics-export-port={self.metrics_port}",
            f"--num-cpus={self.num_cpus}",
            "--num-gpus=0",
            "--include-dashboard=false",
            "--object-store-memory=100000000",
            "--disable-usage-stats",
            f"--temp-dir={self.dir / 't'}",
        ]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    def wait_started(self, timeout: float = 60.0) -> RayCluster:
        """Wait until the head node takes drivers.

        :raises RuntimeError: when ``ray start`` exits or does not come up in time (with its log).
        """
        assert self.proc is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ray start exited with {self.proc.returncode}:\n{self.log()}")
            if "Ray runtime started" in self.log():
                return self
            time.sleep(0.3)
        raise RuntimeError(f"ray start did not come up in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def config(self, args: dict[str, Any], name: str = "tritium") -> dict[str, Any]:
        """A Serve config file's content: the proxies on this cluster's ports, one tritium application."""
        from tritium.integrations.ray_serve import SERVICER_FUNCTIONS

        return {
            "proxy_location": "HeadOnly",
            "http_options": {"host": "127.0.0.1", "port": self.http_port},
            "grpc_options": {"port": self.grpc_port, "grpc_servicer_functions": list(SERVICER_FUNCTIONS)},
            "applications": [
                {
                    "name": name,
                    "route_prefix": "/",
                    "import_path": "tritium.integrations.ray_serve:app",
                    "args": args,
                }
            ],
        }

    def serve_run(self, config: dict[str, Any], timeout: float = 180.0) -> str:
        """Deploy ``config`` with ``serve run CONFIG --non-blocking``; return its output.

        :raises RuntimeError: when the command fails (its output says why).
        """
        path = self.dir / f"serve-{time.monotonic_ns()}.yaml"
        path.write_text(yaml.safe_dump(config))
        run = subprocess.run(
            [*SERVE, "run", str(path), "--address", self.address, "--non-blocking"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if run.returncode != 0:
            raise RuntimeError(f"serve run failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
        return run.stdout + run.stderr

    def serve_logs(self) -> str:
        """The Serve controller's and replicas' logs (for failure messages)."""
        texts = []
        for path in sorted(self.dir.glob("t/session_latest/logs/serve/*.log")):
            texts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(texts)

    def stop(self, timeout: float = 5.0) -> None:
        """End the cluster: SIGTERM to ``ray start`` and every process below it, SIGKILL what is left.

        Ray's processes take long to act on SIGTERM, so ``timeout`` is short: the
        replicas' tritium workers end with their replica, and their shared memory
        is anonymous (nothing is left in /dev/shm either way).
        """
        if self.proc is not None:
            pids = [self.proc.pid, *descendants(self.proc.pid)]
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and any(_alive(p) for p in pids):
                time.sleep(0.2)
                self.proc.poll()
            for pid in pids:
                if _alive(pid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            self.proc.wait(timeout=10)
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
