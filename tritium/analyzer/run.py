"""Measuring one candidate: a model repository holding it, a tritium-server on it, perf_analyzer against it.

Each candidate gets its own repository folder (the model, with the
candidate's ``config.pbtxt``, and for an ensemble its composing models;
files hard-linked where the file system allows, else copied) and its own
``tritium-server`` subprocess on free loopback ports, stopped by its PID
after the measurements. Runs in the ``tritium-analyzer`` process (blocking).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.model_repository.dependencies import composing_of
from ..perf import Measurement, PerfAnalyzerError, measure, stop_process
from .space import Candidate, base_config, candidate_text

__all__ = ["Result", "prepare_repository", "measure_candidate", "ServerFailed"]


class ServerFailed(RuntimeError):
    """The server did not become ready with a candidate (its log in the message)."""


@dataclass(slots=True)
class Result:
    """A candidate and what was measured (``error`` says why not, when it could not be measured)."""

    candidate: Candidate
    config: str
    points: list[Measurement] = field(default_factory=list)
    error: str = ""


def _free_ports(count: int) -> list[int]:
    """``count`` different TCP ports on 127.0.0.1 that were free a moment ago (the sockets stay
    bound until all are picked: one closed first may be handed out again at once)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _link_tree(source: Path, target: Path) -> None:
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link, ignore=shutil.ignore_patterns("__pycache__"))


def prepare_repository(repository: Path, model: str, candidate: Candidate, target: Path) -> str:
    """Write ``target`` as a repository with ``model`` set up as ``candidate``; return its config text.

    An ensemble's composing models come along (recursively), unchanged.

    :raises FileNotFoundError: when the model (or a composing model) is not in ``repository``.
    """
    wanted, seen = [model], set()
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        seen.add(name)
        folder = repository / name
        if not folder.is_dir():
            raise FileNotFoundError(f"model '{name}' is not in {repository}")
        _link_tree(folder, target / name)
        wanted += sorted(composing_of(base_config(folder)))
    text = candidate_text(repository / model, candidate)
    config = target / model / "config.pbtxt"
    config.unlink(missing_ok=True)  # a hard link: never write through it into the source
    config.write_text(text)
    return text


def _reason(log_tail: str) -> str:
    """The line of a server's log that says why it failed: the last one naming an error (a
    traceback's exception, the server's ``error:`` line, an ``E`` log line), else the last one."""
    lines = [line for line in log_tail.splitlines() if line.strip()]
    for line in reversed(lines):
        if "error" in line.lower() or line.startswith("E1") or line.startswith("E0"):
            return line
    return lines[-1] if lines else "no output"


class _Server:
    """One tritium-server subprocess on loopback (HTTP and gRPC), stopped by PID."""

    def __init__(self, repository: Path, log: Path, server_args: Sequence[str] = ()) -> None:
        self.http_port, self.grpc_port = _free_ports(2)
        self.log = log
        # -P (Python 3.11+): the current folder is not put on sys.path, so a folder named
        # "tritium" there (a clone's default name, run from its parent) cannot shadow the package
        safe_path = ["-P"] if sys.version_info >= (3, 11) else []
        cmd = [
            sys.executable,
            *safe_path,
            "-m",
            "tritium",
            f"--model-repository={repository.resolve()}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            "--allow-metrics=false",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            *server_args,
        ]
        self._file = open(log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._file, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        url = f"http://127.0.0.1:{self.http_port}/v2/health/ready"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self._tail()
                reason = _reason(tail)
                raise ServerFailed(f"tritium-server exited with {self.proc.returncode}: {reason.strip()}\n{tail}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise ServerFailed(f"tritium-server not ready after {timeout_s:.0f} s:\n{self._tail()}")

    def state(self, model: str) -> str:
        """The model's statistics (Triton's statistics extension) and the log's last lines, for a report."""
        url = f"http://127.0.0.1:{self.http_port}/v2/models/{model}/stats"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                stats = resp.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as exc:
            stats = f"(no answer: {exc})"
        return f"server statistics: {stats}\nserver log:\n{self._tail()}"

    def _tail(self) -> str:
        self._file.flush()
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def stop(self) -> None:
        stop_process(self.proc)
        self._file.close()


def measure_candidate(
    repository: Path,
    model: str,
    candidate: Candidate,
    work: Path,
    concurrency: Sequence[int],
    perf_args: Sequence[str],
    protocol: str = "grpc",
    server_args: Sequence[str] = (),
    ready_timeout_s: float = 300.0,
    on_point: Callable[[Measurement], None] | None = None,
    run_timeout_s: float = 600.0,
) -> Result:
    """Serve ``model`` as ``candidate`` and measure it at each concurrency.

    A candidate the server cannot load, or that perf_analyzer cannot
    measure, comes back with ``error`` set (the search goes on).

    :param work: a folder of its own (repository, server log, perf_analyzer CSVs).
    :param on_point: called after each measurement (progress).
    :param run_timeout_s: the longest one perf_analyzer run may take, seconds; a run past it
        is the candidate's error, which then also gives the server's statistics and log tail.
    :raises PerfAnalyzerError: when perf_analyzer itself is missing (nothing can be measured).
    """
    work.mkdir(parents=True, exist_ok=True)
    text = prepare_repository(repository, model, candidate, work / "models")
    result = Result(candidate, text)
    server = _Server(work / "models", work / "server.log", server_args)
    try:
        try:
            server.wait_ready(ready_timeout_s)
        except ServerFailed as exc:
            result.error = str(exc)
            return result
        url = f"127.0.0.1:{server.grpc_port if protocol == 'grpc' else server.http_port}"
        for n in concurrency:
            try:
                point = measure(
                    model,
                    url,
                    protocol,
                    n,
                    server.proc.pid,
                    work / f"c{n}.csv",
                    list(perf_args),
                    timeout_s=run_timeout_s,
                )
            except PerfAnalyzerError as exc:
                if "not found" in str(exc) or "needs lib" in str(exc):
                    raise
                result.error = f"concurrency {n}: {exc}"
                if "ran past" in str(exc):  # what the server still holds says whose fault it is
                    result.error += f"\n{server.state(model)}"
                break
            result.points.append(point)
            if on_point is not None:
                on_point(point)
    finally:
        server.stop()
    return result
