"""The shared-memory arena: allocation, coalescing, dedicated segments, bounds checks."""

from __future__ import annotations

import os

import pytest

from tritium.core.errors import TritonError
from tritium.core.memory.arena import Arena, SegmentTable


def test_allocations_are_aligned_distinct_and_reused_after_free():
    arena = Arena(0, segment_size=1 << 20)
    a = arena.allocate(10)
    b = arena.allocate(100)
    assert a.segment is b.segment
    assert a.offset % 64 == 0 and b.offset % 64 == 0
    assert b.offset >= a.offset + 64
    a.view[:] = b"x" * 10
    arena.free_block(a)
    arena.free_block(b)
    assert arena.used_bytes == 0
    again = arena.allocate(10)
    assert (again.segment, again.offset) == (a.segment, a.offset)  # a small block is reused as it is
    arena.free_block(again)
    c = arena.allocate(1 << 20)  # needs the whole segment: the kept blocks go back, coalesced
    assert (c.segment, c.offset) == (a.segment, 0)
    assert len(arena.segments) == 1
    arena.close()


def test_a_block_larger_than_a_segment_gets_its_own_segment_dropped_when_freed():
    dropped = []
    arena = Arena(0, segment_size=1 << 20, on_drop=lambda s: dropped.append(s.id))
    small = arena.allocate(64)
    big = arena.allocate(3 << 20)
    assert big.segment is not small.segment
    assert big.segment is not None and big.segment.size >= 3 << 20
    big_id = big.segment.id
    arena.free_block(big)
    assert dropped == [big_id]
    assert len(arena.segments) == 1
    arena.close()


def test_a_new_segment_is_added_when_the_first_is_full():
    created = []
    arena = Arena(0, segment_size=1 << 16, on_segment=lambda s: created.append(s.id))
    blocks = [arena.allocate(1 << 14) for _ in range(5)]
    assert len(created) == 2
    assert len({b.segment.id for b in blocks if b.segment}) == 2
    arena.close()


def test_zero_byte_blocks_need_no_segment():
    arena = Arena(0)
    block = arena.allocate(0)
    assert block.segment is None and block.descriptor == (0, 0, 0)
    assert bytes(block.view) == b""
    arena.close()


def test_segments_have_no_name_in_dev_shm():
    before = set(os.listdir("/dev/shm"))
    arena = Arena(0, segment_size=1 << 20)
    arena.allocate(100)
    assert set(os.listdir("/dev/shm")) == before
    arena.close()


def test_segment_table_rejects_descriptors_outside_the_segment():
    arena = Arena(5, segment_size=1 << 16)
    table = SegmentTable()
    block = arena.allocate(128)
    assert block.segment is not None
    table.attach(block.segment.id, block.segment.size, os.dup(block.segment.fd))
    block.view[:4] = b"abcd"
    assert bytes(table.resolve(block.segment.id, block.offset, 4)) == b"abcd"
    for offset, nbytes in ((-1, 4), (0, (1 << 16) + 1), ((1 << 16) - 2, 4), (1 << 62, 1 << 62)):
        with pytest.raises(TritonError, match="outside segment"):
            table.resolve(block.segment.id, offset, nbytes)
    with pytest.raises(TritonError, match="unknown shared-memory segment"):
        table.resolve(12345, 0, 1)
    table.close()
    arena.close()


def test_attach_refuses_a_segment_smaller_than_announced():
    arena = Arena(6, segment_size=1 << 16)
    block = arena.allocate(1)
    assert block.segment is not None
    with pytest.raises(TritonError, match="smaller than"):
        SegmentTable().attach(block.segment.id, 1 << 20, os.dup(block.segment.fd))
    arena.close()
