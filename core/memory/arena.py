"""Shared-memory arenas for tensor bytes between the core and its workers.

A *segment* is an anonymous shared-memory file (``memfd_create``, or an
unnamed ``O_TMPFILE`` file in ``--arena-dir``) mapped into this process. Its
file descriptor travels to the peer over the worker's Unix socket
(``SCM_RIGHTS``); segments therefore have no name in ``/dev/shm`` and nothing
can be left behind there on any exit path: the kernel frees a segment when the
last process holding it exits.

An :class:`Arena` is a pool of segments owned by one process (the core owns
the input arena, each worker owns its output arena). It hands out
:class:`Block` s (64-byte aligned) first-fit and adds a new segment when a
request does not fit; it never resizes a segment in place. A tensor larger
than the segment size gets a dedicated segment that is dropped when freed.

A :class:`SegmentTable` maps segment ids to mapped segments in one process and
resolves the ``(segment, offset, nbytes)`` descriptors that arrive in frames,
bounds-checking every one: a peer's message is never trusted.
"""

from __future__ import annotations

import bisect
import ctypes
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..errors import Code, TritonError

__all__ = ["Segment", "Block", "Arena", "SegmentTable", "EMPTY_SEGMENT", "DEFAULT_SEGMENT_SIZE", "window_inside"]

ALIGNMENT = 64
#: freed blocks up to this size (bytes) are kept for reuse, up to RECYCLE_BYTES in all
RECYCLE_BELOW = 4096
RECYCLE_BYTES = 1 << 20
DEFAULT_SEGMENT_SIZE = 64 * 1024 * 1024  # bytes; pages are only backed once touched
EMPTY_SEGMENT = 0  # descriptor segment id of a zero-byte tensor
_OWNER_SHIFT = 24


def window_inside(offset: int, nbytes: int, size: int) -> bool:
    """Whether ``[offset, offset+nbytes)`` lies within ``size`` bytes (overflow-safe; descriptors from frames)."""
    return 0 <= offset <= size and 0 <= nbytes <= size - offset


class Segment:
    """One mapped shared-memory segment.

    :param id: the segment id, unique across the server (the owner's id in the
        high bits, a counter in the low 24 bits).
    :param size: its size in bytes.
    :param fd: a file descriptor of the segment, kept open so it can be sent
        to further peers; closed by :meth:`close`.
    """

    __slots__ = ("id", "size", "fd", "mmap", "view", "address")

    def __init__(self, seg_id: int, size: int, fd: int) -> None:
        self.id = seg_id
        self.size = size
        self.fd = fd
        self.mmap = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.view = memoryview(self.mmap)
        self.address = ctypes.addressof(ctypes.c_char.from_buffer(self.mmap))

    @classmethod
    def create(cls, seg_id: int, size: int, directory: str | None = None) -> Segment:
        """Create a new segment of ``size`` bytes (memfd, or a tmpfile in ``directory``).

        :raises TritonError: UNAVAILABLE when the memory cannot be obtained.
        """
        try:
            if directory is None:
                fd = os.memfd_create(f"tritium-arena-{seg_id:x}", os.MFD_CLOEXEC)
            else:
                fd = os.open(directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
            os.ftruncate(fd, size)
        except OSError as exc:
            raise TritonError(
                Code.UNAVAILABLE,
                f"failed to create a shared-memory arena segment of {size} bytes"
                f"{' in ' + directory if directory else ''}: {exc}",
            ) from exc
        return cls(seg_id, size, fd)

    def close(self) -> None:
        """Unmap and close; a mapping still viewed elsewhere is left to the garbage collector."""
        try:
            self.view.release()
            self.mmap.close()
        except BufferError:
            pass  # a numpy view still points here; the mapping dies with it
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def contains(self, address: int, nbytes: int) -> int | None:
        """Offset of ``[address, address+nbytes)`` in this segment, or None when outside it."""
        offset = address - self.address
        if 0 <= offset and offset + nbytes <= self.size:
            return offset
        return None


@dataclass(slots=True)
class Block:
    """``nbytes`` bytes at ``offset`` in ``segment`` (segment None: an empty block)."""

    segment: Segment | None
    offset: int
    nbytes: int

    @property
    def view(self) -> memoryview:
        """A writable memoryview of the block's bytes."""
        if self.segment is None:
            return memoryview(b"")
        return self.segment.view[self.offset : self.offset + self.nbytes]

    @property
    def descriptor(self) -> tuple[int, int, int]:
        """``(segment id, offset, nbytes)`` as it travels in frames."""
        seg = EMPTY_SEGMENT if self.segment is None else self.segment.id
        return (seg, self.offset, self.nbytes)


@dataclass(slots=True)
class _SegmentState:
    segment: Segment
    dedicated: bool
    free_offsets: list[int] = field(default_factory=list)
    free_sizes: list[int] = field(default_factory=list)
    used: dict[int, int] = field(default_factory=dict)  # offset -> aligned size
    used_bytes: int = 0


class Arena:
    """A pool of segments owned by this process, with a first-fit block allocator.

    Runs in one thread of one process (the core's event loop, or a worker's
    executing thread); it is not thread-safe.

    :param owner_id: the owner's id (0 = the core, workers get 1, 2, ...);
        it goes into the high bits of every segment id.
    :param segment_size: size of a regular segment in bytes.
    :param directory: place segments in this directory (file-backed) instead
        of anonymous memory.
    :param on_segment: called with each new segment (to register it in the
        process's :class:`SegmentTable`).
    """

    def __init__(
        self,
        owner_id: int,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        directory: str | None = None,
        on_segment: Callable[[Segment], None] | None = None,
        on_drop: Callable[[Segment], None] | None = None,
    ) -> None:
        self.owner_id = owner_id
        self.segment_size = segment_size
        self.directory = directory
        self._on_segment = on_segment
        self._on_drop = on_drop
        self._next = 1
        self._states: dict[int, _SegmentState] = {}
        #: freed small blocks kept for reuse, by aligned size: ``[(state, offset), ...]``; a request
        #: path allocates and frees the same few sizes over and over (O(1) both ways)
        self._recycled: dict[int, list[tuple[_SegmentState, int]]] = {}
        self._recycled_bytes = 0

    # -- accounting -----------------------------------------------------
    @property
    def segments(self) -> list[Segment]:
        """The segments in the pool."""
        return [s.segment for s in self._states.values()]

    @property
    def reserved_bytes(self) -> int:
        """Total size of all segments, in bytes."""
        return sum(s.segment.size for s in self._states.values())

    @property
    def used_bytes(self) -> int:
        """Bytes currently handed out in blocks (aligned sizes)."""
        return sum(s.used_bytes for s in self._states.values())

    # -- allocation -----------------------------------------------------
    def allocate(self, nbytes: int) -> Block:
        """Return a block of at least ``nbytes`` bytes (a new segment if none fits).

        :raises TritonError: UNAVAILABLE when a new segment cannot be created.
        """
        if nbytes <= 0:
            return Block(None, 0, 0)
        size = (nbytes + ALIGNMENT - 1) & ~(ALIGNMENT - 1)
        if size <= RECYCLE_BELOW:
            recycled = self._recycled.get(size)
            if recycled:
                state, offset = recycled.pop()
                self._recycled_bytes -= size
                state.used[offset] = size
                state.used_bytes += size
                return Block(state.segment, offset, nbytes)
        if size > self.segment_size:
            state = self._new_segment(_align_mib(size), dedicated=True)
            return self._take(state, 0, size, nbytes)
        block = self._first_fit(size, nbytes)
        if block is None and self._recycled:  # give the kept small blocks back (coalesced) first
            self._return_recycled()
            block = self._first_fit(size, nbytes)
        if block is not None:
            return block
        state = self._new_segment(self.segment_size, dedicated=False)
        return self._take(state, 0, size, nbytes)

    def _first_fit(self, size: int, nbytes: int) -> Block | None:
        for state in self._states.values():
            if state.dedicated:
                continue
            sizes = state.free_sizes
            for i, free in enumerate(sizes):
                if free >= size:
                    return self._take(state, i, size, nbytes)
        return None

    def _return_recycled(self) -> None:
        """Put every kept small block back into its segment's free ranges."""
        recycled, self._recycled = self._recycled, {}
        self._recycled_bytes = 0
        for size, blocks in recycled.items():
            for state, offset in blocks:
                state.used[offset] = size  # as if in use: free() coalesces it
                state.used_bytes += size
                self._release(state, offset, recycle=False)

    def free(self, segment_id: int, offset: int) -> None:
        """Return the block at ``offset`` of segment ``segment_id`` to the pool.

        A small block is kept for the next allocation of its size (at most
        :data:`RECYCLE_BYTES` in all); they go back to the free ranges when a
        larger allocation needs the space. Unknown blocks are ignored (a peer's
        RELEASE is not trusted).
        """
        state = self._states.get(segment_id)
        if state is not None:
            self._release(state, offset, recycle=True)

    def _release(self, state: _SegmentState, offset: int, recycle: bool) -> None:
        size = state.used.pop(offset, None)
        if size is None:
            return
        state.used_bytes -= size
        if state.dedicated:
            self._drop(state)
            return
        if recycle and size <= RECYCLE_BELOW and self._recycled_bytes + size <= RECYCLE_BYTES:
            self._recycled.setdefault(size, []).append((state, offset))
            self._recycled_bytes += size
            return
        offsets, sizes = state.free_offsets, state.free_sizes
        i = bisect.bisect_left(offsets, offset)
        # coalesce with the previous and next free ranges
        if i > 0 and offsets[i - 1] + sizes[i - 1] == offset:
            i -= 1
            sizes[i] += size
        else:
            offsets.insert(i, offset)
            sizes.insert(i, size)
        if i + 1 < len(offsets) and offsets[i] + sizes[i] == offsets[i + 1]:
            sizes[i] += sizes.pop(i + 1)
            offsets.pop(i + 1)

    def free_block(self, block: Block) -> None:
        """Free ``block`` (see :meth:`free`)."""
        if block.segment is not None:
            self.free(block.segment.id, block.offset)

    def close(self) -> None:
        """Drop every segment."""
        self._recycled.clear()
        self._recycled_bytes = 0
        for state in list(self._states.values()):
            self._drop(state)

    # -- internals ------------------------------------------------------
    def _new_segment(self, size: int, dedicated: bool) -> _SegmentState:
        seg_id = (self.owner_id << _OWNER_SHIFT) | self._next
        self._next = (self._next + 1) & ((1 << _OWNER_SHIFT) - 1) or 1
        segment = Segment.create(seg_id, size, self.directory)
        state = _SegmentState(segment, dedicated, [0], [size])
        self._states[seg_id] = state
        if self._on_segment is not None:
            self._on_segment(segment)
        return state

    def _take(self, state: _SegmentState, i: int, size: int, nbytes: int) -> Block:
        offset = state.free_offsets[i]
        remaining = state.free_sizes[i] - size
        if remaining:
            state.free_offsets[i] = offset + size
            state.free_sizes[i] = remaining
        else:
            del state.free_offsets[i]
            del state.free_sizes[i]
        state.used[offset] = size
        state.used_bytes += size
        return Block(state.segment, offset, nbytes)

    def _drop(self, state: _SegmentState) -> None:
        self._states.pop(state.segment.id, None)
        if self._on_drop is not None:
            self._on_drop(state.segment)
        state.segment.close()


def _align_mib(n: int) -> int:
    mib = 1024 * 1024
    return (n + mib - 1) // mib * mib


class SegmentTable:
    """The segments mapped in this process, by id, with bounds-checked lookups."""

    def __init__(self) -> None:
        self._segments: dict[int, Segment] = {}

    def add(self, segment: Segment) -> None:
        """Register a segment (created here or received from a peer)."""
        self._segments[segment.id] = segment

    def attach(self, seg_id: int, size: int, fd: int) -> Segment:
        """Map a segment received from a peer (takes ownership of ``fd``).

        :raises TritonError: INTERNAL when the size is not positive or the
            descriptor cannot be mapped at that size.
        """
        if seg_id in self._segments:
            os.close(fd)
            return self._segments[seg_id]
        try:
            if size <= 0 or os.fstat(fd).st_size < size:
                raise OSError(f"segment {seg_id:#x} is smaller than the {size} bytes announced")
            segment = Segment(seg_id, size, fd)
        except (OSError, ValueError) as exc:
            os.close(fd)
            raise TritonError(Code.INTERNAL, f"cannot map shared-memory segment: {exc}") from exc
        self._segments[seg_id] = segment
        return segment

    def get(self, seg_id: int) -> Segment | None:
        """The segment with id ``seg_id``, or None."""
        return self._segments.get(seg_id)

    def remove(self, seg_id: int, close: bool = True) -> None:
        """Forget (and by default close) a segment."""
        segment = self._segments.pop(seg_id, None)
        if segment is not None and close:
            segment.close()

    def remove_owner(self, owner_id: int) -> None:
        """Forget every segment created by ``owner_id`` (a worker that exited)."""
        for seg_id in [s for s in self._segments if s >> _OWNER_SHIFT == owner_id]:
            self.remove(seg_id)

    def __contains__(self, seg_id: int) -> bool:
        return seg_id in self._segments

    def __iter__(self) -> Iterator[Segment]:
        return iter(list(self._segments.values()))

    def resolve(self, seg_id: int, offset: int, nbytes: int) -> memoryview:
        """Return the bytes a descriptor names, after checking it lies inside its segment.

        :raises TritonError: INTERNAL for an unknown segment or a range outside it.
        """
        if seg_id == EMPTY_SEGMENT:
            if nbytes:
                raise TritonError(Code.INTERNAL, f"descriptor of {nbytes} bytes names the empty segment")
            return memoryview(b"")
        segment = self._segments.get(seg_id)
        if segment is None:
            raise TritonError(Code.INTERNAL, f"descriptor names unknown shared-memory segment {seg_id:#x}")
        size = segment.size
        if not (0 <= offset <= size and 0 <= nbytes <= size - offset):  # window_inside, inlined (hot)
            raise TritonError(
                Code.INTERNAL,
                f"descriptor [{offset}, {offset}+{nbytes}) lies outside segment {seg_id:#x} of {segment.size} bytes",
            )
        return segment.view[offset : offset + nbytes]

    def locate(self, address: int, nbytes: int) -> tuple[int, int] | None:
        """``(segment id, offset)`` when ``[address, address+nbytes)`` lies in a mapped segment."""
        for segment in self._segments.values():
            offset = segment.contains(address, nbytes)
            if offset is not None:
                return segment.id, offset
        return None

    def close(self) -> None:
        """Close every segment."""
        for seg_id in list(self._segments):
            self.remove(seg_id)
