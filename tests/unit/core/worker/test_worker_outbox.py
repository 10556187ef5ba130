"""The worker's held EXECUTE_DONE frames go out before it blocks on its socket again.

A fast model's EXECUTE_DONE is held while more frames of the same read wait (so
the answers to requests that arrived together go back in one write). When the
last of those frames was a control frame (a RELEASE, a PING), the held answer
stayed in the worker until the core sent something else: at the end of a load
run nothing else came, and the client waited for those requests for ever
(perf_analyzer hung after printing its results, 2 runs in 30).
"""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from tritium.core.worker import main as worker_main
from tritium.core.worker.channel import BlockingChannel
from tritium.core.worker.protocol import FrameDecoder, Kind, encode


def _read_frames(sock: socket.socket, want: int) -> list[list[Any]]:
    decoder, frames = FrameDecoder(), []
    while len(frames) < want:
        data = sock.recv(65536)
        if not data:
            break
        frames.extend(message for message, _fds in decoder.feed(data))
    return frames


@pytest.mark.parametrize(
    "control",
    [[Kind.RELEASE, []], [Kind.PING, 7]],
    ids=["release", "ping"],
)
def test_held_answer_is_sent_when_a_control_frame_ends_the_read(
    monkeypatch: pytest.MonkeyPatch, control: list[Any]
) -> None:
    monkeypatch.setattr(worker_main, "run_batch", lambda hosted, batch_id, requests: [Kind.EXECUTE_DONE, batch_id])
    core, worker_end = socket.socketpair()
    worker = worker_main.Worker(BlockingChannel(worker_end), worker_id=1)
    worker.instances[3] = SimpleNamespace(execute_ns=10_000)  # a fast model: its answers may be held
    thread = threading.Thread(target=worker.serve, daemon=True)
    thread.start()
    try:
        # one write, so the worker reads both frames at once: the EXECUTE's answer is held
        # while the control frame waits, and the control frame is the last of the read
        core.sendall(encode([Kind.EXECUTE, 5, 3, [], []]) + encode(control))
        core.settimeout(30)  # a liveness bound, not a speed check: without the fix nothing comes
        frames = _read_frames(core, 2 if control[0] == Kind.PING else 1)
        assert [Kind.EXECUTE_DONE, 5] in frames
    finally:
        core.close()
        thread.join(10)
        worker_end.close()
