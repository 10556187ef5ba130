"""Registered system shared-memory regions: the core's manager and the worker's region table."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tritium.core.errors import Code, TritonError
from tritium.core.memory.pool import TensorPool
from tritium.core.memory.region_map import RegionTable
from tritium.core.memory.shm_region import SharedMemoryManager, is_region_id, shm_path


@pytest.fixture
def key() -> Iterator[str]:
    name = f"tritium_unit_{uuid.uuid4().hex[:8]}"
    with open(f"/dev/shm/{name}", "wb") as f:
        f.write(bytes(range(128)))
    yield "/" + name
    os.unlink(f"/dev/shm/{name}")


@pytest.fixture
def manager() -> Iterator[SharedMemoryManager]:
    pool = TensorPool()
    m = SharedMemoryManager(pool)
    yield m
    m.close()
    pool.close()


def test_shm_path_refuses_anything_but_a_plain_name() -> None:
    assert shm_path("/abc") == "/dev/shm/abc"
    assert shm_path("abc") == "/dev/shm/abc"
    for bad in ("/", "", "/a/b", "/..", "/.", "../x", "/a\0b"):
        assert shm_path(bad) is None


def test_register_resolve_and_bounds(manager: SharedMemoryManager, key: str) -> None:
    manager.register("r", key, 32, 64)
    ref = manager.resolve("r", 16, 48)
    assert is_region_id(ref.region.id) and (ref.offset, ref.byte_size) == (48, 48)
    assert ref.region.read(ref.offset, 4) == bytes([48, 49, 50, 51])
    with pytest.raises(TritonError, match="Invalid offset for"):
        manager.resolve("r", 64, 0)
    with pytest.raises(TritonError, match="Invalid offset \\+ byte size"):
        manager.resolve("r", 16, 49)
    with pytest.raises(TritonError, match="Invalid offset \\+ byte size"):
        manager.resolve("r", 0, 2**64)  # no overflow
    with pytest.raises(TritonError) as info:
        manager.register("r2", key, 2**64 - 1, 2)
    assert info.value.code == Code.INVALID_ARG


def test_unregister_in_use_closes_after_the_last_user(manager: SharedMemoryManager, key: str) -> None:
    manager.register("r", key, 0, 128)
    ref = manager.resolve("r", 0, 8)
    ref.region.acquire()
    manager.unregister("r")
    assert manager.status() == [] and ref.region.fd >= 0  # still open for the request
    manager.register("r", key, 0, 64)  # the name is free at once
    ref.region.release()
    assert ref.region.fd == -1


def test_truncated_object_is_refused(manager: SharedMemoryManager, key: str) -> None:
    manager.register("r", key, 0, 128)
    os.truncate(f"/dev/shm/{key[1:]}", 10)
    with pytest.raises(TritonError, match="was truncated to 10 bytes") as info:
        manager.resolve("r", 0, 8)
    assert info.value.code == Code.INVALID_ARG


def test_region_table_views_in_place_and_checks_size(key: str) -> None:
    table = RegionTable()
    fd = os.open(f"/dev/shm/{key[1:]}", os.O_RDWR)
    region_id = (0xFFFFFF << 24) | 1
    table.attach(region_id, 128, "r", key, fd)
    view = table.view(region_id, 8, 4)
    assert bytes(view) == bytes([8, 9, 10, 11])
    table.write(region_id, 8, b"\xff\xff")
    assert bytes(view) == b"\xff\xff\x0a\x0b"  # the same memory
    view.release()
    with pytest.raises(TritonError, match="outside shared memory region"):
        table.view(region_id, 120, 16)
    os.truncate(f"/dev/shm/{key[1:]}", 16)
    with pytest.raises(TritonError, match="was truncated to 16 bytes"):
        table.view(region_id, 0, 4)  # checked before touching: no SIGBUS
    with pytest.raises(TritonError, match="was truncated to 16 bytes"):
        table.write(region_id, 0, b"x")
    assert table.remove(region_id) and not table.remove(region_id)
    table.close()
