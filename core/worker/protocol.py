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
INIT_MODEL         ->    call id, model-init settings (dict)
INIT_INSTANCE      ->    call id, instance settings (dict)
SHUTDOWN           ->    call id
REPLY              <-    call id, error (``[code, message]`` or None), result
EXECUTE            ->    batch id, list of requests (dict each), list of ``[segment, offset]``
                         output blocks the core is done with (given back with the next batch)
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
=================  ====  ==========================================================

Descriptors whose segment id names a region (:data:`~tritium.core.memory.shm_region.REGION_OWNER`
in the high bits) point into a client's shared-memory object: inputs read in
place; a request's ``shm_outputs`` (output name -> ``[region id, offset,
byte size]``) are written there by the worker.
"""

from __future__ import annotations

import enum
import struct
from typing import Any, Iterator

import msgpack

from ..errors import Code, TritonError

__all__ = [
    "PROTOCOL_VERSION",
    "Kind",
    "ResponseFlag",
    "HEADER",
    "MAX_FRAME_BYTES",
    "MAX_FDS_PER_FRAME",
    "encode",
    "FrameDecoder",
]

PROTOCOL_VERSION = 5
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


class ResponseFlag(enum.IntFlag):
    """Flags of a RESPONSE frame.

    ``FINAL`` (1) is ``TRITONSERVER_RESPONSE_COMPLETE_FINAL``. ``RESCHEDULE`` (2, never with
    ``FINAL``) is no response: the backend released the request with
    ``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE`` and it is to run again (iterative sequences).
    """

    NONE = 0
    FINAL = 1
    RESCHEDULE = 2


_packer = msgpack.Packer(use_bin_type=True)


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
