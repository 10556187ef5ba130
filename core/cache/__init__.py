"""The response cache (``response_cache { enable: true }`` in a model config, ``--cache-config`` on the command line).

:func:`open_cache` builds the server's one cache from the ``--cache-config``
settings; :class:`CachedModel` puts it in front of a model version whose
config enables it: an identical request (see :func:`~.base.request_key`)
gets the stored outputs back, byte for byte, without running the model.
Hits and misses are counted in the model's statistics as Triton counts
them (``cache_hit`` / ``cache_miss`` count and nanoseconds; a hit is also a
success, but no inference or execution).

Runs on the core's event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import Code, TritonError
from ..inference.request import InferenceRequest
from ..inference.response import InferenceResponse
from ..model.servable import Cancellable, Done, Servable, submit_as_task
from .base import CacheEntry, ResponseCache, request_key
from .local import LocalCache

if TYPE_CHECKING:  # pragma: no cover
    from ..model.validation import ModelSignature
    from ..observability.stats import ModelStats

log = logging.getLogger("tritium.cache")

__all__ = [
    "CachedModel",
    "CacheEntry",
    "ResponseCache",
    "LocalCache",
    "open_cache",
    "parse_cache_setting",
    "request_key",
]

CACHES = ("local", "redis")


def parse_cache_setting(text: str) -> tuple[str, dict[str, str]]:
    """Parse one ``--cache-config`` value: ``<cache>,<key>=<value>[,<key>=<value>...]``.

    Triton takes one setting per flag (``--cache-config=local,size=1048576``,
    repeated for more); several comma-separated settings in one flag are
    accepted too (``redis,host=localhost,port=6379``).

    :raises ValueError: for text that is not in that form.
    """
    name, sep, rest = text.partition(",")
    if not sep or not name or not rest:
        raise ValueError(f"--cache-config option format is '<cache name>,<setting>=<value>'. Got {text}")
    settings: dict[str, str] = {}
    for part in rest.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise ValueError(f"--cache-config option format is '<cache name>,<setting>=<value>'. Got {text}")
        settings[key.strip()] = value.strip()
    return name.strip(), settings


def _int(cache: str, key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise TritonError(Code.INVALID_ARG, f"{cache} cache: '{key}' must be an integer, got '{value}'") from None


async def open_cache(config: Mapping[str, Mapping[str, str]]) -> ResponseCache | None:
    """The server's response cache for the ``--cache-config`` settings (None when none is configured).

    :param config: cache name -> its settings.
    :raises TritonError: INVALID_ARG for an unknown cache, several caches,
        an unknown or bad setting; UNAVAILABLE when Redis cannot be reached.
    """
    if not config:
        return None
    if len(config) > 1:
        raise TritonError(Code.INVALID_ARG, f"only one cache can be configured, got {', '.join(sorted(config))}")
    name, settings = next(iter(config.items()))
    if name == "local":
        unknown = sorted(set(settings) - {"size"})
        if unknown:
            raise TritonError(Code.INVALID_ARG, f"local cache: unknown setting '{unknown[0]}' (it takes 'size')")
        if "size" not in settings:
            raise TritonError(
                Code.INVALID_ARG, "local cache: 'size' (bytes) must be given, e.g. --cache-config=local,size=1048576"
            )
        cache: Any = LocalCache(_int("local", "size", settings["size"]))
        log.info("response cache: local, %d bytes", cache.size)
        return cache
    if name == "redis":
        from .redis import SETTINGS, RedisCache

        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise TritonError(
                Code.INVALID_ARG, f"redis cache: unknown setting '{unknown[0]}' (it takes {', '.join(SETTINGS)})"
            )
        cache = RedisCache(
            host=settings.get("host", "localhost"),
            port=_int("redis", "port", settings.get("port", "6379")),
            username=settings.get("username") or None,
            password=settings.get("password") or None,
            db=_int("redis", "db", settings.get("db", "0")),
        )
        await cache.connect()
        log.info("response cache: redis at %s", cache.where)
        return cache
    raise TritonError(
        Code.INVALID_ARG,
        f"unable to find cache '{name}': tritium provides the caches {' and '.join(repr(c) for c in CACHES)}",
    )


def check_cacheable(config: Mapping[str, Any]) -> bool:
    """Whether a model config enables the response cache.

    :raises TritonError: INVALID_ARG (Triton's message) for a decoupled model that enables it.
    """
    if not (config.get("response_cache") or {}).get("enable", False):
        return False
    if (config.get("model_transaction_policy") or {}).get("decoupled", False):
        raise TritonError(
            Code.INVALID_ARG,
            f"Response Cache does not currently support model {config.get('name', '')} with 'decoupled' "
            "transaction policy. Please disable the response cache.",
        )
    return True


class CachedModel:
    """A model version behind the response cache: a :class:`~tritium.core.model.servable.Servable` whose
    requests go to the cache first; everything but inference is the model's own.

    :param model: the model version (a :class:`~tritium.core.model.model.Model` or an ensemble).
    :param cache: the server's cache.
    """

    cache_enabled = True

    def __init__(self, model: Servable, cache: ResponseCache) -> None:
        self._model = model
        self._cache = cache

    @property
    def model(self) -> Servable:
        """The model behind the cache."""
        return self._model

    # -- the model's own ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._model.name

    @property
    def version(self) -> int:
        return self._model.version

    @property
    def config(self) -> dict[str, Any]:
        return self._model.config

    @property
    def signature(self) -> ModelSignature:
        return self._model.signature

    @property
    def decoupled(self) -> bool:
        return self._model.decoupled

    @property
    def stats(self) -> ModelStats:
        return self._model.stats

    @property
    def instances(self) -> Sequence[Any]:
        return self._model.instances

    @property
    def label(self) -> str:
        return self._model.label

    @property
    def platform(self) -> str:
        return self._model.platform

    @property
    def ready(self) -> bool:
        return self._model.ready

    @property
    def active(self) -> int:
        return self._model.active

    def pending_count(self) -> int:
        return self._model.pending_count()

    async def drain(self, timeout: float) -> bool:
        return await self._model.drain(timeout)

    async def unload(self) -> None:
        await self._model.unload()

    # -- inference through the cache -------------------------------------------------------------------
    def submit(self, request: InferenceRequest, done: Done) -> Cancellable:
        """Start one request (:meth:`infer` as a task); ``done`` is called once, on the event loop."""
        return submit_as_task(self.infer, request, done)

    async def _lookup(self, request: InferenceRequest) -> tuple[bytes | None, InferenceResponse | None, int]:
        start = time.perf_counter_ns()
        key = request_key(self._model.name, self._model.version, request)
        entry = await self._cache.lookup(key) if key is not None else None
        lookup_ns = time.perf_counter_ns() - start
        if entry is None:
            return key, None, lookup_ns
        self._model.stats.record_cache_hit(time.perf_counter_ns() - start, lookup_ns)
        return key, entry.response(self._model.name, str(self._model.version), request.id), lookup_ns

    async def _store(self, key: bytes | None, response: InferenceResponse, lookup_ns: int) -> None:
        if key is None or response.error is not None:
            return
        start = time.perf_counter_ns()
        await self._cache.insert(key, CacheEntry.from_response(response))
        self._model.stats.record_cache_miss(lookup_ns + time.perf_counter_ns() - start)

    async def infer(self, request: InferenceRequest) -> InferenceResponse:
        """The cached response of an identical earlier request, or the model's (then stored)."""
        key, hit, lookup_ns = await self._lookup(request)
        if hit is not None:
            return hit
        response = await self._model.infer(request)
        await self._store(key, response, lookup_ns)
        return response

    async def infer_stream(self, request: InferenceRequest) -> AsyncGenerator[InferenceResponse, None]:
        """As :meth:`infer`, as a stream of one response."""
        key, hit, lookup_ns = await self._lookup(request)
        if hit is not None:
            yield hit
            return
        async for response in self._model.infer_stream(request):
            if response.final:
                await self._store(key, response, lookup_ns)
            yield response
