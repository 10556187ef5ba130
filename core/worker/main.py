"""The worker program: hosts one model instance and runs its backend.

Started by the core as ``python -m tritium.core.worker --fd N --worker-id K``
with one end of a Unix socketpair inherited as fd ``N``.

It starts *inline*: the main thread receives a frame, handles it (INIT_MODEL,
INIT_INSTANCE, EXECUTE, SHUTDOWN call the backend's ``TRITONBACKEND_*``
functions), then receives the next — the fastest path for a request. It
switches to *threaded* receiving for good when the model needs frames to
arrive while it executes (a decoupled model, a backend that declares
``TRITONBACKEND_THREADED = True``, or the first BLS request): a reader thread
then receives every frame, answers PINGs, maps segments, routes BLS
responses, and queues the rest for the main thread.

When the core closes the socket (or dies) the worker exits; Linux also kills
it if the core dies mid-execution. Errors never kill the worker: they go back
as REPLY or RESPONSE frames with ``[code, message]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from ..backend.api import Backend, Model, ModelInstance, Request
from ..backend.loader import find_backend_library, load_backend_module
from ..errors import Code, TritonError
from ..logging import configure_worker_logging
from ..memory.arena import Arena, Segment, SegmentTable
from ..memory.region_map import RegionTable
from ..memory.shm_region import is_region_id
from . import bls
from .channel import BlockingChannel
from .heartbeat import serve_heartbeat
from .outputs import OutputWriter
from .protocol import PROTOCOL_VERSION, Kind

log = logging.getLogger("tritium.worker")

#: a model whose executes take less than this on average (ns) sends the EXECUTE_DONE frames of
#: requests that arrived together in one write
HOLD_BELOW_NS = 100_000
#: the most EXECUTE_DONE frames held back
HOLD_MAX = 8


def _error_of(exc: BaseException, what: str) -> TritonError:
    if isinstance(exc, TritonError):
        return exc
    log.debug("%s failed:\n%s", what, "".join(traceback.format_exception(exc)))
    return TritonError(Code.INTERNAL, f"{what}: {type(exc).__name__}: {exc}")


class Worker:
    """State of one worker process (see the module docstring for the threads)."""

    def __init__(self, channel: BlockingChannel, worker_id: int) -> None:
        self.channel = channel
        self.worker_id = worker_id
        self.segments = SegmentTable()
        self.regions = RegionTable()
        self.arena_lock = threading.Lock()
        self.arena = Arena(owner_id=worker_id, on_segment=self._announce_segment, on_drop=self._drop_segment)
        self.inbox: queue.SimpleQueue[list[Any] | None] = queue.SimpleQueue()
        self.module: Any = None
        self.backend: Backend | None = None
        self.model: Model | None = None
        self.instance: ModelInstance | None = None
        self.decoupled = False
        self.writer: OutputWriter | None = None
        self.bls = bls.BlsClient(self)
        bls._client = self.bls
        self._frames: Any = None
        self._threaded = False
        self._threaded_lock = threading.Lock()
        #: EXECUTE_DONE frames held back while more EXECUTE frames are already here (inline mode)
        self._outbox: list[list[Any]] = []
        self._execute_ns = 0.0  # moving average of execute durations

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
        """Handle PING/SEGMENT/DROP_SEGMENT/RELEASE at once; False for messages the executor runs."""
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
                try:
                    message, fds = next(self._frames)
                except StopIteration:
                    return
                if self._handle_control(message, fds):
                    continue
                if message[0] != Kind.EXECUTE:
                    self._flush_outbox()
                handler = handlers.get(message[0])
                if handler is None:
                    log.error("worker %d: unexpected message kind %r", self.worker_id, message[0])
                elif handler(message):
                    return
        except Exception as exc:  # a broken frame from the core: nothing sane to do but exit
            log.error("worker %d: control channel failed: %s", self.worker_id, exc)
            return
        self._flush_outbox()
        self.run()

    def enable_threaded(self) -> None:
        """Switch to threaded receiving for good (idempotent; any thread)."""
        with self._threaded_lock:
            if self._threaded:
                return
            self._threaded = True
        reader = threading.Thread(target=self._read_and_queue, name="tritium-reader", daemon=True)
        reader.start()

    def _read_and_queue(self) -> None:
        try:
            for message, fds in self._frames:
                if not self._handle_control(message, fds):
                    self.inbox.put(message)
        except Exception as exc:
            log.error("worker %d: control channel failed: %s", self.worker_id, exc)
        self.bls.fail_all(TritonError(Code.UNAVAILABLE, "the server is shutting down"))
        os._exit(0)

    # -- main thread ------------------------------------------------------
    def _handlers(self) -> dict[int, Callable[[list[Any]], bool]]:
        return {
            Kind.INIT_MODEL: self._init_model,
            Kind.INIT_INSTANCE: self._init_instance,
            Kind.EXECUTE: self._execute,
            Kind.SHUTDOWN: self._shutdown,
        }

    def run(self) -> None:
        """Serve queued messages in order until SHUTDOWN."""
        handlers = self._handlers()
        while True:
            message = self.inbox.get()
            if message is None:
                return
            handler = handlers.get(message[0])
            if handler is None:
                log.error("worker %d: unexpected message kind %r", self.worker_id, message[0])
                continue
            if handler(message):
                return

    def _reply(self, call_id: int, error: TritonError | None, result: Any = None) -> None:
        self.channel.send([Kind.REPLY, call_id, error.to_wire() if error else None, result])

    def _call_entry(self, name: str, *args: Any) -> None:
        fn = getattr(self.module, name, None)
        if fn is not None:
            fn(*args)

    def _init_model(self, message: list[Any]) -> bool:
        call_id, settings = message[1], message[2]
        try:
            configure_worker_logging(int(settings.get("log_verbose", 0)), model=settings["model_name"])
            library = find_backend_library(
                settings["backend"],
                settings["model_path"],
                int(settings["version"]),
                settings["backend_directory"],
                settings.get("runtime", ""),
            )
            self.module = load_backend_module(library, settings["backend"])
            self.backend = Backend(settings["backend"], str(library.directory), settings.get("backend_config", {}))
            self._call_entry("TRITONBACKEND_Initialize", self.backend)
            self.model = Model(
                settings["model_name"],
                int(settings["version"]),
                settings["config"],
                settings["model_path"],
                self.backend,
                bool(settings.get("auto_complete", False)),
            )
            self._call_entry("TRITONBACKEND_ModelInitialize", self.model)
            self.model.auto_complete_config = False
        except BaseException as exc:
            self._reply(call_id, _error_of(exc, "model initialization"))
            return False
        self._reply(call_id, None, {"config": self.model.config, "library": str(library.path)})
        return False

    def _init_instance(self, message: list[Any]) -> bool:
        call_id, settings = message[1], message[2]
        try:
            if self.model is None:
                raise TritonError(Code.INTERNAL, "INIT_INSTANCE before INIT_MODEL")
            config = settings.get("config")
            if config is not None:  # the validated, normalized config
                self.model.config = config
            policy = self.model.config.get("model_transaction_policy") or {}
            self.decoupled = bool(policy.get("decoupled", False))
            self.instance = ModelInstance(
                settings["name"], settings.get("kind", "KIND_CPU"), int(settings.get("device_id", 0)), self.model
            )
            self.writer = OutputWriter(self, self.model.config)
            if self.decoupled or getattr(self.module, "TRITONBACKEND_THREADED", False):
                self.enable_threaded()  # responses and BLS replies may flow while execute runs
            self._call_entry("TRITONBACKEND_ModelInstanceInitialize", self.instance)
        except BaseException as exc:
            self._reply(call_id, _error_of(exc, "model instance initialization"))
            return False
        self._reply(call_id, None, {})
        return False

    def _execute(self, message: list[Any]) -> bool:
        batch_id, wire_requests, releases = message[1], message[2], message[3]
        assert self.writer is not None
        if releases:  # output blocks the core is done with
            with self.arena_lock:
                for seg_id, offset in releases:
                    self.arena.free(seg_id, offset)
        t0 = time.perf_counter_ns()
        requests: list[Request] = []
        error: TritonError | None = None
        try:
            requests = self.writer.build_requests(batch_id, wire_requests)
        except BaseException as exc:
            error = _error_of(exc, "reading the request inputs")
        t1 = time.perf_counter_ns()
        self.writer.output_ns = 0
        if not self.decoupled:
            self.writer.hold()
        if error is None:
            try:
                self.module.TRITONBACKEND_ModelInstanceExecute(self.instance, requests)
            except BaseException as exc:
                error = _error_of(exc, f"model '{self.model.name}' execute" if self.model else "execute")
        t2 = time.perf_counter_ns()
        output_ns = self.writer.output_ns
        if error is not None:
            if not requests:
                for index in range(len(wire_requests)):
                    self.writer.send_error(batch_id, index, error)
            for request in requests:
                if not request.completed:
                    request.respond(error=error)
        elif not self.decoupled:
            for request in requests:
                if not request.completed:
                    request.respond(
                        error=TritonError(
                            Code.INTERNAL,
                            f"backend '{self.backend.name if self.backend else ''}' did not send a response "
                            f"for request '{request.id}'",
                        )
                    )
        self.writer.finish_batch(requests)
        responses = self.writer.release_held()
        timings = [t1 - t0, max(0, t2 - t1 - output_ns), output_ns]
        self._execute_ns += (time.perf_counter_ns() - t0 - self._execute_ns) * 0.1
        self._done([Kind.EXECUTE_DONE, batch_id, timings, responses])
        return False

    def _done(self, frame: list[Any]) -> None:
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
            and self._execute_ns < HOLD_BELOW_NS
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

    def _shutdown(self, message: list[Any]) -> bool:
        call_id = message[1]
        error: TritonError | None = None
        for name, arg in (
            ("TRITONBACKEND_ModelInstanceFinalize", self.instance),
            ("TRITONBACKEND_ModelFinalize", self.model),
            ("TRITONBACKEND_Finalize", self.backend),
        ):
            if arg is None or self.module is None:
                continue
            try:
                self._call_entry(name, arg)
            except BaseException as exc:
                error = error or _error_of(exc, name)
        self._reply(call_id, error)
        return True


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the core exits (even mid-execution).

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


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m tritium.core.worker``."""
    parser = argparse.ArgumentParser(prog="python -m tritium.core.worker")
    parser.add_argument("--fd", type=int, required=True, help="inherited control socket")
    parser.add_argument("--worker-id", type=int, required=True)
    parser.add_argument("--log-verbose", type=int, default=0)
    parser.add_argument("--heartbeat-fd", type=int, default=-1, help="inherited heartbeat socket")
    args = parser.parse_args(argv)
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:  # the core died before prctl took effect
        sys.exit(1)
    configure_worker_logging(args.log_verbose)
    if args.heartbeat_fd >= 0:
        serve_heartbeat(args.heartbeat_fd)  # answers the core while the model executes
    sock = socket.socket(fileno=args.fd)
    channel = BlockingChannel(sock)
    worker = Worker(channel, args.worker_id)
    try:
        channel.send([Kind.HELLO, PROTOCOL_VERSION, os.getpid()])
    except OSError:
        sys.exit(1)
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
