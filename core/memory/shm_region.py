"""Client-registered system shared-memory regions (Triton's system shared-memory extension).

A client creates a POSIX shared-memory object (``shm_open(key)``, i.e. the
file ``/dev/shm/<key>``), writes tensors into it and registers a *region*:
``name``, ``key``, ``offset`` and ``byte_size`` of a window of that object.
Requests then name ``(region, offset, byte_size)`` for their inputs and for
the outputs they want written there.

The core never maps a region. On registration it opens the object, checks the
window fits (``fstat``) and keeps the file descriptor; the descriptor travels
to each worker that needs it (``SCM_RIGHTS``, a REGION frame, see
:mod:`tritium.core.worker.protocol`), and the worker maps the region itself:
inputs are read in place, outputs written into it. Frames carry only
``(region id, offset, nbytes)`` descriptors, like arena tensors. The core
reads region bytes only to check a BYTES input's length prefixes (``pread``).

A region in use by in-flight requests can be unregistered: its name is free
at once, and its descriptor is closed (and dropped in the workers) when the
last request using it has finished. A region the client deletes
(``shm_unlink``) stays valid for as long as it is registered, as in Triton;
one the client truncates is refused with a clean error (the size is checked
with ``fstat`` before every use, in the core and again in the worker).

Runs on the core's event loop thread.
"""

from __future__ import annotations

import logging
import os
import stat
from typing import TYPE_CHECKING, Any

from ..errors import Code, TritonError
from .regions import (  # noqa: F401  (re-exported: the system shared-memory extension's names)
    _OWNER_SHIFT,
    _UINT64_MAX,
    REGION_OWNER,
    RegisteredRegion,
    ShmRef,
    SystemRegion,
    check_window,
    is_region_id,
    output_region_too_small,
    shm_path,
)

if TYPE_CHECKING:  # pragma: no cover
    from .cuda import CudaRef, CudaSharedMemoryManager
    from .pool import TensorPool

log = logging.getLogger("tritium.shared_memory")

__all__ = [
    "REGION_OWNER",
    "RegisteredRegion",
    "SharedMemoryManager",
    "ShmRef",
    "SystemRegion",
    "check_window",
    "is_region_id",
    "output_region_too_small",
    "shm_path",
]


class SharedMemoryManager:
    """The registered system shared-memory regions (Triton's ``SharedMemoryManager``).

    Errors and their codes are Triton 2.51's (checked against the real
    server), except that two regions may share one key (Triton 2.51 refuses the
    second with "Invalid shared memory region").

    :param pool: the core's tensor pool; it sends region descriptors to workers.
    """

    def __init__(self, pool: TensorPool) -> None:
        self._pool = pool
        self._regions: dict[str, SystemRegion] = {}
        self._next = 1
        #: the CUDA regions: :meth:`resolve` finds a name there when it is not a system region
        self.cuda: CudaSharedMemoryManager | None = None

    # -- the extension's calls ---------------------------------------------------
    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Register ``byte_size`` bytes at ``offset`` of shared-memory object ``key`` as ``name``.

        :raises TritonError: ALREADY_EXISTS for a name in use, INTERNAL when
            the object cannot be opened, INVALID_ARG when the window does not
            lie inside it (or is empty).
        """
        if name in self._regions:
            raise TritonError(Code.ALREADY_EXISTS, f"shared memory region '{name}' already in manager")
        path = shm_path(key)
        fd = -1
        try:
            if path is None:
                raise OSError("not a shared-memory key")
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError("not a shared-memory object")
        except OSError:
            if fd >= 0:
                os.close(fd)
            raise TritonError(Code.INVALID_ARG, f"Unable to open shared memory region: '{key}'") from None
        if byte_size <= 0 or offset < 0 or offset + byte_size > info.st_size or offset + byte_size > _UINT64_MAX:
            os.close(fd)
            raise TritonError(Code.INVALID_ARG, f"failed to register shared memory region '{name}': invalid args")
        region_id = (REGION_OWNER << _OWNER_SHIFT) | self._next
        self._next = (self._next + 1) & ((1 << _OWNER_SHIFT) - 1) or 1
        region = SystemRegion(name, key, offset, byte_size, fd, region_id, closer=self._close)
        self._regions[name] = region
        self._pool.add_region(region)
        log.info(
            "registered system shared memory region '%s' (key '%s', offset %d, %d bytes); %s",
            name,
            key,
            offset,
            byte_size,
            self.usage_text(),
        )

    def status(self, name: str = "") -> list[dict[str, Any]]:
        """Every region (sorted by name), or the one named.

        :raises TritonError: NOT_FOUND for an unknown name.
        """
        if name:
            region = self._regions.get(name)
            if region is None:
                raise TritonError(Code.NOT_FOUND, f"Unable to find system shared memory region: '{name}'")
            return [region.describe()]
        return [self._regions[n].describe() for n in sorted(self._regions)]

    def unregister(self, name: str = "") -> None:
        """Unregister one region ("" = all); an unknown name is not an error (as in Triton).

        A region still used by in-flight requests is closed when they finish.
        """
        names = [name] if name else list(self._regions)
        for n in names:
            region = self._regions.pop(n, None)
            if region is None:
                continue
            region.unregistered = True
            if region.users == 0:
                self._close(region)
            else:
                log.info(
                    "system shared memory region '%s' is in use by %d requests: closed when they finish",
                    n,
                    region.users,
                )
            log.info("unregistered system shared memory region '%s'; %s", n, self.usage_text())

    # -- the request path -------------------------------------------------------------
    def resolve(self, name: str, offset: int, byte_size: int | None) -> ShmRef | CudaRef:
        """The place of a tensor given as ``(region, offset, byte_size)`` (Triton's ``GetMemoryInfo``).

        A name that is not a system region is looked up among the CUDA regions
        (:meth:`CudaSharedMemoryManager.resolve`, the same checks).

        :param byte_size: None when the request gave none.
        :raises TritonError: NOT_FOUND for an unknown region, INVALID_ARG for a
            window outside it or a region truncated by its owner.
        """
        region = self._regions.get(name)
        if region is None:
            if self.cuda is not None and self.cuda.has(name):
                return self.cuda.resolve(name, offset, byte_size)
            raise TritonError(Code.NOT_FOUND, f"Unable to find shared memory region: '{name}'")
        check_window(name, region.byte_size, offset, byte_size)
        region.check_size()
        assert byte_size is not None  # check_window refuses None
        return ShmRef(region, region.offset + offset, byte_size)

    # -- accounting ------------------------------------------------------------------------
    @property
    def registered_bytes(self) -> int:
        """Bytes of all registered regions."""
        return sum(r.byte_size for r in self._regions.values())

    @property
    def region_count(self) -> int:
        """Number of registered regions."""
        return len(self._regions)

    def usage_text(self) -> str:
        """One line for the log: registered regions and the core's arena."""
        return (
            f"{self.region_count} system shared memory regions of {self.registered_bytes} bytes registered, "
            f"arena {self._pool.reserved_bytes} bytes reserved ({self._pool.used_bytes} in use)"
        )

    def close(self) -> None:
        """Unregister everything and close every descriptor (at shutdown)."""
        for region in list(self._regions.values()):
            region.users = 0
        self.unregister()

    def _close(self, region: SystemRegion) -> None:
        self._pool.drop_region(region.id)
        if region.fd >= 0:
            os.close(region.fd)
            region.fd = -1
