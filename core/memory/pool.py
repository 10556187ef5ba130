"""The core's side of shared memory: its input arena, every mapped segment, and who has what.

The core writes each request's input bytes once into its :class:`Arena`;
workers receive a segment's fd the first time a descriptor they get names it
(:meth:`TensorPool.ensure_sent`). Segments that workers create for outputs
are mapped here on their SEGMENT frame and forgotten when the worker exits.
Runs on the core's event loop thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .arena import DEFAULT_SEGMENT_SIZE, Arena, Block, Segment, SegmentTable

if TYPE_CHECKING:  # pragma: no cover
    from .regions import SystemRegion

__all__ = ["TensorPool", "SegmentPeer", "SharedBlock"]


class SegmentPeer(Protocol):
    """A process segments can be sent to (a worker handle)."""

    def send_segment(self, segment: Segment) -> None: ...

    def drop_segment(self, segment_id: int) -> None: ...

    def send_region(self, region: SystemRegion) -> None: ...


class TensorPool:
    """The core's input arena plus the table of every segment mapped in the core.

    :param segment_size: size of a regular arena segment, in bytes.
    :param directory: place segments in this directory instead of anonymous memory.
    """

    def __init__(self, segment_size: int = DEFAULT_SEGMENT_SIZE, directory: str | None = None) -> None:
        self.segments = SegmentTable()
        self._regions: dict[int, SystemRegion] = {}
        self._holders: dict[int, set[SegmentPeer]] = {}
        self.arena = Arena(0, segment_size, directory, on_segment=self.segments.add, on_drop=self._on_drop)

    def allocate(self, nbytes: int) -> Block:
        """A block of ``nbytes`` in the input arena (see :meth:`Arena.allocate`)."""
        return self.arena.allocate(nbytes)

    def free(self, block: Block) -> None:
        """Return an input block."""
        self.arena.free_block(block)

    def shared(self, nbytes: int) -> SharedBlock:
        """A block of ``nbytes`` in the input arena with one reference (see :class:`SharedBlock`).

        :raises TritonError: UNAVAILABLE when the arena cannot grow by a segment that holds it.
        """
        return SharedBlock(self, self.arena.allocate(nbytes), 1)

    def ensure_sent(self, segment_id: int, peer: SegmentPeer) -> None:
        """Send core segment ``segment_id`` to ``peer`` unless it already has it."""
        holders = self._holders.setdefault(segment_id, set())
        if peer in holders:
            return
        segment = self.segments.get(segment_id)
        if segment is not None:
            peer.send_segment(segment)
            holders.add(peer)
            return
        region = self._regions.get(segment_id)
        if region is not None and region.fd >= 0:
            peer.send_region(region)
            holders.add(peer)

    def add_region(self, region: SystemRegion) -> None:
        """A client registered ``region``: its descriptor goes to workers when a request names it."""
        self._regions[region.id] = region

    def drop_region(self, region_id: int) -> None:
        """A region was unregistered and is no longer used: the workers that map it drop it."""
        self._regions.pop(region_id, None)
        for peer in self._holders.pop(region_id, set()):
            peer.drop_segment(region_id)

    def forget_peer(self, peer: SegmentPeer) -> None:
        """A worker exited: it holds nothing any more."""
        for holders in self._holders.values():
            holders.discard(peer)

    def _on_drop(self, segment: Segment) -> None:
        for peer in self._holders.pop(segment.id, set()):
            peer.drop_segment(segment.id)
        self.segments.remove(segment.id, close=False)

    def remove_segment(self, segment_id: int) -> None:
        """A worker dropped one of its segments: forget it, and tell the peers it was forwarded to."""
        for peer in self._holders.pop(segment_id, set()):
            peer.drop_segment(segment_id)
        self.segments.remove(segment_id)

    def remove_owner(self, owner_id: int) -> None:
        """A worker exited: forget its segments everywhere."""
        for segment in list(self.segments):
            if segment.id >> 24 == owner_id:
                self.remove_segment(segment.id)

    @property
    def reserved_bytes(self) -> int:
        """Bytes in the core's arena segments."""
        return self.arena.reserved_bytes

    @property
    def used_bytes(self) -> int:
        """Bytes of the core's arena in use by in-flight requests."""
        return self.arena.used_bytes

    def close(self) -> None:
        """Drop every segment (at shutdown)."""
        self.arena.close()
        self.segments.close()


class SharedBlock:
    """An input-arena block with several holders; freed when the last one releases it.

    Used for a batch's gathered inputs (one reference per request) and for a request
    body a frontend received straight into the arena (one reference for the frontend,
    one per input the core sends to a worker from it). Core event loop only.

    :param pool: the pool the block came from.
    :param block: the block.
    :param refs: the references held at creation.
    """

    __slots__ = ("block", "pool", "refs")

    def __init__(self, pool: TensorPool, block: Block, refs: int) -> None:
        self.pool = pool
        self.block = block
        self.refs = refs

    @property
    def view(self) -> memoryview:
        """The block's bytes (writable)."""
        return self.block.view

    def acquire(self) -> None:
        """Take one more reference."""
        self.refs += 1

    def release(self) -> None:
        """Drop one reference; the last frees the block."""
        self.refs -= 1
        if self.refs == 0:
            self.pool.free(self.block)
