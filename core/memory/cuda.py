"""Client-registered CUDA shared-memory regions (Triton's CUDA shared-memory extension).

A client allocates device memory, exports it with ``cudaIpcGetMemHandle``
and registers the raw 64-byte handle with a device id and a byte size. On a
machine with a GPU and the ``cuda`` extra installed (``cuda-python``) the
core opens the handle (``cudaIpcOpenMemHandle``) to check it, and status
lists the region. Without a GPU (or without cuda-python) status answers an
empty list, as Triton does on such a machine, and register answers an error
that says CUDA is unavailable and why.

Requests that name a CUDA region for an input or output are refused with a
clear error for now: the GPU data path (a worker opening the handle itself,
as the system shared-memory path does) is not built yet.

Runs on the core's event loop thread. cuda-python is imported only when a
region is registered, never at start-up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..devices import gpu_ids
from ..errors import Code, TritonError

log = logging.getLogger("tritium.shared_memory")

__all__ = ["CudaRegion", "CudaSharedMemoryManager", "cuda_unavailable_reason"]

_HANDLE_BYTES = 64  # sizeof(cudaIpcMemHandle_t)


def _runtime() -> Any:
    """cuda-python's runtime module (``cuda.bindings.runtime``, or ``cuda.cudart`` before 12.6)."""
    try:
        from cuda.bindings import runtime  # type: ignore[import-not-found]
    except ImportError:
        from cuda import cudart as runtime  # type: ignore[import-not-found,no-redef]
    return runtime


def cuda_unavailable_reason() -> str | None:
    """Why CUDA shared memory cannot be used here, or None when it can."""
    if not gpu_ids():
        return "no GPU is visible to the server"
    try:
        _runtime()
    except ImportError:
        return "cuda-python is not installed (pip install 'tritium[cuda]')"
    return None


@dataclass(slots=True)
class CudaRegion:
    """A registered CUDA region: its name, device, size and the opened device pointer."""

    name: str
    device_id: int
    byte_size: int
    pointer: int

    def describe(self) -> dict[str, Any]:
        """The status entry Triton reports: name, device_id, byte_size."""
        return {"name": self.name, "device_id": self.device_id, "byte_size": self.byte_size}


class CudaSharedMemoryManager:
    """The registered CUDA shared-memory regions."""

    def __init__(self) -> None:
        self._regions: dict[str, CudaRegion] = {}

    def status(self, name: str = "") -> list[dict[str, Any]]:
        """Every region (sorted by name), or the one named.

        :raises TritonError: NOT_FOUND for an unknown name (Triton's message).
        """
        if name:
            region = self._regions.get(name)
            if region is None:
                raise TritonError(Code.NOT_FOUND, f"Unable to find cuda shared memory region: '{name}'")
            return [region.describe()]
        return [self._regions[n].describe() for n in sorted(self._regions)]

    def register(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """Open a CUDA IPC handle and register it as ``name``.

        :raises TritonError: ALREADY_EXISTS for a name in use; INVALID_ARG when
            CUDA is unavailable here (the reason is in the message) or the
            handle cannot be opened on ``device_id``.
        """
        if name in self._regions:
            raise TritonError(Code.ALREADY_EXISTS, f"shared memory region '{name}' already in manager")
        prefix = f"failed to register CUDA shared memory region '{name}'"
        reason = cuda_unavailable_reason()
        if reason is not None:
            raise TritonError(Code.INVALID_ARG, f"{prefix}: CUDA is unavailable: {reason}")
        if len(raw_handle) != _HANDLE_BYTES or byte_size <= 0 or device_id < 0:
            raise TritonError(Code.INVALID_ARG, f"{prefix}: invalid args")
        runtime = _runtime()
        (err,) = runtime.cudaSetDevice(device_id)
        if int(err) != 0:
            raise TritonError(Code.INVALID_ARG, f"{prefix}: cannot use device {device_id}: {err}")
        handle = runtime.cudaIpcMemHandle_t()
        handle.reserved = raw_handle
        err, pointer = runtime.cudaIpcOpenMemHandle(handle, runtime.cudaIpcMemLazyEnablePeerAccess)
        if int(err) != 0:
            raise TritonError(Code.INVALID_ARG, f"{prefix}: cannot open the CUDA IPC handle: {err}")
        self._regions[name] = CudaRegion(name, device_id, byte_size, int(pointer))
        log.info("registered CUDA shared memory region '%s' (device %d, %d bytes)", name, device_id, byte_size)

    def unregister(self, name: str = "") -> None:
        """Unregister one region ("" = all); an unknown name is not an error (as in Triton)."""
        for n in [name] if name else list(self._regions):
            region = self._regions.pop(n, None)
            if region is None:
                continue
            try:
                runtime = _runtime()
                runtime.cudaSetDevice(region.device_id)
                runtime.cudaIpcCloseMemHandle(region.pointer)
            except Exception as exc:  # closing must not fail the call
                log.warning("closing CUDA shared memory region '%s': %s", n, exc)

    def has(self, name: str) -> bool:
        """True when ``name`` is a registered CUDA region."""
        return name in self._regions

    @property
    def registered_bytes(self) -> int:
        """Bytes of all registered CUDA regions."""
        return sum(r.byte_size for r in self._regions.values())

    def close(self) -> None:
        """Unregister everything (at shutdown)."""
        self.unregister()
