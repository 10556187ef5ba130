"""Progress of long work (downloads, unpacking, slow model loads): a bar on a terminal, plain lines in a log.

:class:`Progress` counts bytes (or items) of one piece of work. When the
server's log goes to an interactive terminal it draws a tqdm bar there;
otherwise it logs an INFO line at most every :data:`LOG_INTERVAL_S`
seconds (``downloading 'm/1' from s3://b/models: 12.0 MiB of 40.0 MiB
(30%), 4.1 MiB/s``) and one when the work ends. :func:`still_running`
logs ``still loading 'm' version 1, 20 s`` while a load runs long.

Thread-safe for one writer: :meth:`Progress.update` may run in a worker
thread (blocking I/O) while the event loop logs other things.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TextIO

__all__ = ["Progress", "LOG_INTERVAL_S", "STILL_AFTER_S", "STILL_EVERY_S", "still_running", "size_text"]

#: seconds between two progress lines in a log (a terminal's bar redraws as tqdm decides)
LOG_INTERVAL_S = 2.0
#: a load running this long is reported (then every :data:`STILL_EVERY_S` seconds)
STILL_AFTER_S = 5.0
STILL_EVERY_S = 10.0


def size_text(nbytes: float) -> str:
    """``1536`` -> ``1.5 KiB`` (binary units, one decimal)."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover


def _interactive(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """Progress of one piece of work.

    :param log: the logger its lines go to (INFO).
    :param what: what is being done, e.g. ``downloading 'm/1' from s3://b/models``.
    :param total: the amount of work (bytes when ``unit`` is ``"B"``), if known.
    :param unit: ``"B"`` (sizes and rates in KiB/MiB) or a noun for counted items.
    :param stream: where a terminal bar would go (default: stderr, the log's stream).
    :param clock: seconds, monotonic (tests pass a fake one).
    """

    def __init__(
        self,
        log: logging.Logger,
        what: str,
        total: int | None = None,
        unit: str = "B",
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log, self.what, self.total, self.unit = log, what, total, unit
        self.done = 0
        self._clock = clock
        self._start = self._last = clock()
        self._bar: Any = None
        stream = stream if stream is not None else sys.stderr
        if _interactive(stream) and log.isEnabledFor(logging.INFO):
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                desc=what,
                unit=unit,
                unit_scale=unit == "B",
                unit_divisor=1024,
                file=stream,
                leave=False,
                dynamic_ncols=True,
            )
        else:
            log.info("%s: %s", what, "started" if total is None else f"{self._amount(total)} to do")

    def _amount(self, n: float) -> str:
        return size_text(n) if self.unit == "B" else f"{n:.0f} {self.unit}"

    def line(self) -> str:
        """The progress so far, as a log line would say it."""
        elapsed = max(self._clock() - self._start, 1e-9)
        done = self._amount(self.done)
        if self.total:
            of = self._amount(self.total) if self.unit == "B" else f"{self.done} of {self.total} {self.unit}"
            done = (f"{done} of {of}" if self.unit == "B" else of) + f" ({100 * self.done / self.total:.0f}%)"
        rate = self.done / elapsed
        speed = f"{size_text(rate)}/s" if self.unit == "B" else f"{rate:.1f} {self.unit}/s"
        return f"{self.what}: {done}, {speed}"

    def update(self, n: int) -> None:
        """``n`` more units done."""
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = self._clock()
        if now - self._last >= LOG_INTERVAL_S:
            self._last = now
            self.log.info("%s", self.line())

    def close(self) -> None:
        """The work ended: the last line (with the time it took), or the bar removed."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elapsed = self._clock() - self._start
        self.log.info("%s: done, %s in %.1f s", self.what, self._amount(self.done), elapsed)


@asynccontextmanager
async def still_running(log: logging.Logger, what: str) -> AsyncIterator[None]:
    """Log ``still <what>, N s`` after :data:`STILL_AFTER_S` s, then every :data:`STILL_EVERY_S` s.

    Runs on the event loop around an ``await`` (a model's load).
    """
    start = time.monotonic()

    async def report() -> None:
        await asyncio.sleep(STILL_AFTER_S)
        while True:
            log.info("still %s, %.0f s", what, time.monotonic() - start)
            await asyncio.sleep(STILL_EVERY_S)

    task = asyncio.ensure_future(report())
    try:
        yield
    finally:
        task.cancel()
