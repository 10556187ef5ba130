"""Starting worker processes: forked from the template process, or spawned as programs.

:class:`TemplateLauncher` is the core's side of the template process (:mod:`.template`):
it starts the template on first use, asks it to fork each worker, and turns the answers
into :class:`ForkedProcess` handles. :func:`spawn_worker` starts a worker as its own
program instead (a model with its own Python environment, or where the template cannot
run). Both handles offer what :class:`~.process.WorkerProcess` uses: ``pid``, ``running``,
``wait()`` and ``kill()``; a forked worker is signalled through its pidfd, so a pid reused
after it exited is never hit. Core process, event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, Protocol

from ..errors import Code, TritonError
from .channel import AsyncChannel
from .log_relay import relay_worker_log
from .protocol import SpawnKind

log = logging.getLogger("tritium.worker")

__all__ = ["ProcessHandle", "ForkedProcess", "SpawnedProcess", "TemplateLauncher", "spawn_worker", "TemplateError"]

#: seconds to wait for the template's exit status once a forked worker's pidfd says it is gone
STATUS_WAIT_S = 2.0


class TemplateError(TritonError):
    """The template process is not running or could not fork (a spawn may be tried instead)."""


class ProcessHandle(Protocol):
    """A worker process as :class:`~.process.WorkerProcess` watches it."""

    pid: int

    @property
    def running(self) -> bool:
        """False once the process exited."""
        ...

    async def wait(self) -> int | None:
        """Its exit code once it exited (negative: the signal that killed it; None: unknown)."""
        ...

    def kill(self) -> None:
        """SIGKILL it (a no-op once it exited)."""
        ...


class SpawnedProcess:
    """A worker started as a program (an ``asyncio.subprocess.Process`` behind :class:`ProcessHandle`)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self.pid = proc.pid

    @property
    def running(self) -> bool:
        return self._proc.returncode is None

    async def wait(self) -> int | None:
        return await self._proc.wait()

    def kill(self) -> None:
        if self._proc.returncode is None:
            try:
                self._proc.kill()
            except ProcessLookupError:
                pass


class ForkedProcess:
    """A worker the template forked: watched and signalled through its pidfd.

    :param pid: its pid.
    :param pidfd: a pidfd of it (owned from now on).
    """

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self._pidfd = pidfd
        self._loop = asyncio.get_running_loop()
        self._status: asyncio.Future[int | None] = self._loop.create_future()
        self._timer: asyncio.TimerHandle | None = None
        self._loop.add_reader(pidfd, self._on_gone)

    @property
    def running(self) -> bool:
        return not self._status.done() and self._timer is None

    def _on_gone(self) -> None:
        """The pidfd turned readable: the process exited; its status comes from the template."""
        self._loop.remove_reader(self._pidfd)
        if not self._status.done() and self._timer is None:
            self._timer = self._loop.call_later(STATUS_WAIT_S, self.exited, None)

    def exited(self, code: int | None) -> None:
        """The template reported its exit ``code`` (None: it will not: the template is gone)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._status.done():
            return
        self._status.set_result(code)
        if self._pidfd >= 0:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1

    async def wait(self) -> int | None:
        return await asyncio.shield(self._status)

    def kill(self) -> None:
        if self._pidfd >= 0 and not self._status.done():
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _python_flags(python: str) -> list[str]:
    """``-P`` (no current folder on ``sys.path``) where the interpreter has it (3.11+)."""
    return ["-P"] if python == sys.executable and sys.version_info >= (3, 11) else []


async def spawn_worker(
    python: str,
    worker_id: int,
    log_verbose: int,
    control: socket.socket,
    heartbeat: socket.socket,
    stderr: int,
    env: dict[str, str] | None,
    cwd: str | None,
    label: str = "",
) -> SpawnedProcess:
    """Start ``python -m tritium.core.worker`` with the worker's ends of its sockets and its stderr.

    :raises OSError: when the interpreter cannot be started.
    """
    proc = await asyncio.create_subprocess_exec(
        python,
        "-m",
        "tritium.core.worker",
        "--fd",
        str(control.fileno()),
        "--worker-id",
        str(worker_id),
        "--log-verbose",
        str(log_verbose),
        "--heartbeat-fd",
        str(heartbeat.fileno()),
        "--label",
        label,
        pass_fds=[control.fileno(), heartbeat.fileno()],
        stdin=subprocess.DEVNULL,
        stderr=stderr,
        env={**os.environ, **env} if env else None,
        cwd=cwd,
    )
    return SpawnedProcess(proc)


class TemplateLauncher:
    """The core's side of the template process: started on first use, restarted when gone.

    :param python: the interpreter (the server's own).
    :param backend_directory: the global backend directory (the template preloads its python backend).
    :param timeout_s: how long a fork request (and the template's start) may take, seconds.
    """

    def __init__(self, python: str, backend_directory: str, timeout_s: float = 120.0) -> None:
        self.python = python
        self.backend_directory = backend_directory
        self.timeout_s = timeout_s
        self._proc: asyncio.subprocess.Process | None = None
        self._channel: AsyncChannel | None = None
        self._starting: asyncio.Lock | None = None
        self._requests: dict[int, asyncio.Future[tuple[int, int]]] = {}
        self._ids = itertools.count(1)
        self._forked: dict[int, ForkedProcess] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self.pid: int | None = None

    @property
    def running(self) -> bool:
        """True while the template process runs and its socket is open."""
        return self._channel is not None and not self._channel.closed

    async def _ensure_started(self) -> AsyncChannel:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._channel is not None and not self._channel.closed:
                return self._channel
            parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            log_read, log_write = os.pipe()
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    self.python,
                    *_python_flags(self.python),
                    "-m",
                    "tritium.core.worker.template",
                    "--fd",
                    str(child.fileno()),
                    "--backend-directory",
                    self.backend_directory,
                    pass_fds=[child.fileno()],
                    stdin=subprocess.DEVNULL,
                    stderr=log_write,
                    cwd="/",
                )
            except OSError as exc:
                parent.close()
                os.close(log_read)
                raise TemplateError(Code.UNAVAILABLE, f"cannot start the worker template process: {exc}") from exc
            finally:
                child.close()
                os.close(log_write)
            self.pid = self._proc.pid
            # held here: a task nothing refers to may be collected, closing the pipe under the template
            self._tasks = {
                asyncio.ensure_future(relay_worker_log(log_read, "worker template", self.pid)),
                asyncio.ensure_future(self._watch(self._proc)),
            }
            self._channel = AsyncChannel(parent, self._on_message, self._on_close)
            log.debug("worker template process started (pid %d)", self.pid)
            return self._channel

    async def fork(
        self,
        worker_id: int,
        log_verbose: int,
        cwd: str | None,
        fds: Sequence[int],
        preload: Sequence[str] = (),
        label: str = "",
    ) -> ForkedProcess:
        """Fork a worker with the worker's ends of its control and heartbeat sockets and its stderr (``fds``).

        The caller keeps (and closes) its copies of ``fds``.

        :param preload: frameworks the template imports first (it keeps them for later forks too).
        :param label: what the core calls the worker (its command line shows it).

        :raises TemplateError: when the template cannot be started, dies, does not answer
            within the timeout, or the fork fails.
        """
        channel = await self._ensure_started()
        request_id = next(self._ids)
        future: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
        self._requests[request_id] = future
        settings: dict[str, Any] = {
            "worker_id": worker_id,
            "log_verbose": log_verbose,
            "cwd": cwd or "/",
            "preload": list(preload),
            "label": label,
        }
        channel.send([SpawnKind.SPAWN, request_id, settings], list(fds))
        try:
            pid, pidfd = await asyncio.wait_for(asyncio.shield(future), self.timeout_s)
        except TimeoutError:
            raise TemplateError(
                Code.UNAVAILABLE, f"the worker template process did not fork within {self.timeout_s:g} s"
            ) from None
        finally:
            self._requests.pop(request_id, None)
        handle = ForkedProcess(pid, pidfd)
        self._forked[pid] = handle
        return handle

    def _on_message(self, message: list[Any], fds: list[int]) -> None:
        kind = message[0]
        if kind == SpawnKind.SPAWNED:
            future = self._requests.get(int(message[1]))
            pid = int(message[2])
            if future is None or future.done():
                for fd in fds:
                    os.close(fd)
                return
            if pid <= 0 or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                future.set_exception(TemplateError(Code.UNAVAILABLE, f"worker template: {message[3]}"))
                return
            future.set_result((pid, fds[0]))
        elif kind == SpawnKind.EXITED:
            handle = self._forked.pop(int(message[1]), None)
            if handle is not None:
                handle.exited(int(message[2]))
        else:
            for fd in fds:
                os.close(fd)

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
        """Log the template's exit unless the core asked for it (its forked workers die with it)."""
        code = await proc.wait()
        if not self._closing:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            log.error("worker template process (pid %s) %s; the next worker starts a new one", proc.pid, how)

    def _on_close(self, exc: BaseException | None) -> None:
        if exc is not None:
            log.error("worker template process: control channel failed: %s", exc)
        log.debug("worker template process (pid %s) is gone", self.pid)
        error = TemplateError(Code.UNAVAILABLE, "the worker template process exited")
        for future in self._requests.values():
            if not future.done():
                future.set_exception(error)
        forked, self._forked = self._forked, {}
        for handle in forked.values():
            if not handle.running:  # gone already: its status will not come now (the pidfd tells of the rest)
                handle.exited(None)
        self._channel = None
        if self._proc is not None and self._proc.returncode is None:
            try:
                self._proc.kill()
            except ProcessLookupError:
                pass

    async def close(self) -> None:
        """Stop the template (its workers were stopped before); waits for it to exit."""
        self._closing = True
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._proc is not None:
            try:
                await asyncio.wait_for(self._proc.wait(), 10.0)
            except TimeoutError:
                self._proc.kill()
                await self._proc.wait()
