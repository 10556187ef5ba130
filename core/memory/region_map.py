"""The worker's side of client-registered shared-memory regions: map, read in place, write outputs.

The core sends a region's file descriptor in a REGION frame the first time a
request for this worker names it (see :mod:`.shm_region`). The worker maps it
on first use and hands the model numpy views of the input bytes: no copy.
Outputs requested into a region are written with ``pwrite`` (one copy, from
the model's array straight into the client's object).

A mapped file that its owner truncates raises SIGBUS when a page beyond the
new end is touched. So the size is checked with ``fstat`` before every view
and every write, and outputs never go through the mapping (``pwrite`` past
the end just fails or extends the file). What remains is a client that
truncates its object while the model is reading the input it sent: that is
the client destroying memory it lent to a running request, as it could with
any shared-memory server.

Runs in one worker process; REGION/DROP frames may arrive on its reader
thread while the main thread executes, hence the lock.
"""

from __future__ import annotations

import mmap
import os
import threading
from dataclasses import dataclass

from ..errors import Code, TritonError
from .arena import window_inside

__all__ = ["RegionTable"]


@dataclass(slots=True, eq=False)
class _Region:
    id: int
    size: int
    name: str
    key: str
    fd: int
    mapping: mmap.mmap | None = None
    view: memoryview | None = None

    def check(self, end: int) -> None:
        try:
            size = os.fstat(self.fd).st_size
        except OSError as exc:
            raise TritonError(Code.INTERNAL, f"shared memory region '{self.name}' is not accessible: {exc}") from None
        if size < max(end, self.size):
            raise TritonError(
                Code.INVALID_ARG,
                f"shared memory region '{self.name}' (key '{self.key}') was truncated to {size} bytes "
                f"after it was registered ({self.size} bytes needed)",
            )

    def close(self) -> None:
        if self.view is not None:
            try:
                self.view.release()
                assert self.mapping is not None
                self.mapping.close()
            except BufferError:
                pass  # a numpy view still points here; the mapping dies with it
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class RegionTable:
    """The regions this worker received, by id."""

    def __init__(self) -> None:
        self._regions: dict[int, _Region] = {}
        self._lock = threading.Lock()

    def attach(self, region_id: int, size: int, name: str, key: str, fd: int) -> None:
        """Keep a region's fd (takes ownership); it is mapped on first use."""
        with self._lock:
            old = self._regions.pop(region_id, None)
            self._regions[region_id] = _Region(region_id, int(size), str(name), str(key), fd)
        if old is not None:
            old.close()

    def remove(self, region_id: int) -> bool:
        """Drop a region (unregistered, no request uses it); False when it is not one of ours."""
        with self._lock:
            region = self._regions.pop(region_id, None)
        if region is None:
            return False
        region.close()
        return True

    def _get(self, region_id: int, offset: int, nbytes: int) -> _Region:
        region = self._regions.get(region_id)
        if region is None:
            raise TritonError(Code.INTERNAL, f"descriptor names unknown shared memory region {region_id:#x}")
        if not window_inside(offset, nbytes, region.size):
            raise TritonError(
                Code.INTERNAL,
                f"descriptor [{offset}, {offset}+{nbytes}) lies outside shared memory region '{region.name}' "
                f"of {region.size} bytes",
            )
        region.check(offset + nbytes)
        return region

    def view(self, region_id: int, offset: int, nbytes: int) -> memoryview:
        """The bytes a descriptor names, in place (mapped on first use; size checked first).

        :raises TritonError: INTERNAL for a bad descriptor, INVALID_ARG for a
            region its owner truncated.
        """
        region = self._get(region_id, offset, nbytes)
        if not nbytes:
            return memoryview(b"")
        if region.view is None:
            try:
                region.mapping = mmap.mmap(region.fd, region.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            except (OSError, ValueError) as exc:
                raise TritonError(Code.INTERNAL, f"cannot map shared memory region '{region.name}': {exc}") from None
            region.view = memoryview(region.mapping)
        return region.view[offset : offset + nbytes]

    def write(self, region_id: int, offset: int, data: memoryview | bytes) -> None:
        """Write ``data`` at ``offset`` of a region (``pwrite``; size checked first).

        :raises TritonError: as :meth:`view`, or INTERNAL when the write fails.
        """
        nbytes = memoryview(data).nbytes
        region = self._get(region_id, offset, nbytes)
        view = memoryview(data).cast("B") if nbytes else memoryview(b"")
        done = 0
        try:
            while done < nbytes:
                done += os.pwrite(region.fd, view[done:], offset + done)
        except OSError as exc:
            raise TritonError(Code.INTERNAL, f"cannot write to shared memory region '{region.name}': {exc}") from None

    def close(self) -> None:
        """Drop every region."""
        with self._lock:
            regions, self._regions = list(self._regions.values()), {}
        for region in regions:
            region.close()
