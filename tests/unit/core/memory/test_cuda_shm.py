"""CUDA shared-memory regions in the core, with a fake CUDA runtime injected (no GPU needed)."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import numpy as np
import pytest

from tests.support.fake_cuda import FakeCudaError, FakeCudaRuntime
from tritium.core.errors import Code, TritonError
from tritium.core.memory.cuda import CudaRef, CudaSharedMemoryManager
from tritium.core.memory.pool import TensorPool
from tritium.core.memory.shm_region import SharedMemoryManager

D2H, H2D = 2, 1


@pytest.fixture
def fake() -> FakeCudaRuntime:
    return FakeCudaRuntime(device_count=2)


@pytest.fixture
def managers(fake: FakeCudaRuntime) -> Iterator[tuple[SharedMemoryManager, CudaSharedMemoryManager]]:
    pool = TensorPool()
    system = SharedMemoryManager(pool)
    cuda = CudaSharedMemoryManager(fake)
    system.cuda = cuda
    yield system, cuda
    system.close()
    cuda.close()
    pool.close()


def _error(call) -> tuple[Code, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(TritonError) as info:
        call()
    return info.value.code, info.value.message


def test_register_opens_the_handle_on_its_device(managers, fake: FakeCudaRuntime) -> None:
    _, cuda = managers
    handle, buffer = fake.allocate(128)
    cuda.register("c", handle, 1, 128)
    assert fake.opened == [fake.address(buffer)]
    assert cuda.status() == [{"name": "c", "device_id": 1, "byte_size": 128}]
    assert _error(lambda: cuda.register("c", handle, 1, 128)) == (
        Code.ALREADY_EXISTS,
        "shared memory region 'c' already in manager",
    )
    cuda.unregister("c")
    assert fake.closed == [fake.address(buffer)] and cuda.status() == []


@pytest.mark.parametrize(
    ("handle_bytes", "device", "size", "fail", "message"),
    [
        (63, 0, 64, None, "invalid args"),
        (64, 0, 0, None, "invalid args"),
        (64, -1, 64, None, "invalid args"),
        (64, 5, 64, None, "cannot use device 5: invalid device ordinal"),
        (64, 0, 64, "cudaIpcOpenMemHandle", "cannot open the CUDA IPC handle: invalid resource handle"),
    ],
)
def test_register_errors(managers, fake: FakeCudaRuntime, handle_bytes, device, size, fail, message) -> None:  # type: ignore[no-untyped-def]
    _, cuda = managers
    handle, _ = fake.allocate(64)
    if fail:
        fake.fail[fail] = FakeCudaError.cudaErrorInvalidResourceHandle
    code, text = _error(lambda: cuda.register("c", handle[:handle_bytes], device, size))
    assert (code, text) == (Code.INVALID_ARG, f"failed to register CUDA shared memory region 'c': {message}")
    assert cuda.status() == []


def test_an_unknown_handle_is_refused(managers) -> None:  # type: ignore[no-untyped-def]
    _, cuda = managers
    assert _error(lambda: cuda.register("c", b"\1" * 64, 0, 64)) == (
        Code.INVALID_ARG,
        "failed to register CUDA shared memory region 'c': cannot open the CUDA IPC handle: invalid resource handle",
    )


def test_without_a_runtime_register_says_cuda_is_unavailable() -> None:
    cuda = CudaSharedMemoryManager()  # this machine's: no GPU in CI
    from tritium.core.memory.cuda import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    if reason is None:  # pragma: no cover - a GPU machine
        pytest.skip("this machine has a GPU")
    assert cuda.status() == []
    assert _error(lambda: cuda.register("c", b"\0" * 64, 0, 64)) == (
        Code.INVALID_ARG,
        f"failed to register CUDA shared memory region 'c': CUDA is unavailable: {reason}",
    )


def test_resolve_uses_the_system_paths_checks(managers, fake: FakeCudaRuntime) -> None:
    system, cuda = managers
    handle, _ = fake.allocate(64)
    cuda.register("c", handle, 0, 64)
    ref = system.resolve("c", 16, 48)
    assert isinstance(ref, CudaRef) and (ref.region.name, ref.offset, ref.byte_size) == ("c", 16, 48)
    assert _error(lambda: system.resolve("c", 64, 0)) == (
        Code.INVALID_ARG,
        "Invalid offset for shared memory region: 'c'",
    )
    assert _error(lambda: system.resolve("c", -1, 4)) == (
        Code.INVALID_ARG,
        "Invalid offset for shared memory region: 'c'",
    )
    for size in (49, None, 2**64):
        assert _error(lambda size=size: system.resolve("c", 16, size)) == (
            Code.INVALID_ARG,
            "Invalid offset + byte size for shared memory region: 'c'",
        )
    assert _error(lambda: system.resolve("zz", 0, 4)) == (Code.NOT_FOUND, "Unable to find shared memory region: 'zz'")


def test_copies_use_the_region_pointer_plus_offset_on_its_device(managers, fake: FakeCudaRuntime) -> None:
    system, cuda = managers
    handle, device = fake.allocate(64)
    ctypes.memmove(device, bytes(range(64)), 64)
    cuda.register("c", handle, 1, 64)
    ref = system.resolve("c", 8, 32)
    host = bytearray(16)
    ref.copy_to_host("INPUT0", memoryview(host))
    assert bytes(host) == bytes(range(8, 24))
    copy = fake.copies[-1]
    base = fake.address(device)
    assert (copy.src, copy.count, copy.kind, copy.device) == (base + 8, 16, D2H, 1)
    assert copy.dst == np.frombuffer(host, np.uint8).ctypes.data

    out = np.arange(8, dtype=np.uint8) + 200
    ref.copy_from_host("OUTPUT0", memoryview(out))  # a read-only source works too
    copy = fake.copies[-1]
    assert (copy.dst, copy.count, copy.kind, copy.device) == (base + 8, 8, H2D, 1)
    assert bytes(device)[8:16] == bytes(out) and bytes(device)[16:24] == bytes(range(16, 24))

    before = len(fake.copies)
    ref.copy_to_host("INPUT0", memoryview(bytearray(0)))  # nothing to copy: no CUDA call
    assert len(fake.copies) == before


def test_copy_errors_are_triton_errors(managers, fake: FakeCudaRuntime) -> None:
    system, cuda = managers
    handle, _ = fake.allocate(64)
    cuda.register("c", handle, 0, 64)
    ref = system.resolve("c", 0, 32)
    fake.fail["cudaMemcpy"] = FakeCudaError.cudaErrorIllegalAddress
    assert _error(lambda: ref.copy_to_host("INPUT0", memoryview(bytearray(4)))) == (
        Code.INTERNAL,
        "failed to copy input 'INPUT0' from CUDA shared memory region 'c': an illegal memory access was encountered",
    )
    assert _error(lambda: ref.copy_from_host("OUTPUT0", b"1234")) == (
        Code.INTERNAL,
        "failed to copy output 'OUTPUT0' to CUDA shared memory region 'c': an illegal memory access was encountered",
    )
    del fake.fail["cudaMemcpy"]
    assert _error(lambda: ref.copy_from_host("OUTPUT0", b"x" * 33)) == (
        Code.INTERNAL,
        "failed to copy output 'OUTPUT0' to CUDA shared memory region 'c': too large",
    )

    def broken(*args):  # type: ignore[no-untyped-def]
        raise TypeError("bad pointer")

    fake.cudaMemcpy = broken  # type: ignore[method-assign]
    assert _error(lambda: ref.copy_to_host("INPUT0", memoryview(bytearray(4))))[1] == (
        "failed to copy input 'INPUT0' from CUDA shared memory region 'c': cudaMemcpy failed: TypeError: bad pointer"
    )


def test_unregister_in_use_closes_after_the_last_user(managers, fake: FakeCudaRuntime) -> None:
    system, cuda = managers
    handle, device = fake.allocate(64)
    cuda.register("c", handle, 0, 64)
    ref = system.resolve("c", 0, 8)
    ref.region.acquire()
    cuda.unregister("c")
    assert cuda.status() == [] and fake.closed == []  # name free, mapping kept
    ref.copy_from_host("OUTPUT0", b"abcdefgh")  # the in-flight request still writes its output
    assert bytes(device)[:8] == b"abcdefgh"
    ref.region.release()
    assert fake.closed == [fake.address(device)]
    assert _error(lambda: ref.copy_from_host("OUTPUT0", b"x"))[1].endswith("the region is closed")


def test_a_failing_close_does_not_fail_unregister(managers, fake: FakeCudaRuntime) -> None:
    _, cuda = managers
    handle, _ = fake.allocate(64)
    cuda.register("c", handle, 0, 64)
    fake.fail["cudaIpcCloseMemHandle"] = FakeCudaError.cudaErrorInvalidValue
    cuda.unregister()
    assert cuda.status() == [] and cuda.registered_bytes == 0
