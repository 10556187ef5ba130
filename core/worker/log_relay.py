"""The core's end of a worker's stderr pipe: each line goes to the core's log (core process, event loop).

Workers write their log records as :data:`~tritium.core.observability.logging.WORKER_RECORD` lines; anything
else they print (a model's ``print``, a traceback written by the interpreter as it dies) is
relayed as information. Lines are read with a bound: a longer line is cut into pieces of
:data:`MAX_LINE` bytes, so a model printing without newlines cannot grow the core's memory.
"""

from __future__ import annotations

import asyncio
import os

from ..observability.logging import relay_worker_line

__all__ = ["relay_worker_log", "MAX_LINE"]

#: the longest line relayed in one piece, bytes
MAX_LINE = 1 << 16


async def relay_worker_log(fd: int, instance: str, pid: int | None) -> None:
    """Read ``fd`` (the worker's stderr, owned from now on) until the worker closes it."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    pipe = os.fdopen(fd, "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    except OSError:
        pipe.close()
        return
    try:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line:
                    return
            except asyncio.LimitOverrunError as exc:
                line = await reader.readexactly(exc.consumed)
            text = line.decode("utf-8", "replace").rstrip("\n")
            if text:
                relay_worker_line(text, instance, pid)
    finally:
        transport.close()
