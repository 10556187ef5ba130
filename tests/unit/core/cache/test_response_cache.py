"""Unit tests of the response cache: keys, the local LRU, the --cache-config syntax."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tritium.core.cache import LocalCache, open_cache, parse_cache_setting, request_key
from tritium.core.cache.base import CacheEntry
from tritium.core.errors import TritonError
from tritium.core.inference.request import InferenceRequest, InferInput, RequestedOutput


def _request(x: np.ndarray, name: str = "INPUT0", **parameters) -> InferenceRequest:
    return InferenceRequest("m", "", "id-1", [InferInput.from_numpy(name, x)], [], dict(parameters))


def test_key_covers_name_version_inputs_and_outputs_but_not_parameters_or_id():
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    base = request_key("m", 1, _request(x))
    assert base == request_key("m", 1, _request(x, foo=1, priority=2))
    other_id = _request(x)
    other_id.id = "id-2"
    assert base == request_key("m", 1, other_id)
    assert base != request_key("m", 2, _request(x))
    assert base != request_key("n", 1, _request(x))
    assert base != request_key("m", 1, _request(x + 1))
    assert base != request_key("m", 1, _request(x.reshape(4)))  # same bytes, other shape
    assert base != request_key("m", 1, _request(x.view(np.int32)))  # same bytes, other datatype
    assert base != request_key("m", 1, _request(x, "INPUT1"))
    with_output = _request(x)
    with_output.outputs = [RequestedOutput("OUTPUT0", {"classification": 2})]
    assert base != request_key("m", 1, with_output)


def test_key_does_not_depend_on_input_order():
    a, b = InferInput.from_numpy("A", np.zeros(2, np.int32)), InferInput.from_numpy("B", np.ones(2, np.int32))
    assert request_key("m", 1, InferenceRequest("m", inputs=[a, b])) == request_key(
        "m", 1, InferenceRequest("m", inputs=[b, a])
    )


def _entry(nbytes: int) -> CacheEntry:
    return CacheEntry([("OUT", "UINT8", [nbytes], bytes(nbytes))])


def test_local_cache_evicts_least_recently_used():
    async def run() -> None:
        one = _entry(100).nbytes
        cache = LocalCache(size=2 * one)
        await cache.insert(b"a", _entry(100))
        await cache.insert(b"b", _entry(100))
        assert await cache.lookup(b"a") is not None  # a is now the most recently used
        await cache.insert(b"c", _entry(100))  # evicts b
        assert await cache.lookup(b"b") is None
        assert await cache.lookup(b"a") is not None and await cache.lookup(b"c") is not None
        assert (cache.num_entries, cache.evictions, cache.used) == (2, 1, 2 * one)
        await cache.insert(b"huge", _entry(10_000))  # larger than the cache: not stored, nothing evicted
        assert await cache.lookup(b"huge") is None and cache.num_entries == 2

    asyncio.run(run())


def test_cache_config_syntax():
    assert parse_cache_setting("local,size=1048576") == ("local", {"size": "1048576"})
    assert parse_cache_setting("redis,host=localhost,port=6379") == ("redis", {"host": "localhost", "port": "6379"})
    for bad in ("local", "local,", ",size=1", "local,size"):
        with pytest.raises(ValueError):
            parse_cache_setting(bad)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"memcached": {"size": "1"}}, "unable to find cache 'memcached'"),
        ({"local": {}}, "local cache: 'size' (bytes) must be given"),
        ({"local": {"size": "big"}}, "local cache: 'size' must be an integer, got 'big'"),
        ({"local": {"size": "0"}}, "local cache: 'size' must be a positive number of bytes, got 0"),
        ({"local": {"size": "1", "ttl": "3"}}, "local cache: unknown setting 'ttl'"),
        ({"local": {"size": "1"}, "redis": {}}, "only one cache can be configured"),
        ({"redis": {"hostname": "x"}}, "redis cache: unknown setting 'hostname'"),
    ],
)
def test_bad_cache_configs(config, message):
    with pytest.raises(TritonError) as err:
        asyncio.run(open_cache(config))
    assert message in err.value.message
