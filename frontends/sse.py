"""Server-Sent Events shared by the endpoints that stream a decoupled model's responses.

The OpenAI endpoint (``/v1/completions`` with ``"stream": true``) and the KServe
HTTP endpoint's generate extension (``/v2/models/<m>/generate_stream``) both send
one ``data: <JSON>`` event per response (the WHATWG ``text/event-stream`` format:
a ``data:`` line and a blank line) and answer with an error status when the model
refuses the request before its first response. The two pieces they share are here:
:func:`event` (and :func:`frame`, for JSON already encoded) frames one event, :func:`primed` awaits an iterator's first item so
that an error before any output can still become the HTTP status. Transport-free;
runs on the core's event loop.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, TypeVar

__all__ = ["event", "frame", "primed", "CONTENT_TYPE"]

T = TypeVar("T")

#: the ``Content-Type`` of an event stream (Triton's generate_stream sends this one)
CONTENT_TYPE = "text/event-stream; charset=utf-8"


def frame(data: bytes) -> bytes:
    """One Server-Sent Event carrying ``data`` (one line of encoded JSON): ``data: ...`` and a blank line."""
    return b"data: " + data + b"\n\n"


def event(payload: Any, compact: bool = True) -> bytes:
    """One Server-Sent Event: ``data: <payload as JSON>`` and the blank line that ends it (UTF-8).

    :param payload: a JSON-serializable object (its keys kept in their order).
    :param compact: no spaces after ``,`` and ``:`` (Triton's generate_stream); else
        Python's default separators (the OpenAI endpoint's chunks).
    """
    separators = (",", ":") if compact else None
    return frame(json.dumps(payload, ensure_ascii=False, separators=separators).encode("utf-8"))


async def primed(items: AsyncGenerator[T, None]) -> AsyncGenerator[T, None]:
    """``items`` with its first item awaited now.

    An error raised before the first item (a request refused before any output)
    raises here, while the caller can still answer with an error status; the
    returned iterator yields the first item, then the rest, and closes ``items``
    when it is closed itself.
    """
    try:
        first = [await anext(items)]
    except StopAsyncIteration:
        first = []
    except BaseException:
        await items.aclose()
        raise

    async def chained() -> AsyncGenerator[T, None]:
        async with aclosing(items):
            for item in first:
                yield item
            async for item in items:
                yield item

    return chained()
