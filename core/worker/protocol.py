"""The core-worker protocol: frames, message kinds and the protocol version.

A *frame* is a 5-byte header, ``<I`` payload length and ``B`` count of file
descriptors attached, followed by the payload: a msgpack-encoded list whose
first item is a :class:`Kind`. File descriptors (shared-memory segments)
travel as ``SCM_RIGHTS`` ancillary data with the frame's bytes and are
matched to frames in order. Tensor bytes never travel in frames: frames carry
``(segment, offset, nbytes)`` descriptors into the shared-memory arenas.

Messages (``->`` core to worker, ``<-`` worker to core):

=================  ====  ==========================================================
kind               dir   payload after the kind
=================  ====  ==========================================================
HELLO              <-    protocol version, worker pid
INIT_MODEL         ->    call id, model-init settings (dict; ``model_id`` names the model in this
                         worker from now on)
INIT_INSTANCE      ->    call id, instance settings (dict; ``model_id``, and ``instance_id``
                         naming the instance in this worker from now on)
FINALIZE_INSTANCE  ->    call id, instance id (finalize after the batches sent before it)
FINALIZE_MODEL     ->    call id, model id (after its last instance is finalized)
SHUTDOWN           ->    call id (finalize whatever is left, then exit)
REPLY              <-    call id, error (``[code, message]`` or None), result
EXECUTE            ->    batch id, instance id, list of requests (dict each), list of
                         ``[segment, offset]`` output blocks the core is done with (given back
                         with the next batch)
RESPONSE           <-    batch id, request index, flags, outputs, error, parameters (a response
                         sent while or after the batch executes: decoupled models). Flags
                         RESCHEDULE (no outputs, no error): the backend released the request
                         for another run (``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE``)
EXECUTE_DONE       <-    batch id, timings in ns ``[input, infer, output]``, the responses sent
                         during the execute, each ``[index, flags, outputs, error, parameters]``
                         (one frame per batch)
RELEASE            ->    list of ``[segment, offset]`` output blocks the core is done with, when
                         no EXECUTE frame took them within 10 ms (an idle instance)
SEGMENT            <>    segment id, size in bytes (one fd attached)
DROP_SEGMENT       <>    segment id
PING / PONG        <>    nonce
INFER              <-    call id, request dict (model code calling another model: BLS; with a
                         ``control`` key: loading, unloading or asking readiness of a model)
INFER_RESPONSE     ->    call id, response index, final, outputs, error, parameters
INFER_RELEASE      <-    call id, response index (the worker has copied the outputs)
REGION             ->    region id, size to map in bytes, name, key (one fd attached: a
                         client's registered system shared-memory object; DROP_SEGMENT
                         with the region id drops it)
CANCEL_BOARD       ->    size in bytes (one fd attached: the worker's cancel board, sent once,
                         right after HELLO; see :mod:`.cancel_board`)
METRIC             <-    model name, family name, help text, kind (0 counter, 1 gauge, 2
                         histogram), labels (dict), bucket boundaries, and the cell's
                         segment id, offset and byte size in the worker's arena (a custom
                         metric of model code; see :mod:`.metric_cells`)
=================  ====  ==========================================================

Descriptors whose segment id names a region (:data:`~tritium.core.memory.shm_region.REGION_OWNER`
in the high bits) point into a client's shared-memory object: inputs read in
place; a request's ``shm_outputs`` (output name -> ``[region id, offset,
byte size]``) are written there by the worker.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from typing import Any, NamedTuple, TypedDict

import msgpack

from ..errors import Code, TritonError

__all__ = [
    "PROTOCOL_VERSION",
    "Kind",
    "ResponseFlag",
    "SpawnKind",
    "HEADER",
    "MAX_FRAME_BYTES",
    "MAX_FDS_PER_FRAME",
    "encode",
    "FrameDecoder",
    "Frame",
    "FRAMES",
    "WireInput",
    "ExecuteRequest",
]

PROTOCOL_VERSION = 7
HEADER = struct.Struct("<IB")
MAX_FRAME_BYTES = 256 * 1024 * 1024
MAX_FDS_PER_FRAME = 8


class Kind(enum.IntEnum):
    """Message kinds; the numbering is part of :data:`PROTOCOL_VERSION`."""

    HELLO = 1
    INIT_MODEL = 2
    INIT_INSTANCE = 3
    SHUTDOWN = 4
    REPLY = 5
    EXECUTE = 6
    RESPONSE = 7
    EXECUTE_DONE = 8
    RELEASE = 9
    SEGMENT = 10
    DROP_SEGMENT = 11
    PING = 12
    PONG = 13
    INFER = 14
    INFER_RESPONSE = 15
    INFER_RELEASE = 16
    REGION = 17
    FINALIZE_INSTANCE = 18
    FINALIZE_MODEL = 19
    CANCEL_BOARD = 20
    METRIC = 21


class SpawnKind(enum.IntEnum):
    """Message kinds between the core and the template process (:mod:`.template`), same frames.

    ``SPAWN`` (core to template): request id, settings (``worker_id``, ``log_verbose``,
    ``cwd``); three fds attached: the worker's control socket, heartbeat socket and stderr.
    ``SPAWNED`` (template to core): request id, the new worker's pid (0 when the fork failed),
    an error text; one fd attached on success: a pidfd of the worker. ``EXITED`` (template to
    core): pid, exit code (negative: the signal that killed it), for each worker it reaped.
    """

    SPAWN = 1
    SPAWNED = 2
    EXITED = 3


class ResponseFlag(enum.IntFlag):
    """Flags of a RESPONSE frame.

    ``FINAL`` (1) is ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``. ``RESCHEDULE`` (2, never with
    ``FINAL``) is no response: the backend released the request with
    ``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE`` and it is to run again (iterative sequences).
    """

    NONE = 0
    FINAL = 1
    RESCHEDULE = 2


class Frame(NamedTuple):
    """The declared layout of one message kind: who sends it and what follows the kind.

    ``direction`` is ``"->"`` (core to worker), ``"<-"`` (worker to core) or
    ``"<>"`` (either way); ``fields`` names the payload items after the kind,
    in order; ``fds`` is the number of file descriptors attached.
    """

    direction: str
    fields: tuple[str, ...]
    fds: int = 0


#: every message kind's layout (the table of the module docstring, as data). A declaration
#: only: frames stay plain lists on the hot path, nothing checks them against this table.
FRAMES: dict[Kind, Frame] = {
    Kind.HELLO: Frame("<-", ("protocol_version", "pid")),
    Kind.INIT_MODEL: Frame("->", ("call_id", "settings")),
    Kind.INIT_INSTANCE: Frame("->", ("call_id", "settings")),
    Kind.SHUTDOWN: Frame("->", ("call_id",)),
    Kind.REPLY: Frame("<-", ("call_id", "error", "result")),
    Kind.EXECUTE: Frame("->", ("batch_id", "instance_id", "requests", "releases")),
    Kind.RESPONSE: Frame("<-", ("batch_id", "index", "flags", "outputs", "error", "parameters")),
    Kind.EXECUTE_DONE: Frame("<-", ("batch_id", "timings", "responses")),
    Kind.RELEASE: Frame("->", ("releases",)),
    Kind.SEGMENT: Frame("<>", ("segment_id", "size"), fds=1),
    Kind.DROP_SEGMENT: Frame("<>", ("segment_id",)),
    Kind.PING: Frame("->", ("nonce",)),
    Kind.PONG: Frame("<-", ("nonce",)),
    Kind.INFER: Frame("<-", ("call_id", "request")),
    Kind.INFER_RESPONSE: Frame("->", ("call_id", "index", "final", "outputs", "error", "parameters")),
    Kind.INFER_RELEASE: Frame("<-", ("call_id", "index")),
    Kind.REGION: Frame("->", ("region_id", "size", "name", "key"), fds=1),
    Kind.FINALIZE_INSTANCE: Frame("->", ("call_id", "instance_id")),
    Kind.FINALIZE_MODEL: Frame("->", ("call_id", "model_id")),
    Kind.CANCEL_BOARD: Frame("->", ("size",), fds=1),
    Kind.METRIC: Frame(
        "<-", ("model", "family", "description", "kind", "labels", "buckets", "segment_id", "offset", "nbytes")
    ),
}

#: one input of an EXECUTE request: ``[name, KServe datatype, shape, segment id, offset, nbytes]``
#: (the segment id may name a client's region, see :func:`~tritium.core.memory.regions.is_region_id`)
WireInput = list[Any]


class _ExecuteRequestRequired(TypedDict):
    id: str
    corr: int | str
    flags: int
    timeout: int
    priority: int
    inputs: list[WireInput]
    outputs: list[str]
    params: dict[str, Any]


class ExecuteRequest(_ExecuteRequestRequired, total=False):
    """One request of an EXECUTE frame: what ``InputStaging.stage`` (core, input_staging.py) builds and
    ``OutputWriter.build_requests`` (worker) reads. A plain dict on the wire.

    ``id``: the request id; ``corr``: the sequence's correlation id (0: none);
    ``flags``: ``TRITONSERVER_REQUEST_FLAG_SEQUENCE_START`` (1) | ``_END`` (2);
    ``timeout``: the request's timeout in microseconds (0: none); ``priority``
    (0: the model's default); ``inputs``: :data:`WireInput` each; ``outputs``: the
    requested output names (empty: all); ``params``: the backend-visible request
    parameters; ``shm_outputs`` (only when some): output name -> ``[region id,
    offset, byte size]`` of a client's system shared-memory region to write it to.
    """

    shm_outputs: dict[str, list[int]]


def encode(message: list[Any], nfds: int = 0) -> bytes:
    """Return the frame bytes of ``message`` (header + msgpack payload)."""
    payload = msgpack.packb(message, use_bin_type=True)
    return HEADER.pack(len(payload), nfds) + payload


class FrameDecoder:
    """Incremental frame parser: feed bytes and fds as they arrive, get messages.

    Not thread-safe; one per receiving side of a channel.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._fds: list[int] = []

    def feed(self, data: bytes | memoryview, fds: list[int] | None = None) -> Iterator[tuple[list[Any], list[int]]]:
        """Add received bytes (and fds) and yield each complete ``(message, fds)``.

        Complete frames are decoded straight from ``data``; only a trailing
        partial frame is copied aside until the rest arrives.

        :raises TritonError: INTERNAL for a frame too large, a bad payload, or
            a frame claiming more fds than arrived (the peer is broken).
        """
        if fds:
            self._fds.extend(fds)
        if self._buf:
            self._buf += data
            view = memoryview(bytes(self._buf))
            self._buf.clear()
        else:
            view = memoryview(data)
        pos = 0
        end = len(view)
        try:
            while end - pos >= HEADER.size:
                length, nfds = HEADER.unpack_from(view, pos)
                if length > MAX_FRAME_BYTES or nfds > MAX_FDS_PER_FRAME:
                    raise TritonError(Code.INTERNAL, f"malformed frame header (length {length}, fds {nfds})")
                start = pos + HEADER.size
                if end - start < length:
                    break
                try:
                    message = msgpack.unpackb(view[start : start + length], raw=False, strict_map_key=False)
                except Exception as exc:  # msgpack raises several types
                    raise TritonError(Code.INTERNAL, f"malformed frame payload: {exc}") from exc
                if not isinstance(message, list) or not message:
                    raise TritonError(Code.INTERNAL, "malformed frame payload: not a message list")
                if nfds > len(self._fds):
                    raise TritonError(Code.INTERNAL, "frame announces file descriptors that did not arrive")
                frame_fds = self._fds[:nfds]
                del self._fds[:nfds]
                pos = start + length
                yield message, frame_fds
        finally:
            if pos < end:
                self._buf += view[pos:end]

    def close(self) -> list[int]:
        """Return (for closing) any fds received but not claimed by a frame."""
        fds, self._fds = self._fds, []
        return fds
