"""core.progress: plain lines in a log (throttled, with sizes and rates), a tqdm bar on a terminal."""

from __future__ import annotations

import io
import logging

import pytest

from tritium.core.observability import progress as pg


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_lines_are_throttled_and_say_size_share_and_rate(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("tritium.test.progress")
    clock = Clock()
    with caplog.at_level(logging.INFO, logger=log.name):
        p = pg.Progress(log, "downloading 'm/1'", 4 << 20, stream=io.StringIO(), clock=clock)
        p.update(1 << 20)  # too soon for a line
        clock.now += 2.0
        p.update(1 << 20)
        clock.now += 2.0
        p.close()
    assert [r.getMessage() for r in caplog.records] == [
        "downloading 'm/1': 4.0 MiB to do",
        "downloading 'm/1': 2.0 MiB of 4.0 MiB (50%), 1.0 MiB/s",
        "downloading 'm/1': done, 2.0 MiB in 4.0 s",
    ]


def test_a_terminal_gets_a_bar_and_no_lines_until_the_end(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("tritium.test.progress")
    terminal = Terminal()
    with caplog.at_level(logging.INFO, logger=log.name):
        p = pg.Progress(log, "unpacking env.tar.gz", 1000, stream=terminal)
        p.update(500)
        p.close()
    assert terminal.getvalue().startswith("\runpacking env.tar.gz:   0%|")  # tqdm draws (and redraws) it
    assert [r.getMessage().split(" in ")[0] for r in caplog.records] == ["unpacking env.tar.gz: done, 500 B"]


def test_size_text() -> None:
    assert [pg.size_text(n) for n in (0, 1023, 1536, 5 << 20, 3 << 30)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "5.0 MiB",
        "3.0 GiB",
    ]
