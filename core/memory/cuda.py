"""Client-registered CUDA shared-memory regions (Triton's CUDA shared-memory extension).

A client allocates device memory, exports it with ``cudaIpcGetMemHandle``
and registers the raw 64-byte handle with a device id and a byte size. On a
machine with a GPU and the ``cuda`` extra installed (``cuda-python``) the
core opens the handle (``cudaIpcOpenMemHandle``) and keeps the mapping for as
long as the region is registered. Without a GPU (or without cuda-python)
status answers an empty list, as Triton does on such a machine, and register
answers an error that says CUDA is unavailable and why.

Tensors in CUDA regions are staged through host memory, as Triton does for a
model that runs on the CPU: an input is copied device→host once
(``cudaMemcpy``) into the core's arena block, from where the worker reads it
like any other input; an output asked into a CUDA region comes back from the
worker through the arena as usual and is copied host→device once into the
region when the response arrives. Only the core touches CUDA; workers never
see a device pointer. Windows are checked exactly as for system regions
(:func:`.shm_region.check_window`).

The CUDA runtime is an object with cuda-python's runtime API
(``cuda.bindings.runtime``): the manager takes one as a parameter, so tests
inject a fake. Every runtime call that fails becomes a :class:`TritonError`;
the server keeps serving.

Runs on the core's event loop thread (the copies are synchronous
``cudaMemcpy`` calls). cuda-python is imported only when a region is
registered, never at start-up.
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import Code, TritonError
from ..model.devices import gpu_ids
from .regions import RegisteredRegion, check_window

log = logging.getLogger("tritium.shared_memory")

__all__ = ["CudaRef", "CudaRegion", "CudaSharedMemoryManager", "cuda_unavailable_reason"]

_HANDLE_BYTES = 64  # sizeof(cudaIpcMemHandle_t)


def _runtime() -> Any:
    """cuda-python's runtime module (``cuda.bindings.runtime``, or ``cuda.cudart`` before 12.6)."""
    try:
        from cuda.bindings import runtime
    except ImportError:
        from cuda import cudart as runtime
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


def _address(buffer: Any) -> int:
    """The address of a contiguous host buffer (a memoryview of the arena, bytes, ...)."""
    return int(np.frombuffer(buffer, dtype=np.uint8).ctypes.data)


@dataclass(slots=True, eq=False)
class CudaRegion(RegisteredRegion):
    """A registered CUDA region: its name, device, size and the device pointer opened in the core.

    ``users`` / ``unregistered`` (:class:`RegisteredRegion`): a region
    unregistered while requests use it is closed when the last one finishes.
    """

    name: str
    device_id: int
    byte_size: int
    pointer: int

    def describe(self) -> dict[str, Any]:
        """The status entry Triton reports: name, device_id, byte_size."""
        return {"name": self.name, "device_id": self.device_id, "byte_size": self.byte_size}


@dataclass(slots=True)
class CudaRef:
    """Where a request's tensor lies in a CUDA region: ``byte_size`` bytes at ``offset`` of ``region``.

    :ivar region: the registered region.
    :ivar offset: bytes from the region's start (checked against its size).
    :ivar byte_size: the window's size, bytes.
    :ivar manager: copies to and from the region (its CUDA runtime).
    """

    region: CudaRegion
    offset: int
    byte_size: int
    manager: CudaSharedMemoryManager

    def copy_to_host(self, tensor: str, dst: memoryview) -> None:
        """Copy the window's first ``len(dst)`` bytes into the host buffer ``dst`` (device→host).

        :raises TritonError: INTERNAL when the CUDA copy fails.
        """
        self.manager.copy(self, tensor, dst, to_host=True)

    def copy_from_host(self, tensor: str, src: Any) -> None:
        """Copy the host buffer ``src`` (at most ``byte_size`` bytes) to the window's start (host→device).

        :raises TritonError: INTERNAL when the CUDA copy fails.
        """
        self.manager.copy(self, tensor, src, to_host=False)


class CudaSharedMemoryManager:
    """The registered CUDA shared-memory regions.

    :param runtime: the CUDA runtime to use, an object with cuda-python's
        runtime API (``cudaSetDevice``, ``cudaIpcMemHandle_t``,
        ``cudaIpcOpenMemHandle``, ``cudaIpcCloseMemHandle``, ``cudaMemcpy``,
        ``cudaMemcpyKind``, ``cudaGetErrorString``; calls return cuda-python's
        ``(error, *results)`` tuples). None: cuda-python's, when this machine
        has a GPU (see :func:`cuda_unavailable_reason`). Tests pass a fake.
    """

    def __init__(self, runtime: Any = None) -> None:
        self._regions: dict[str, CudaRegion] = {}
        self._runtime = runtime

    def _get_runtime(self) -> Any:
        """The runtime in use.

        :raises TritonError: INVALID_ARG saying why CUDA is unavailable here.
        """
        if self._runtime is None:
            reason = cuda_unavailable_reason()
            if reason is not None:
                raise TritonError(Code.INVALID_ARG, f"CUDA is unavailable: {reason}")
            self._runtime = _runtime()
        return self._runtime

    def _call(self, what: str, function: str, *args: Any) -> tuple[Any, ...]:
        """Call runtime ``function``; return its results after the error code.

        :raises TritonError: INTERNAL ``"<what>: <CUDA's error string>"`` when
            the call returns an error or raises.
        """
        runtime = self._get_runtime()
        try:
            err, *results = getattr(runtime, function)(*args)
        except Exception as exc:  # noqa: BLE001 - a broken binding or a bad argument: an error, never a crash
            raise TritonError(Code.INTERNAL, f"{what}: {function} failed: {type(exc).__name__}: {exc}") from None
        if int(err) != 0:
            raise TritonError(Code.INTERNAL, f"{what}: {_error_text(runtime, err)}")
        return tuple(results)

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
        try:
            runtime = self._get_runtime()
        except TritonError as exc:
            raise TritonError(Code.INVALID_ARG, f"{prefix}: {exc.message}") from None
        if len(raw_handle) != _HANDLE_BYTES or byte_size <= 0 or device_id < 0:
            raise TritonError(Code.INVALID_ARG, f"{prefix}: invalid args")
        try:
            self._call(f"cannot use device {device_id}", "cudaSetDevice", device_id)
            handle = runtime.cudaIpcMemHandle_t()
            # the handle is 64 opaque bytes; cuda-python 13 no longer exposes its ``reserved`` field
            ctypes.memmove(handle.getPtr(), bytes(raw_handle), _HANDLE_BYTES)
            (pointer,) = self._call(
                "cannot open the CUDA IPC handle",
                "cudaIpcOpenMemHandle",
                handle,
                runtime.cudaIpcMemLazyEnablePeerAccess,
            )
        except TritonError as exc:
            raise TritonError(Code.INVALID_ARG, f"{prefix}: {exc.message}") from None
        self._regions[name] = CudaRegion(name, device_id, byte_size, int(pointer), closer=self._close)
        log.info("registered CUDA shared memory region '%s' (device %d, %d bytes)", name, device_id, byte_size)

    def unregister(self, name: str = "") -> None:
        """Unregister one region ("" = all); an unknown name is not an error (as in Triton).

        A region still used by in-flight requests is closed when they finish.
        """
        for n in [name] if name else list(self._regions):
            region = self._regions.pop(n, None)
            if region is None:
                continue
            region.unregistered = True
            if region.users <= 0:
                self._close(region)
            else:
                log.info(
                    "CUDA shared memory region '%s' is in use by %d requests: closed when they finish", n, region.users
                )

    def _close(self, region: CudaRegion) -> None:
        if region.pointer == 0:
            return
        pointer, region.pointer = region.pointer, 0
        try:
            self._call("", "cudaSetDevice", region.device_id)
            self._call("", "cudaIpcCloseMemHandle", pointer)
        except TritonError as exc:  # closing must not fail the call
            log.warning("closing CUDA shared memory region '%s'%s", region.name, exc.message)

    # -- the request path ----------------------------------------------------------------
    def has(self, name: str) -> bool:
        """True when ``name`` is a registered CUDA region."""
        return name in self._regions

    def resolve(self, name: str, offset: int, byte_size: int | None) -> CudaRef:
        """The place of a tensor given as ``(region, offset, byte_size)`` in a CUDA region.

        :raises TritonError: NOT_FOUND for an unknown region; INVALID_ARG for a
            window outside it (the system path's checks and messages).
        """
        region = self._regions.get(name)
        if region is None:
            raise TritonError(Code.NOT_FOUND, f"Unable to find shared memory region: '{name}'")
        check_window(name, region.byte_size, offset, byte_size)
        assert byte_size is not None  # check_window refuses None
        return CudaRef(region, offset, byte_size, self)

    def copy(self, ref: CudaRef, tensor: str, host: Any, *, to_host: bool) -> None:
        """Copy between host buffer ``host`` and the start of ``ref``'s window, on the region's device.

        :param tensor: the input or output name (for the error message).
        :param host: a contiguous host buffer of at most ``ref.byte_size`` bytes
            (writable when ``to_host``).
        :param to_host: True: device→host (an input); False: host→device (an output).
        :raises TritonError: INTERNAL naming the tensor and region when the
            buffer does not fit the window, the region is closed, or CUDA fails.
        """
        nbytes = memoryview(host).nbytes
        region = ref.region
        what = (
            f"failed to copy input '{tensor}' from CUDA shared memory region '{region.name}'"
            if to_host
            else f"failed to copy output '{tensor}' to CUDA shared memory region '{region.name}'"
        )
        if nbytes > ref.byte_size or region.pointer == 0:
            raise TritonError(
                Code.INTERNAL, f"{what}: {'the region is closed' if region.pointer == 0 else 'too large'}"
            )
        if nbytes == 0:
            return
        runtime = self._get_runtime()
        device = region.pointer + ref.offset
        kinds = runtime.cudaMemcpyKind
        self._call(what, "cudaSetDevice", region.device_id)
        if to_host:
            self._call(what, "cudaMemcpy", _address(host), device, nbytes, kinds.cudaMemcpyDeviceToHost)
        else:
            self._call(what, "cudaMemcpy", device, _address(host), nbytes, kinds.cudaMemcpyHostToDevice)

    # -- accounting ------------------------------------------------------------------------
    @property
    def registered_bytes(self) -> int:
        """Bytes of all registered CUDA regions."""
        return sum(r.byte_size for r in self._regions.values())

    def close(self) -> None:
        """Unregister everything and close every mapping (at shutdown)."""
        for region in list(self._regions.values()):
            region.users = 0
        self.unregister()


def _error_text(runtime: Any, err: Any) -> str:
    """CUDA's description of error ``err`` (``cudaGetErrorString``), or its name."""
    try:
        code, text = runtime.cudaGetErrorString(err)
        if int(code) == 0 and text:
            return text.decode() if isinstance(text, bytes) else str(text)
    except Exception:  # noqa: BLE001, S110 - only a nicer message is lost
        pass
    return str(err)
