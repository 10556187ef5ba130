"""The core polls a fast worker's socket for its reply while one batch is in flight (``--reply-poll-us``).

What is checked: when the poll runs and how long it may last (:class:`ReplyPoll`),
that a reply arriving within the window is handled before the send returns (no
trip through the event loop), that one arriving after it still comes through the
loop, that a worker closing its socket during the poll fails the channel as a
read would, the machine default, the command-line flag and its bad values. The
speed gain is measured in docs/performance.md, never asserted here.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from tritium.cli import parse_args
from tritium.core.settings import options as options_module
from tritium.core.worker.channel import AsyncChannel
from tritium.core.worker.protocol import FrameDecoder, Kind, encode
from tritium.core.worker.reply_poll import ReplyPoll


# -- when and how long -------------------------------------------------------------------------
def test_budget_only_for_the_only_batch_in_flight() -> None:
    poll = ReplyPoll(300)
    assert poll.budget_ns(100_000) == 0  # nothing in flight
    poll.in_flight = 2
    assert poll.budget_ns(100_000) == 0  # another request would wait behind the poll
    poll.in_flight = 1
    assert poll.budget_ns(100_000) == 250_000  # twice the usual reply time and a 50 µs margin
    assert poll.budget_ns(140_000) == 300_000  # never more than the window
    assert poll.budget_ns(300_001) == 0  # a model slower than the window: sleep as usual
    assert poll.budget_ns(0) == 50_000


def test_window_zero_never_polls_and_negative_is_refused() -> None:
    poll = ReplyPoll(0)
    poll.in_flight = 1
    assert poll.budget_ns(0) == 0
    with pytest.raises(ValueError, match="0 or more microseconds, not -1"):
        ReplyPoll(-1)


def test_default_window_needs_two_cpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(options_module, "CGROUP_CPU_MAX", str(tmp_path / "absent"))
    monkeypatch.setattr(options_module, "CGROUP_V1_CPU", str(tmp_path / "absent"))
    monkeypatch.setattr(options_module.os, "sched_getaffinity", lambda pid: {0})
    assert options_module.default_reply_poll_us() == 0
    monkeypatch.setattr(options_module.os, "sched_getaffinity", lambda pid: {0, 1})
    assert options_module.default_reply_poll_us() == 300


@pytest.mark.parametrize(
    ("cpu_max", "window"),
    [("max 100000\n", 300), ("100000 100000\n", 0), ("150000 100000\n", 0), ("200000 100000\n", 300), ("junk", 300)],
)
def test_default_window_follows_the_cgroup_v2_cpu_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cpu_max: str, window: int
) -> None:
    (tmp_path / "cpu.max").write_text(cpu_max)
    monkeypatch.setattr(options_module, "CGROUP_CPU_MAX", str(tmp_path / "cpu.max"))
    monkeypatch.setattr(options_module, "CGROUP_V1_CPU", str(tmp_path / "absent"))
    monkeypatch.setattr(options_module.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert options_module.default_reply_poll_us() == window


@pytest.mark.parametrize(("quota", "window"), [("-1", 300), ("100000", 0), ("250000", 300)])
def test_default_window_follows_the_cgroup_v1_cpu_quota(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, quota: str, window: int
) -> None:
    (tmp_path / "cpu.cfs_quota_us").write_text(quota + "\n")
    (tmp_path / "cpu.cfs_period_us").write_text("100000\n")
    monkeypatch.setattr(options_module, "CGROUP_CPU_MAX", str(tmp_path / "absent"))
    monkeypatch.setattr(options_module, "CGROUP_V1_CPU", str(tmp_path))
    monkeypatch.setattr(options_module.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert options_module.default_reply_poll_us() == window


# -- the flag ----------------------------------------------------------------------------------
def test_flag_sets_the_window(tmp_path: Any) -> None:
    def window(*flags: str) -> int:
        options, _args = parse_args(["--model-repository", str(tmp_path), *flags])
        return int(options.reply_poll_us)

    assert window("--reply-poll-us", "0") == 0
    assert window("--reply-poll-us", "120") == 120
    assert window() == options_module.default_reply_poll_us()


@pytest.mark.parametrize("value", ["-5", "abc", "1.5"])
def test_flag_refuses_bad_values(tmp_path: Any, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--model-repository", str(tmp_path), "--reply-poll-us", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--reply-poll-us" in err
    assert f"invalid reply poll window '{value}' (expected a whole number >= 0)" in err


# -- the channel -------------------------------------------------------------------------------
class _Peer:
    """The worker's end: answers each frame with ``[Kind.PONG, n]`` after ``delay`` seconds."""

    def __init__(self, sock: socket.socket, delay: float) -> None:
        self.sock, self.delay = sock, delay
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        decoder = FrameDecoder()
        while True:
            data = self.sock.recv(65536)
            if not data:
                return
            for message, _fds in decoder.feed(data):
                threading.Event().wait(self.delay)
                if message[1] == "close":
                    self.sock.close()
                    return
                self.sock.sendall(encode([Kind.PONG, message[1]]))


async def _channel(budget_ns: int, delay: float) -> tuple[AsyncChannel, list[Any], list[Any], _Peer]:
    core_end, worker_end = socket.socketpair()
    received: list[Any] = []
    closed: list[Any] = []
    channel = AsyncChannel(core_end, lambda m, fds: received.append(m), closed.append, lambda: budget_ns)
    return channel, received, closed, _Peer(worker_end, delay)


def _stop(channel: AsyncChannel, peer: _Peer) -> None:
    channel.close()
    peer.thread.join(10)
    peer.sock.close()


def test_reply_within_the_window_is_handled_before_send_returns() -> None:
    async def scenario() -> None:
        channel, received, closed, peer = await _channel(budget_ns=5_000_000_000, delay=0.01)
        try:
            channel.send([Kind.PING, 1], poll=True)
            assert received == [[Kind.PONG, 1]]  # handled in the poll, not by the event loop
            channel.send([Kind.PING, 2])  # poll=False: the reply comes through the loop
            assert received == [[Kind.PONG, 1]]
            for _ in range(500):
                if len(received) == 2:
                    break
                await asyncio.sleep(0.01)
            assert received == [[Kind.PONG, 1], [Kind.PONG, 2]]
            assert not closed
        finally:
            _stop(channel, peer)

    asyncio.run(scenario())


def test_reply_after_the_window_comes_through_the_loop() -> None:
    async def scenario() -> None:
        channel, received, closed, peer = await _channel(budget_ns=1_000_000, delay=0.3)
        try:
            channel.send([Kind.PING, 7], poll=True)
            assert received == []  # the window (1 ms) passed first
            for _ in range(500):
                if received:
                    break
                await asyncio.sleep(0.01)
            assert received == [[Kind.PONG, 7]]
            assert not closed and not channel.closed
        finally:
            _stop(channel, peer)

    asyncio.run(scenario())


def test_no_budget_no_poll() -> None:
    async def scenario() -> None:
        channel, received, _closed, peer = await _channel(budget_ns=0, delay=0.0)
        try:
            channel.send([Kind.PING, 3], poll=True)
            assert received == []
            for _ in range(500):
                if received:
                    break
                await asyncio.sleep(0.01)
            assert received == [[Kind.PONG, 3]]
        finally:
            _stop(channel, peer)

    asyncio.run(scenario())


def test_worker_closing_during_the_poll_fails_the_channel() -> None:
    async def scenario() -> None:
        channel, received, closed, peer = await _channel(budget_ns=5_000_000_000, delay=0.01)
        channel.send([Kind.PING, "close"], poll=True)
        assert received == []
        assert closed == [None] and channel.closed  # peer closed: the close callback ran once
        _stop(channel, peer)

    asyncio.run(scenario())
