"""The pieces of a registered shared-memory region, below the managers that hold them.

``RegisteredRegion`` (what system and CUDA regions share), ``SystemRegion``
(one registered POSIX shared-memory window and its descriptor), ``ShmRef``
(where a request's tensor lies in a region), the window checks and the region
id layout. :mod:`.shm_region` (system regions), :mod:`.cuda` (CUDA regions)
and :mod:`.pool` (the tensor pool that sends region descriptors to workers)
all build on this module, which imports none of them.

Runs on the core's event loop thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import Code, TritonError

log = logging.getLogger("tritium.shared_memory")

__all__ = [
    "REGION_OWNER",
    "RegionKind",
    "RegisteredRegion",
    "ShmRef",
    "SystemRegion",
    "check_window",
    "is_region_id",
    "output_region_too_small",
    "shm_path",
]

#: the two kinds of client-registered region: Triton's system and CUDA shared-memory extensions
RegionKind = Literal["system", "cuda"]

#: owner id (high bits of a segment id, see :mod:`.arena`) of registered regions
REGION_OWNER = 0xFFFFFF
_OWNER_SHIFT = 24
_UINT64_MAX = (1 << 64) - 1


def is_region_id(segment_id: int) -> bool:
    """True when a descriptor's segment id names a registered region (not an arena segment)."""
    return segment_id >> _OWNER_SHIFT == REGION_OWNER


def shm_path(key: str) -> str | None:
    """The file ``shm_open(key)`` opens on Linux (``/dev/shm/<name>``), or None for a key it refuses.

    As glibc does, one leading ``/`` is dropped and the rest must be a plain
    file name: no further ``/``, not empty, not ``.`` or ``..``.
    """
    name = key[1:] if key.startswith("/") else key
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        return None
    return os.path.join("/dev/shm", name)


def check_window(name: str, region_byte_size: int, offset: int, byte_size: int | None) -> None:
    """Check a tensor's window ``(offset, byte_size)`` against a region of ``region_byte_size`` bytes.

    The same checks, in the same order and with the same messages, as Triton's
    ``GetMemoryInfo``, for system and CUDA regions alike. Overflow-safe.

    :param byte_size: None when the request gave none.
    :raises TritonError: INVALID_ARG for an offset at or beyond the region's
        end, or an offset + byte size beyond it (or no byte size).
    """
    if offset < 0 or offset >= region_byte_size:
        raise TritonError(Code.INVALID_ARG, f"Invalid offset for shared memory region: '{name}'")
    if byte_size is None or byte_size < 0 or byte_size > region_byte_size - offset:
        raise TritonError(Code.INVALID_ARG, f"Invalid offset + byte size for shared memory region: '{name}'")


def output_region_too_small(name: str, byte_size: int, nbytes: int) -> TritonError:
    """Triton's error for an output of ``nbytes`` bytes asked into a window of ``byte_size`` bytes."""
    return TritonError(
        Code.INVALID_ARG,
        f"shared memory size specified with the request for output '{name}' ({byte_size} bytes) "
        f"should be at least {nbytes} bytes to hold the results",
    )


@dataclass(slots=True, eq=False)
class RegisteredRegion:
    """What system and CUDA regions share: the count of in-flight requests that use one.

    A region unregistered while requests use it is closed (``closer``) when
    the last of them has finished.

    :ivar users: in-flight requests that reference it.
    :ivar unregistered: True once unregistered (closed when ``users`` drops to 0).
    :ivar closer: closes it (its manager's).
    """

    users: int = field(default=0, kw_only=True)
    unregistered: bool = field(default=False, kw_only=True)
    closer: Callable[[Any], None] | None = field(default=None, kw_only=True)

    def acquire(self) -> None:
        """A request starts using the region (it stays open until :meth:`release`)."""
        self.users += 1

    def release(self) -> None:
        """A request that used the region finished; close it if it was unregistered meanwhile."""
        self.users -= 1
        if self.users <= 0 and self.unregistered and self.closer is not None:
            self.closer(self)


@dataclass(slots=True, eq=False)
class SystemRegion(RegisteredRegion):
    """One registered region and the open descriptor of its shared-memory object.

    :ivar name: the region name the client chose.
    :ivar key: the shared-memory key.
    :ivar offset: where the region starts in the object, bytes.
    :ivar byte_size: the region's size, bytes.
    :ivar fd: the object's file descriptor (held by the core; -1 once closed).
    :ivar id: the descriptor id frames use for it (``REGION_OWNER`` in the high bits).
    """

    name: str
    key: str
    offset: int
    byte_size: int
    fd: int
    id: int

    def read(self, offset: int, nbytes: int) -> bytes:
        """Copy ``nbytes`` at object offset ``offset`` (``pread``: safe even if the object shrinks).

        :raises TritonError: INVALID_ARG when fewer bytes are there (truncated meanwhile).
        """
        data = os.pread(self.fd, nbytes, offset) if nbytes else b""
        if len(data) != nbytes:
            self.check_size()
            raise TritonError(Code.INVALID_ARG, f"shared memory region '{self.name}' was truncated")
        return data

    @property
    def size(self) -> int:
        """Bytes of the object the region needs (``offset + byte_size``): what a worker maps."""
        return self.offset + self.byte_size

    def check_size(self) -> None:
        """Refuse a region whose object the client truncated after registering it.

        :raises TritonError: INVALID_ARG naming the region and both sizes.
        """
        try:
            size = os.fstat(self.fd).st_size
        except OSError as exc:
            raise TritonError(Code.INTERNAL, f"shared memory region '{self.name}' is not accessible: {exc}") from None
        if size < self.size:
            raise TritonError(
                Code.INVALID_ARG,
                f"shared memory region '{self.name}' (key '{self.key}') was truncated to {size} bytes "
                f"after it was registered with offset {self.offset} and byte size {self.byte_size}",
            )

    def describe(self) -> dict[str, Any]:
        """The status entry Triton reports: name, key, offset, byte_size."""
        return {"name": self.name, "key": self.key, "offset": self.offset, "byte_size": self.byte_size}


@dataclass(slots=True)
class ShmRef:
    """Where a request's tensor lies: ``byte_size`` bytes at object offset ``offset`` of ``region``."""

    region: SystemRegion
    offset: int
    byte_size: int

    @property
    def descriptor(self) -> tuple[int, int, int]:
        """``(region id, object offset, nbytes)`` as it travels in frames."""
        return (self.region.id, self.offset, self.byte_size)
