"""A fake CUDA runtime for tests on machines without a GPU.

It has the parts of cuda-python's runtime API (``cuda.bindings.runtime``)
that :class:`tritium.core.memory.cuda.CudaSharedMemoryManager` calls, with
cuda-python's calling convention (every call returns ``(error, *results)``).
"Device memory" is host memory of this process: :meth:`FakeCudaRuntime.allocate`
returns a 64-byte IPC handle and a ctypes buffer, ``cudaIpcOpenMemHandle``
answers the buffer's address for that handle, and ``cudaMemcpy`` is a
``memmove`` that is recorded (``copies``) so that tests can check offsets and
sizes. ``fail`` makes a named call return an error code.
"""

from __future__ import annotations

import ctypes
import enum
import os
import threading
import types
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Copy", "FakeCudaError", "FakeCudaRuntime", "fake_cudashm_module"]


class FakeCudaError(enum.IntEnum):
    """A few of ``cudaError_t``'s codes."""

    cudaSuccess = 0
    cudaErrorInvalidValue = 1
    cudaErrorInvalidDevice = 101
    cudaErrorInvalidResourceHandle = 400
    cudaErrorIllegalAddress = 700


_TEXT = {
    FakeCudaError.cudaErrorInvalidValue: b"invalid argument",
    FakeCudaError.cudaErrorInvalidDevice: b"invalid device ordinal",
    FakeCudaError.cudaErrorInvalidResourceHandle: b"invalid resource handle",
    FakeCudaError.cudaErrorIllegalAddress: b"an illegal memory access was encountered",
}


class _Handle:
    """``cudaIpcMemHandle_t``: 64 opaque bytes at ``getPtr()``."""

    def __init__(self) -> None:
        self._bytes = (ctypes.c_char * 64)()

    def getPtr(self) -> int:
        return ctypes.addressof(self._bytes)


@dataclass
class Copy:
    """One recorded ``cudaMemcpy``: destination, source, bytes, kind and the current device."""

    dst: int
    src: int
    count: int
    kind: int
    device: int


@dataclass
class FakeCudaRuntime:
    """The fake runtime (see the module's docstring).

    :ivar device_count: devices 0 .. device_count - 1 exist.
    :ivar fail: call name -> error code that call returns (e.g. ``{"cudaMemcpy": FakeCudaError.cudaErrorIllegalAddress}``).
    :ivar copies: every ``cudaMemcpy`` made, in order.
    :ivar closed: the pointers passed to ``cudaIpcCloseMemHandle``.
    """

    device_count: int = 1
    fail: dict[str, FakeCudaError] = field(default_factory=dict)
    copies: list[Copy] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    opened: list[int] = field(default_factory=list)
    #: live cudaMalloc allocations: pointer -> buffer
    allocations: dict[int, Any] = field(default_factory=dict)
    streams: int = 0
    _device: int = 0
    _memory: dict[bytes, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    cudaIpcMemHandle_t = _Handle
    cudaIpcMemLazyEnablePeerAccess = 1
    cudaMemcpyKind = types.SimpleNamespace(cudaMemcpyHostToDevice=1, cudaMemcpyDeviceToHost=2)
    cudaError_t = FakeCudaError

    # -- test helpers ---------------------------------------------------------------
    def allocate(self, nbytes: int) -> tuple[bytes, Any]:
        """ "Device memory" of ``nbytes`` bytes: its raw 64-byte IPC handle and the ctypes buffer."""
        handle = os.urandom(64)
        buffer = (ctypes.c_char * nbytes)()
        with self._lock:
            self._memory[handle] = buffer
        return handle, buffer

    def address(self, buffer: Any) -> int:
        """The "device pointer" of a buffer from :meth:`allocate`."""
        return ctypes.addressof(buffer)

    # -- the runtime API ----------------------------------------------------------------
    def _error(self, name: str) -> FakeCudaError:
        return self.fail.get(name, FakeCudaError.cudaSuccess)

    def cudaSetDevice(self, device: int) -> tuple[FakeCudaError]:
        if self._error("cudaSetDevice"):
            return (self._error("cudaSetDevice"),)
        if not 0 <= device < self.device_count:
            return (FakeCudaError.cudaErrorInvalidDevice,)
        self._device = device
        return (FakeCudaError.cudaSuccess,)

    def cudaIpcOpenMemHandle(self, handle: _Handle, flags: int) -> tuple[FakeCudaError, int | None]:
        if self._error("cudaIpcOpenMemHandle"):
            return (self._error("cudaIpcOpenMemHandle"), None)
        buffer = self._memory.get(ctypes.string_at(handle.getPtr(), 64))
        if buffer is None:
            return (FakeCudaError.cudaErrorInvalidResourceHandle, None)
        self.opened.append(ctypes.addressof(buffer))
        return (FakeCudaError.cudaSuccess, ctypes.addressof(buffer))

    def cudaIpcCloseMemHandle(self, pointer: int) -> tuple[FakeCudaError]:
        self.closed.append(pointer)
        return (self._error("cudaIpcCloseMemHandle"),)

    def cudaMemcpy(self, dst: int, src: int, count: int, kind: int) -> tuple[FakeCudaError]:
        if self._error("cudaMemcpy"):
            return (self._error("cudaMemcpy"),)
        with self._lock:
            self.copies.append(Copy(dst, src, count, kind, self._device))
        ctypes.memmove(dst, src, count)
        return (FakeCudaError.cudaSuccess,)

    # device memory and streams (what the tensorrt backend calls): "device memory" is host memory here
    def cudaMalloc(self, nbytes: int) -> tuple[FakeCudaError, int]:
        if self._error("cudaMalloc"):
            return (self._error("cudaMalloc"), 0)
        buffer = (ctypes.c_char * nbytes)()
        with self._lock:
            self.allocations[ctypes.addressof(buffer)] = buffer
        return (FakeCudaError.cudaSuccess, ctypes.addressof(buffer))

    def cudaFree(self, pointer: int) -> tuple[FakeCudaError]:
        with self._lock:
            if self.allocations.pop(pointer, None) is None:
                return (FakeCudaError.cudaErrorInvalidValue,)
        return (FakeCudaError.cudaSuccess,)

    def cudaMemcpyAsync(self, dst: int, src: int, count: int, kind: int, stream: int) -> tuple[FakeCudaError]:
        del stream
        return self.cudaMemcpy(dst, src, count, kind)

    def cudaStreamCreate(self) -> tuple[FakeCudaError, int]:
        self.streams += 1
        return (FakeCudaError.cudaSuccess, 1000 + self.streams)

    def cudaStreamSynchronize(self, stream: int) -> tuple[FakeCudaError]:
        del stream
        return (self._error("cudaStreamSynchronize"),)

    def cudaStreamDestroy(self, stream: int) -> tuple[FakeCudaError]:
        del stream
        return (FakeCudaError.cudaSuccess,)

    def cudaGetErrorString(self, error: FakeCudaError) -> tuple[FakeCudaError, bytes]:
        return (FakeCudaError.cudaSuccess, _TEXT.get(FakeCudaError(error), b"unrecognized error code"))


def fake_cudashm_module(runtime: FakeCudaRuntime) -> types.ModuleType:
    """A stand-in for ``tritonclient.utils.cuda_shared_memory`` over ``runtime``'s "device memory".

    The same functions and arguments as tritonclient 2.51's (create, get_raw_handle
    (base64), set_shared_memory_region (arrays one after another from offset 0),
    get_contents_as_numpy (from offset 0), destroy), so that client code written
    for a GPU can run against a server that has ``runtime`` injected.
    """
    import base64

    import numpy as np

    module = types.ModuleType("tritonclient.utils.cuda_shared_memory")

    class Region:
        def __init__(self, name: str, byte_size: int, device_id: int) -> None:
            self.name, self.byte_size, self.device_id = name, byte_size, device_id
            self.handle, self.buffer = runtime.allocate(byte_size)

    def create_shared_memory_region(name: str, byte_size: int, device_id: int) -> Region:
        return Region(name, byte_size, device_id)

    def get_raw_handle(region: Region) -> bytes:
        return base64.b64encode(region.handle)

    def set_shared_memory_region(region: Region, values: list[Any]) -> None:
        offset = 0
        for value in values:
            data = np.ascontiguousarray(value).tobytes()
            if offset + len(data) > region.byte_size:
                raise ValueError("values do not fit the region")
            ctypes.memmove(ctypes.addressof(region.buffer) + offset, data, len(data))
            offset += len(data)

    def get_contents_as_numpy(region: Region, datatype: Any, shape: list[int]) -> Any:
        count = int(np.prod(shape))
        return np.frombuffer(bytes(region.buffer), dtype=datatype, count=count).reshape(shape).copy()

    def destroy_shared_memory_region(region: Region) -> None:
        pass

    for function in (
        create_shared_memory_region,
        get_raw_handle,
        set_shared_memory_region,
        get_contents_as_numpy,
        destroy_shared_memory_region,
    ):
        setattr(module, function.__name__, function)
    return module
