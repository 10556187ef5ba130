"""The template process: a fork server that has imported what every worker needs.

The core starts it once (``python -P -m tritium.core.worker.template --fd N ...``, see
:mod:`.launcher`). It imports numpy, msgpack, the worker runtime and the python backend's
``pb_utils`` modules, freezes what it has made for the garbage collector (so a child's
collections do not touch, and so copy, those pages), and then waits for SPAWN requests
(:class:`~.protocol.SpawnKind`). For each it forks a worker, which starts serving at once:
its pages are the template's, shared copy-on-write, so a worker costs only what it
changes and starts in milliseconds instead of importing everything again.

The template reaps its workers and reports each one's exit status (EXITED); the core
watches and signals them through the pidfd sent with SPAWNED, never by a bare pid. The
template exits when the core closes its socket, and Linux kills it (and, through their
own parent-death signal, its workers) if the core dies. Workers of a model with its own
Python environment are not forked from here: they start as programs of that interpreter.
"""

from __future__ import annotations

import argparse
import gc
import os
import selectors
import signal
import socket
import sys
import traceback
from typing import Any

from ..backend.loader import find_backend_library
from ..errors import TritonError
from .channel import BlockingChannel
from .main import die_with_parent, libraries, run_worker, set_process_name
from .preload import PRELOADABLE
from .protocol import SpawnKind

__all__ = ["main"]


class Template:
    """The fork server's loop (one per template process).

    :param sock: the socket to the core.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.channel = BlockingChannel(sock)
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.selector.register(sock, selectors.EVENT_READ)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # wakes the selector (the wakeup fd)

    def _send(self, message: list[Any], fds: list[int] | None = None) -> None:
        self.channel.send(message, fds or ())

    def serve(self) -> None:
        """Fork workers on request and report their exits, until the core closes the socket."""
        while True:
            for key, _ in self.selector.select():
                if key.fd == self.wake_r:
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                    self._reap()
                    continue
                frames = self.channel.receive_once()
                if frames is None:
                    return
                for message, frame_fds in frames:
                    if message[0] == SpawnKind.SPAWN and len(frame_fds) == 3:
                        self._spawn(int(message[1]), message[2], frame_fds)
                    else:
                        for fd in frame_fds:
                            os.close(fd)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._send([SpawnKind.EXITED, pid, os.waitstatus_to_exitcode(status)])

    def _spawn(self, request_id: int, settings: dict[str, Any], fds: list[int]) -> None:
        control, heartbeat, stderr = fds
        _import_frameworks(settings.get("preload") or ())
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            self._send([SpawnKind.SPAWNED, request_id, 0, f"fork failed: {exc}"])
            return
        if pid == 0:
            self._become_worker(settings, control, heartbeat, stderr)  # never returns
        for fd in fds:
            os.close(fd)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:  # cannot happen before this process reaps it; refuse rather than guess
            os.kill(pid, signal.SIGKILL)
            self._send([SpawnKind.SPAWNED, request_id, 0, f"pidfd_open failed: {exc}"])
            return
        try:
            self._send([SpawnKind.SPAWNED, request_id, pid, ""], [pidfd])
        finally:
            os.close(pidfd)

    def _become_worker(self, settings: dict[str, Any], control: int, heartbeat: int, stderr: int) -> None:
        """In the forked child: drop the template's state and serve as a worker; never returns."""
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            self.selector.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            self.sock.close()
            os.dup2(stderr, 2)
            os.close(stderr)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            _close_fds_but({0, 1, 2, control, heartbeat})  # e.g. another spawn request's sockets
            cwd = settings.get("cwd")
            if cwd:
                os.chdir(cwd)
            np_random = sys.modules.get("numpy.random")
            if np_random is not None:  # numpy's global generator is not reseeded by fork, unlike random's
                np_random.seed()
            run_worker(
                control,
                int(settings["worker_id"]),
                int(settings.get("log_verbose", 0)),
                heartbeat,
                str(settings.get("label", "")),
            )
        except BaseException:  # noqa: BLE001 - a child must never return into the template's loop
            traceback.print_exc()
        os._exit(1)


def _note(text: str) -> None:
    """Write a line to the template's stderr (the core's log); a broken pipe is no reason to stop."""
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        pass


def _close_fds_but(keep: set[int]) -> None:
    """Close every file descriptor of this process but ``keep``."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, already closed


def _import_frameworks(names: Any) -> None:
    """Import the frameworks a worker about to be forked wants (those :data:`~.preload.PRELOADABLE`
    lists: they start no thread at import), once; a framework that is not installed is left to
    the worker, whose backend says so."""
    fresh = False
    for name in names:
        if name in PRELOADABLE and name not in sys.modules:
            try:
                __import__(name)
                fresh = True
            except Exception as exc:  # noqa: BLE001 - the worker reports the real error when it imports it
                _note(f"worker template: not preloading {name}: {type(exc).__name__}: {exc}")
    if fresh:
        gc.collect()
        gc.freeze()


def _preload(backend_directory: str) -> None:
    """Import what forked workers share: the python backend (and with it ``pb_utils``)."""
    import numpy  # noqa: F401
    import numpy.random  # noqa: F401

    from ..backend import framework  # noqa: F401

    if backend_directory:
        try:
            library = find_backend_library("python", "/nonexistent", 1, backend_directory)
            libraries.preload(library, "python")
        except TritonError:
            pass  # no python backend in this server: its models are refused elsewhere


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m tritium.core.worker.template``."""
    parser = argparse.ArgumentParser(prog="python -m tritium.core.worker.template")
    parser.add_argument("--fd", type=int, required=True, help="inherited socket to the core")
    parser.add_argument("--backend-directory", default="")
    args = parser.parse_args(argv)
    parent = os.getppid()
    die_with_parent()
    if os.getppid() != parent:
        os._exit(1)
    set_process_name("tritium-tmpl", "tritium-tmpl (forks tritium's workers)")
    _preload(args.backend_directory)
    gc.collect()
    gc.freeze()
    sock = socket.socket(fileno=args.fd)
    sock.setblocking(True)
    Template(sock).serve()
    os._exit(0)


if __name__ == "__main__":
    main()
