"""``--cache-config redis,host=<host>,port=<port>``: a response cache in a Redis server.

Entries are stored as msgpack documents (never pickles) under
``tritium:<sha256 hex>``; Redis' own memory policy evicts them. Needs the
``redis`` package (``pip install tritium[redis]``).
"""

from __future__ import annotations

from typing import Any

import msgpack

from ..errors import Code, TritonError
from .base import CacheEntry

__all__ = ["RedisCache", "SETTINGS"]

#: settings the redis cache takes (Triton's redis cache names)
SETTINGS = ("host", "port", "username", "password", "db")


class RedisCache:
    """A response cache in Redis.

    :param host: Redis host (default ``localhost``).
    :param port: Redis port (default 6379).
    :param username: / :param password: credentials, if the server wants them.
    :param db: database number.
    """

    name = "redis"

    def __init__(
        self,
        host: str = "localhost",
        port: int = 6379,
        username: str | None = None,
        password: str | None = None,
        db: int = 0,
    ) -> None:
        try:
            import redis.asyncio as aioredis
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise TritonError(
                Code.INVALID_ARG, "the redis cache needs the 'redis' package (pip install 'tritium[redis]')"
            ) from exc
        self.where = f"{host}:{port}"
        self._client: Any = aioredis.Redis(host=host, port=port, username=username, password=password, db=db)

    async def connect(self) -> None:
        """Check that the server answers.

        :raises TritonError: UNAVAILABLE when it does not.
        """
        try:
            await self._client.ping()
        except Exception as exc:
            raise TritonError(
                Code.UNAVAILABLE, f"redis cache: cannot reach the Redis server at {self.where}: {exc}"
            ) from exc

    async def lookup(self, key: bytes) -> CacheEntry | None:
        """The entry under ``key``, or None (also when Redis cannot be reached: a miss)."""
        try:
            blob = await self._client.get(b"tritium:" + key.hex().encode())
        except Exception:
            return None
        if blob is None:
            return None
        try:
            outputs, parameters = msgpack.unpackb(blob, raw=False)
            return CacheEntry([(n, dt, list(shape), data) for n, dt, shape, data in outputs], dict(parameters))
        except (ValueError, TypeError, msgpack.ExtraData):
            return None

    async def insert(self, key: bytes, entry: CacheEntry) -> None:
        """Store ``entry`` (a failure to reach Redis only loses the entry)."""
        blob = msgpack.packb([[list(o) for o in entry.outputs], entry.parameters], use_bin_type=True)
        try:
            await self._client.set(b"tritium:" + key.hex().encode(), blob)
        except Exception:
            return

    async def close(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()
