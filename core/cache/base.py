"""The response cache's vocabulary: cached entries, the cache protocol, and request keys.

A cache maps a request key (a hash of the model name and version, and of
every input's name, datatype, shape and bytes, and the requested outputs) to
the outputs of the response that request got. Only complete, successful
responses of models that are not decoupled are cached. Entries hold their
own copies of the bytes (never views of shared memory that is reused).

Runs on the core's event loop.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..inference.request import InferenceRequest
from ..inference.response import InferenceResponse, OutputTensor

__all__ = ["CacheEntry", "ResponseCache", "request_key"]


@dataclass(slots=True)
class CacheEntry:
    """A cached response.

    :ivar outputs: ``(name, datatype, shape, bytes)`` of each output.
    :ivar parameters: the response's parameters.
    """

    outputs: list[tuple[str, str, list[int], bytes]]
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """Bytes the entry occupies (tensor bytes plus a small fixed overhead per tensor)."""
        return sum(len(data) + len(name) + 64 for name, _dt, _shape, data in self.outputs) + 64

    @classmethod
    def from_response(cls, response: InferenceResponse) -> CacheEntry:
        """Copy the outputs of ``response`` (call before releasing it)."""
        return cls(
            [(t.name, t.datatype, list(t.shape), bytes(t.data)) for t in response.outputs],
            dict(response.parameters),
        )

    def response(self, model_name: str, model_version: str, request_id: str) -> InferenceResponse:
        """A response carrying this entry's outputs (their bytes are the entry's own)."""
        return InferenceResponse(
            model_name,
            model_version,
            request_id,
            [OutputTensor(n, dt, list(shape), data) for n, dt, shape, data in self.outputs],
            dict(self.parameters),
        )


class ResponseCache(Protocol):
    """What a response cache implementation provides (``local``, ``redis``)."""

    name: str

    async def lookup(self, key: bytes) -> CacheEntry | None:
        """The entry stored under ``key``, or None."""
        ...

    async def insert(self, key: bytes, entry: CacheEntry) -> None:
        """Store ``entry`` under ``key`` (an entry too large for the cache is skipped)."""
        ...

    async def close(self) -> None:
        """Release connections and memory."""
        ...


def request_key(model_name: str, model_version: int | str, request: InferenceRequest) -> bytes | None:
    """The cache key of ``request`` for a model version (None: not cacheable).

    A request is not cacheable when an input has no bytes here or an output is
    asked into a shared-memory region (its response carries no bytes to keep).

    Hashes (SHA-256) the model name and version, then every input in name
    order: its name, datatype, shape and bytes; then the requested outputs
    and their classification counts. Other request parameters (request id,
    priority, timeout, custom parameters) do not take part, as in Triton.
    """
    if any(out.shared_memory is not None for out in request.outputs):
        return None
    h = hashlib.sha256()
    h.update(f"{model_name}\0{model_version}\0".encode())
    for inp in sorted(request.inputs, key=lambda i: i.name):
        if inp.data is None:
            return None
        h.update(f"{inp.name}\0{inp.datatype}\0{','.join(str(int(d)) for d in inp.shape)}\0".encode())
        data = memoryview(inp.data).cast("B")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    for out in sorted(request.outputs, key=lambda o: o.name):
        h.update(f"out\0{out.name}\0{out.classification}\0".encode())
    return h.digest()
