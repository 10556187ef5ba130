"""``--cache-config local,size=<bytes>``: an in-process least-recently-used response cache."""

from __future__ import annotations

from collections import OrderedDict

from ..errors import Code, TritonError
from .base import CacheEntry

__all__ = ["LocalCache"]


class LocalCache:
    """An LRU cache bounded by bytes (entries' tensor bytes plus a small overhead each).

    :param size: capacity in bytes (> 0).
    :raises TritonError: INVALID_ARG for a size that is not a positive integer.
    """

    name = "local"

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise TritonError(Code.INVALID_ARG, f"local cache: 'size' must be a positive number of bytes, got {size}")
        self.size = size
        self.used = 0
        self.evictions = 0
        self._entries: OrderedDict[bytes, CacheEntry] = OrderedDict()

    @property
    def num_entries(self) -> int:
        """Entries stored now."""
        return len(self._entries)

    async def lookup(self, key: bytes) -> CacheEntry | None:
        """The entry under ``key`` (now the most recently used), or None."""
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    async def insert(self, key: bytes, entry: CacheEntry) -> None:
        """Store ``entry``, evicting the least recently used entries to make room; skip it if larger than the cache."""
        nbytes = entry.nbytes
        if nbytes > self.size:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.used -= old.nbytes
        while self._entries and self.used + nbytes > self.size:
            _key, evicted = self._entries.popitem(last=False)
            self.used -= evicted.nbytes
            self.evictions += 1
        self._entries[key] = entry
        self.used += nbytes

    async def close(self) -> None:
        """Drop every entry."""
        self._entries.clear()
        self.used = 0
