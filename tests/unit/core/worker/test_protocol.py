"""Worker protocol frames: round trip, partial delivery, fd matching, malformed input."""

from __future__ import annotations

import struct

import msgpack
import pytest

from tritium.core.errors import TritonError
from tritium.core.worker.protocol import HEADER, FrameDecoder, Kind, encode


def test_frames_survive_arbitrary_splits():
    messages = [
        [Kind.PING, 1],
        [Kind.EXECUTE, 7, [{"id": "a", "inputs": [["IN", "FP32", [2], 1, 0, 8]]}]],
        [Kind.PONG, 2],
    ]
    stream = b"".join(encode(m) for m in messages)
    for chunk in (1, 3, 7, len(stream)):
        decoder = FrameDecoder()
        got = []
        for i in range(0, len(stream), chunk):
            got.extend(m for m, _fds in decoder.feed(stream[i : i + chunk]))
        assert got == messages


def test_fds_are_matched_to_the_frames_that_announce_them():
    decoder = FrameDecoder()
    data = encode([Kind.SEGMENT, 1, 64], nfds=1) + encode([Kind.PING, 3]) + encode([Kind.SEGMENT, 2, 64], nfds=1)
    got = list(decoder.feed(data, [10, 11]))
    assert [fds for _m, fds in got] == [[10], [], [11]]


def test_a_frame_announcing_fds_that_did_not_arrive_is_an_error():
    with pytest.raises(TritonError, match="file descriptors"):
        list(FrameDecoder().feed(encode([Kind.SEGMENT, 1, 64], nfds=1)))


def test_oversized_and_garbage_frames_are_errors():
    with pytest.raises(TritonError, match="malformed frame header"):
        list(FrameDecoder().feed(HEADER.pack(1 << 30, 0)))
    garbage = b"\xc1\xc1\xc1"
    with pytest.raises(TritonError, match="malformed frame payload"):
        list(FrameDecoder().feed(HEADER.pack(len(garbage), 0) + garbage))
    not_a_list = msgpack.packb({"a": 1})
    with pytest.raises(TritonError, match="not a message list"):
        list(FrameDecoder().feed(struct.pack("<IB", len(not_a_list), 0) + not_a_list))
