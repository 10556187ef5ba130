"""The worker program: hosts model instances and runs their backend.

Started by the core, either forked from the template process (:mod:`.template`) or as
``python -m tritium.core.worker --fd N --worker-id K`` (a model's own Python environment),
with one end of a Unix socketpair as its control channel.

It starts *inline*: the main thread receives a frame, handles it (INIT_MODEL,
INIT_INSTANCE, EXECUTE, FINALIZE_*, SHUTDOWN call the backend's ``TRITONBACKEND_*``
functions), then receives the next — the fastest path for a request, kept while the
worker hosts one model instance. It switches to *threaded* receiving for good when frames
must arrive while a model executes: a decoupled model, a backend that declares
``TRITONBACKEND_THREADED = True``, the first BLS request, or a second model or instance
arriving (a shared worker). A reader thread (the main thread, when the switch happens
between frames) then receives every frame, answers PINGs, maps segments, routes BLS
responses, and hands each instance's frames to that instance's own thread, so instances
execute at the same time; model initialization and finalization run on a small pool of
loader threads. The instance that was running inline keeps the main thread.

When the core closes the socket (or dies) the worker exits; Linux also kills it if its
parent dies mid-execution. Errors never kill the worker: they go back as REPLY or
RESPONSE frames with ``[code, message]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import os
import queue
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from ..errors import Code, TritonError
from ..memory.arena import Arena, Segment, SegmentTable
from ..memory.region_map import RegionTable
from ..memory.shm_region import is_region_id
from ..observability.logging import configure_worker_logging, set_worker_log_context
from . import bls, metric_cells
from .cancel_board import CancelBoard
from .channel import BlockingChannel
from .heartbeat import serve_heartbeat
from .hosting import (
    HostedInstance,
    HostedModel,
    error_of,
    finalize_instance,
    finalize_model,
    init_instance,
    init_model,
    run_batch,
)
from .libraries import BackendLibraries
from .protocol import PROTOCOL_VERSION, Kind

log = logging.getLogger("tritium.worker")

__all__ = ["Worker", "main", "run_worker", "libraries"]

#: a model whose executes take less than this on average (ns) sends the EXECUTE_DONE frames of
#: requests that arrived together in one write
HOLD_BELOW_NS = 100_000
#: the most EXECUTE_DONE frames held back
HOLD_MAX = 8
#: threads that initialize and finalize models in a threaded worker, unless the first model
#: routed to them says otherwise (``load_threads``: the server's --model-load-thread-count)
LOADER_THREADS = 4
#: seconds SHUTDOWN waits for each instance thread to finalize
FINALIZE_WAIT_S = 60.0

#: the backend libraries of this process (the template process preloads into it before forking)
libraries = BackendLibraries()

_EXECUTOR_KINDS = frozenset((Kind.INIT_INSTANCE, Kind.EXECUTE, Kind.FINALIZE_INSTANCE))
_MODEL_KINDS = frozenset((Kind.INIT_MODEL, Kind.FINALIZE_MODEL))


class _Executor:
    """The thread that runs one instance's frames, in order, and its queue."""

    __slots__ = ("inbox", "thread")

    def __init__(self, inbox: queue.SimpleQueue[list[Any] | None], thread: threading.Thread | None) -> None:
        self.inbox = inbox
        self.thread = thread  # None: the main thread


class Worker:
    """State of one worker process (see the module docstring for the threads).

    :param channel: the control channel to the core.
    :param worker_id: the core's id for this worker (the high bits of its segment ids).
    """

    def __init__(self, channel: BlockingChannel, worker_id: int) -> None:
        self.channel = channel
        self.worker_id = worker_id
        self.segments = SegmentTable()
        self.regions = RegionTable()
        self.cancels: CancelBoard | None = None
        self.arena_lock = threading.Lock()
        self.arena = Arena(owner_id=worker_id, on_segment=self._announce_segment, on_drop=self._drop_segment)
        #: the main thread's frames once threaded (those of the instance it runs, and SHUTDOWN)
        self.inbox: queue.SimpleQueue[list[Any] | None] = queue.SimpleQueue()
        self.models: dict[int, HostedModel] = {}
        self.instances: dict[int, HostedInstance] = {}
        self.bls = bls.BlsClient(self)
        bls._client = self.bls
        metric_cells._maker = metric_cells.CellMaker(self)
        self._frames: Any = None
        self._threaded = False
        self._threaded_lock = threading.Lock()
        #: the instance the main thread runs (the first one hosted)
        self._main_instance: int | None = None
        self._executors: dict[int, _Executor] = {}
        #: threaded, with the main thread reading the socket (a shared worker) rather than a reader thread
        self._reader_is_main = False
        self._loader: concurrent.futures.ThreadPoolExecutor | None = None
        #: EXECUTE_DONE frames held back while more EXECUTE frames are already here (inline mode)
        self._outbox: list[list[Any]] = []

    # -- segments ---------------------------------------------------------
    def _announce_segment(self, segment: Segment) -> None:
        self.segments.add(segment)
        self.channel.send([Kind.SEGMENT, segment.id, segment.size], [segment.fd])

    def _drop_segment(self, segment: Segment) -> None:
        self.segments.remove(segment.id, close=False)
        self.channel.send([Kind.DROP_SEGMENT, segment.id])

    def allocate(self, nbytes: int) -> Any:
        """A block of this worker's output arena (any thread)."""
        with self.arena_lock:
            return self.arena.allocate(nbytes)

    def free_blocks(self, blocks: Any) -> None:
        """Give blocks back to this worker's arena (any thread)."""
        if blocks:
            with self.arena_lock:
                for block in blocks:
                    self.arena.free_block(block)

    # -- receiving ---------------------------------------------------------
    def _handle_control(self, message: list[Any], fds: list[int]) -> bool:
        """Handle PING/SEGMENT/DROP_SEGMENT/REGION/RELEASE/INFER_RESPONSE/CANCEL_BOARD at once; False for the rest."""
        kind = message[0]
        if kind == Kind.PING:
            self.channel.send([Kind.PONG, message[1]])
        elif kind == Kind.SEGMENT:
            if len(fds) != 1:
                raise TritonError(Code.INTERNAL, "SEGMENT frame without exactly one fd")
            self.segments.attach(int(message[1]), int(message[2]), fds[0])
        elif kind == Kind.DROP_SEGMENT:
            if is_region_id(int(message[1])):
                self.regions.remove(int(message[1]))
            else:
                self.segments.remove(int(message[1]))
        elif kind == Kind.REGION:
            if len(fds) != 1:
                raise TritonError(Code.INTERNAL, "REGION frame without exactly one fd")
            self.regions.attach(int(message[1]), int(message[2]), str(message[3]), str(message[4]), fds[0])
        elif kind == Kind.RELEASE:
            with self.arena_lock:
                for seg_id, offset in message[1]:
                    self.arena.free(seg_id, offset)
        elif kind == Kind.INFER_RESPONSE:
            self.bls.on_response(message)
        elif kind == Kind.CANCEL_BOARD:
            if len(fds) != 1:
                raise TritonError(Code.INTERNAL, "CANCEL_BOARD frame without exactly one fd")
            self.cancels = CancelBoard.attach(int(message[1]), fds[0])
        else:
            for fd in fds:
                os.close(fd)
            return False
        return True

    def serve(self, threaded: bool = False) -> None:
        """Receive and handle frames until SHUTDOWN or until the core goes away (see the module docstring)."""
        self._frames = self.channel.receive()
        if threaded:
            self.enable_threaded()
        handlers = self._handlers()
        try:
            while not self._threaded:
                if self._outbox and not self.channel.buffered:
                    # the last frame received is handled: what _done held goes out before the read
                    # blocks (a control frame, e.g. RELEASE, can be the last one after an EXECUTE)
                    self._flush_outbox()
                try:
                    message, fds = next(self._frames)
                except StopIteration:
                    return
                if self._handle_control(message, fds):
                    continue
                kind = message[0]
                if kind != Kind.EXECUTE:
                    self._flush_outbox()
                if (kind == Kind.INIT_MODEL and self.models) or (kind == Kind.INIT_INSTANCE and self.instances):
                    # a second model or instance: each instance gets a thread of its own from now on
                    self._start_threaded(reader=False)
                    self._route(message)
                    break
                handler = handlers.get(kind)
                if handler is None:
                    log.error("worker %d: unexpected message kind %r", self.worker_id, kind)
                elif handler(message):
                    return
        except Exception as exc:  # a broken frame from the core: nothing sane to do but exit
            log.error("worker %d: control channel failed: %s", self.worker_id, exc)
            return
        self._flush_outbox()
        if self._reader_is_main:
            self._read_and_route()
        else:
            self._run_main_inbox()

    # -- threaded mode ------------------------------------------------------------
    def enable_threaded(self) -> None:
        """Switch to threaded receiving for good (idempotent; any thread): a reader thread receives
        and the main thread keeps running the instance it runs."""
        self._start_threaded(reader=True)

    def _start_threaded(self, reader: bool) -> None:
        """Switch to threaded mode; ``reader``: a new thread receives (else the main thread, once
        the current frame is routed, and the instance it ran moves to a thread of its own)."""
        with self._threaded_lock:
            if self._threaded:
                return
            if self._main_instance is not None:
                if reader:
                    self._executors[self._main_instance] = _Executor(self.inbox, None)
                else:
                    self._executors[self._main_instance] = self._new_executor(self._main_instance)
            self._threaded = True
        if reader:
            threading.Thread(target=self._read_and_route, name="tritium-reader", daemon=True).start()
        else:
            self._reader_is_main = True
            configure_worker_logging(0, model="")  # a shared worker: threads name their own model

    def _new_executor(self, instance_id: int) -> _Executor:
        inbox: queue.SimpleQueue[list[Any] | None] = queue.SimpleQueue()
        thread = threading.Thread(
            target=self._run_executor, args=(inbox,), name=f"tritium-instance-{instance_id}", daemon=True
        )
        executor = _Executor(inbox, thread)
        thread.start()
        return executor

    def _read_and_route(self) -> None:
        """The reader: handle control frames, route the rest, until SHUTDOWN (when the main
        thread reads: it then shuts down and returns) or until the core goes away (then exit)."""
        try:
            for message, fds in self._frames:
                if self._handle_control(message, fds):
                    continue
                if message[0] == Kind.SHUTDOWN and self._reader_is_main:
                    self._shutdown(message)
                    return
                self._route(message)
        except Exception as exc:
            log.error("worker %d: control channel failed: %s", self.worker_id, exc)
        self.bls.fail_all(TritonError(Code.UNAVAILABLE, "the server is shutting down"))
        os._exit(0)

    def _route(self, message: list[Any]) -> None:
        """Hand a frame to the thread that runs it (reader side, threaded mode)."""
        kind = message[0]
        if kind in _EXECUTOR_KINDS:
            instance_id = int(message[2]["instance_id"] if kind == Kind.INIT_INSTANCE else message[2])
            executor = self._executors.get(instance_id)
            if executor is None:
                if kind == Kind.INIT_INSTANCE:
                    executor = self._executors[instance_id] = self._new_executor(instance_id)
                else:
                    self._unknown_instance(message, instance_id)
                    return
            executor.inbox.put(message)
        elif kind in _MODEL_KINDS:
            if self._loader is None:
                threads = int(message[2].get("load_threads") or LOADER_THREADS) if kind == Kind.INIT_MODEL else 0
                self._loader = concurrent.futures.ThreadPoolExecutor(max(threads, LOADER_THREADS), "tritium-loader")
            handler = self._init_model if kind == Kind.INIT_MODEL else self._finalize_model
            self._loader.submit(handler, message)
        elif kind == Kind.SHUTDOWN:
            self.inbox.put(message)
        else:
            log.error("worker %d: unexpected message kind %r", self.worker_id, kind)

    def _unknown_instance(self, message: list[Any], instance_id: int) -> None:
        error = TritonError(Code.INTERNAL, f"worker {self.worker_id} hosts no model instance {instance_id}")
        if message[0] == Kind.EXECUTE:
            for index in range(len(message[3])):
                self.channel.send([Kind.RESPONSE, message[1], index, 1, [], error.to_wire(), None])
            self.channel.send([Kind.EXECUTE_DONE, message[1], [0, 0, 0], []])
        else:
            self._reply(message[1], error)

    def _run_executor(self, inbox: queue.SimpleQueue[list[Any] | None]) -> None:
        """An instance thread: its frames in order, until its FINALIZE_INSTANCE (or a None)."""
        handlers = self._handlers()
        while True:
            message = inbox.get()
            if message is None:
                return
            kind = message[0]
            handlers[kind](message)
            if kind == Kind.FINALIZE_INSTANCE:
                self._executors.pop(int(message[2]), None)
                return
            if kind == Kind.INIT_INSTANCE and int(message[2]["instance_id"]) not in self.instances:
                self._executors.pop(int(message[2]["instance_id"]), None)  # it failed: nothing more comes
                return

    def _run_main_inbox(self) -> None:
        """The main thread once threaded: the frames of the instance it runs, and SHUTDOWN."""
        handlers = self._handlers()
        while True:
            message = self.inbox.get()
            if message is None:
                return
            handler = handlers.get(message[0])
            if handler is None:
                log.error("worker %d: unexpected message kind %r", self.worker_id, message[0])
            elif handler(message):
                return

    # -- handlers (on the thread that runs them) --------------------------------------
    def _handlers(self) -> dict[int, Callable[[list[Any]], bool]]:
        """Frame kind -> handler; a handler returns True when the worker is to exit (SHUTDOWN)."""
        return {
            Kind.INIT_MODEL: self._init_model,
            Kind.INIT_INSTANCE: self._init_instance,
            Kind.EXECUTE: self._execute,
            Kind.FINALIZE_INSTANCE: self._finalize_instance,
            Kind.FINALIZE_MODEL: self._finalize_model,
            Kind.SHUTDOWN: self._shutdown,
        }

    def _reply(self, call_id: int | None, error: TritonError | None, result: Any = None) -> None:
        if call_id is not None:
            self.channel.send([Kind.REPLY, call_id, error.to_wire() if error else None, result])

    def _init_model(self, message: list[Any]) -> bool:
        call_id, settings = message[1], message[2]
        name = str(settings.get("model_name", ""))
        if not self._threaded and not self.models:  # the model of a worker that hosts one
            configure_worker_logging(int(settings.get("log_verbose", 0)), model=name)
        set_worker_log_context(name)
        try:
            hosted = init_model(libraries, settings)
        except BaseException as exc:
            self._reply(call_id, error_of(exc, "model initialization"))
            return False
        self.models[hosted.id] = hosted
        self._reply(call_id, None, {"config": hosted.model.config, "library": str(hosted.loaded.library.path)})
        return False

    def _init_instance(self, message: list[Any]) -> bool:
        call_id, settings = message[1], message[2]
        try:
            hosted_model = self.models.get(int(settings["model_id"]))
            if hosted_model is None:
                raise TritonError(Code.INTERNAL, "INIT_INSTANCE before INIT_MODEL")
            set_worker_log_context(hosted_model.model.name, str(settings.get("name", "")))
            hosted = init_instance(self, hosted_model, settings)
            if not self._threaded and (
                hosted.decoupled or getattr(hosted_model.loaded.module, "TRITONBACKEND_THREADED", False)
            ):
                self._main_instance = hosted.id  # (enable_threaded keeps it on the main thread)
                self.enable_threaded()  # responses and BLS replies may flow while execute runs
        except BaseException as exc:
            self._reply(call_id, error_of(exc, "model instance initialization"))
            return False
        hosted_model.instances.add(hosted.id)
        self.instances[hosted.id] = hosted
        if not self._threaded:
            self._main_instance = hosted.id
        self._reply(call_id, None, {})
        return False

    def _execute(self, message: list[Any]) -> bool:
        hosted = self.instances.get(message[2])
        if hosted is None:
            self._unknown_instance(message, int(message[2]))
            return False
        releases = message[4]
        if releases:  # output blocks the core is done with
            with self.arena_lock:
                for seg_id, offset in releases:
                    self.arena.free(seg_id, offset)
        self._done(run_batch(hosted, message[1], message[3]), hosted)
        return False

    def _done(self, frame: list[Any], hosted: HostedInstance) -> None:
        """Send an EXECUTE_DONE frame, or hold it while the next EXECUTE is already here.

        Held only by a fast model (executions of :data:`HOLD_BELOW_NS` on average)
        on the inline path: the frames of the requests that arrived together go
        back together (one write, one wake-up of the core), delayed by at most a
        few short executions.
        """
        if (
            not self._threaded
            and self.channel.buffered
            and len(self._outbox) < HOLD_MAX
            and hosted.execute_ns < HOLD_BELOW_NS
        ):
            self._outbox.append(frame)
            return
        if self._outbox:
            self._outbox.append(frame)
            self._flush_outbox()
        else:
            self.channel.send(frame)

    def _flush_outbox(self) -> None:
        if self._outbox:
            frames, self._outbox = self._outbox, []
            self.channel.send_many(frames)

    def _finalize_instance(self, message: list[Any]) -> bool:
        call_id, instance_id = message[1], int(message[2])
        hosted = self.instances.pop(instance_id, None)
        error = finalize_instance(hosted) if hosted is not None else None
        if self._main_instance == instance_id:
            self._main_instance = None
        self._reply(call_id, error)
        return False

    def _finalize_model(self, message: list[Any]) -> bool:
        call_id, model_id = message[1], int(message[2])
        hosted = self.models.pop(model_id, None)
        self._reply(call_id, finalize_model(hosted) if hosted is not None else None)
        return False

    def _shutdown(self, message: list[Any]) -> bool:
        """Finalize every instance (each on its thread), every model, every backend; reply."""
        call_id = message[1]
        error: TritonError | None = None
        for instance_id, executor in list(self._executors.items()):
            if executor.thread is not None:
                executor.inbox.put([Kind.FINALIZE_INSTANCE, None, instance_id])
                executor.thread.join(FINALIZE_WAIT_S)
        for instance_id in list(self.instances):
            hosted = self.instances.pop(instance_id)
            error = error or finalize_instance(hosted)
        for model_id in list(self.models):
            error = error or finalize_model(self.models.pop(model_id))
        failure = libraries.finalize_all()
        if failure is not None:
            error = error or error_of(failure, "TRITONBACKEND_Finalize")
        self._reply(call_id, error)
        return True


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent exits (even mid-execution).

    SIGINT and SIGTERM are ignored: Ctrl-C in a terminal, or a service manager's
    SIGTERM to the whole process group, is for the core, which drains the
    requests in flight and then stops its workers itself.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the closed control socket still ends the worker between batches


def set_process_name(name: str, title: str = "") -> None:
    """Name this process: ``/proc/<pid>/comm`` (what ``ps -e`` and ``top`` show, 15 characters)
    and, where the ``setproctitle`` package is installed, its command line (what ``ps aux``
    shows) as ``title``; best effort."""
    if title:
        try:
            import setproctitle

            setproctitle.setproctitle(title)
        except ImportError:  # a model environment's interpreter without it: the name still tells
            pass
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_name = 15
        libc.prctl(pr_set_name, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def run_worker(fd: int, worker_id: int, log_verbose: int = 0, heartbeat_fd: int = -1, label: str = "") -> None:
    """Serve as a worker on control socket ``fd`` until SHUTDOWN or the core goes away; then exit.

    :param fd: the control socket (owned from now on).
    :param worker_id: the core's id for this worker.
    :param heartbeat_fd: the heartbeat socket (-1: none).
    :param label: what the core calls it (its command line shows it: ``tritium-worker <label>``).
    """
    parent = os.getppid()
    die_with_parent()
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    set_process_name("tritium-worker", f"tritium-worker {label}".strip())
    configure_worker_logging(log_verbose)
    if heartbeat_fd >= 0:
        serve_heartbeat(heartbeat_fd)  # answers the core while a model executes
    sock = socket.socket(fileno=fd)
    channel = BlockingChannel(sock)
    worker = Worker(channel, worker_id)
    try:
        channel.send([Kind.HELLO, PROTOCOL_VERSION, os.getpid()])
    except OSError:
        os._exit(1)
    profile_path = os.environ.get("TRITIUM_WORKER_PROFILE")  # developer aid: cProfile the worker
    if profile_path:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    worker.serve(threaded=os.environ.get("TRITIUM_WORKER_THREADED", "0") == "1")  # "1": developer A/B aid
    if profile_path:
        profiler.disable()
        profiler.dump_stats(f"{profile_path}.{os.getpid()}")
    channel.close()
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m tritium.core.worker`` (a worker started as its own program)."""
    parser = argparse.ArgumentParser(prog="python -m tritium.core.worker")
    parser.add_argument("--fd", type=int, required=True, help="inherited control socket")
    parser.add_argument("--worker-id", type=int, required=True)
    parser.add_argument("--log-verbose", type=int, default=0)
    parser.add_argument("--heartbeat-fd", type=int, default=-1, help="inherited heartbeat socket")
    parser.add_argument("--label", default="", help="what the core calls this worker")
    args = parser.parse_args(argv)
    if args.fd < 0:
        sys.exit(2)
    run_worker(args.fd, args.worker_id, args.log_verbose, args.heartbeat_fd, args.label)
