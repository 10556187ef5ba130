"""The template process (core/worker/template.py) through its launcher (core/worker/launcher.py):
forks, exit statuses, framework preloads, and its stderr kept open for its whole life."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from tritium.core.worker.channel import BlockingChannel
from tritium.core.worker.launcher import TemplateLauncher
from tritium.core.worker.protocol import PROTOCOL_VERSION, Kind


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


async def _fork_one(launcher: TemplateLauncher, preload: tuple[str, ...] = ()) -> tuple[int, BlockingChannel, object]:
    """Fork a worker; return its pid, the core's end of its control channel and its handle."""
    core, child = socket.socketpair()
    beat, beat_child = socket.socketpair()
    log_read, log_write = os.pipe()
    try:
        handle = await launcher.fork(7, 0, "/", [child.fileno(), beat_child.fileno(), log_write], preload)
    finally:
        child.close()
        beat_child.close()
        os.close(log_write)
        os.close(log_read)
        beat.close()
    channel = BlockingChannel(core)
    [(hello, _fds)] = await asyncio.to_thread(channel.receive_once) or [([], [])]
    assert hello == [Kind.HELLO, PROTOCOL_VERSION, handle.pid]
    return handle.pid, channel, handle


def test_forks_report_exits_and_survive_a_failed_preload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise ImportError("a stand-in")\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the template's torch is the stand-in

    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    relay = logging.getLogger("tritium.worker")  # where the core logs its workers' (and the template's) stderr
    handler = Collect()
    relay.addHandler(handler)
    relay.setLevel(logging.INFO)

    async def scenario() -> None:
        launcher = TemplateLauncher(sys.executable, "")
        try:
            pid, channel, handle = await _fork_one(launcher)
            assert _comm(pid) == "tritium-worker" and _comm(launcher.pid or 0) == "tritium-tmpl"
            gc.collect()  # nothing the launcher needs may be collected: its tasks read the template's stderr
            # the template writes to its stderr that torch cannot be preloaded, and forks on
            second, second_channel, _ = await _fork_one(launcher, ("torch",))
            assert launcher.running and second != pid
            note = "worker template: not preloading torch: ImportError: a stand-in"
            for _ in range(100):  # the template's stderr still reaches the log
                if note in lines:
                    break
                await asyncio.sleep(0.05)
            assert note in lines, lines
            channel.close()  # the core goes away: the worker exits 0, the template reports it
            assert await asyncio.wait_for(handle.wait(), 10) == 0  # type: ignore[attr-defined]
            handle2 = launcher._forked[second]
            handle2.kill()  # through its pidfd
            assert await asyncio.wait_for(handle2.wait(), 10) == -signal.SIGKILL
            second_channel.close()
        finally:
            await launcher.close()

    try:  # the server's event loop: under uvloop an unreferenced task reading a pipe can be collected
        import uvloop
    except ImportError:
        asyncio.run(scenario())
    else:
        uvloop.run(scenario())
    finally:
        relay.removeHandler(handler)
