"""The dynamic batcher's priority queue: levels, queue policies, timeouts (Triton's semantics)."""

from __future__ import annotations

import time

import pytest

from tritium.core.errors import TritonError
from tritium.core.scheduler.priority_queue import PriorityQueue, QueuePolicy, policy_from_config


class _P:
    def __init__(self, name: str) -> None:
        self.name = name
        self.arrival_ns = time.perf_counter_ns()


def test_levels_serve_highest_first_and_default_level() -> None:
    q = PriorityQueue(levels=3, default_level=2)
    items = {n: _P(n) for n in "abcd"}
    q.push(items["a"], 0, 0)  # default level 2
    q.push(items["b"], 3, 0)
    q.push(items["c"], 1, 0)
    q.push(items["d"], 9, 0)  # out of range: default level, as Triton
    assert [p.name for p in q] == ["c", "a", "d", "b"]
    assert [p.name for p in q.pop_first(2)] == ["c", "a"]
    assert len(q) == 2


def test_max_queue_size_per_level() -> None:
    q = PriorityQueue(levels=2, default_level=1, level_policies={1: QueuePolicy(max_queue_size=1)})
    q.push(_P("a"), 1, 0)
    with pytest.raises(TritonError) as info:
        q.push(_P("b"), 1, 0)
    assert info.value.message == "Exceeds maximum queue size"
    q.push(_P("c"), 2, 0)  # the other level is unbounded


def test_timeouts_reject_or_delay_within_the_level() -> None:
    q = PriorityQueue(default_policy=QueuePolicy("DELAY", 10_000_000, True))
    a, b = _P("a"), _P("b")
    q.push(a, 0, 1)  # its own 1 us timeout shortens the 10 s default
    q.push(b, 0, 0)
    time.sleep(0.01)
    assert q.expire() == []
    assert [p.name for p in q] == ["b", "a"]
    r = PriorityQueue(default_policy=QueuePolicy("REJECT", 1, False))
    c = _P("c")
    r.push(c, 0, 0)
    time.sleep(0.01)
    assert r.expire() == [c] and len(r) == 0


def test_request_timeout_needs_a_default_timeout() -> None:
    q = PriorityQueue(default_policy=QueuePolicy("REJECT", 0, True))
    q.push(_P("a"), 0, 1)
    time.sleep(0.01)
    assert q.expire() == [] and q.next_deadline() == 0


def test_policy_from_config_json() -> None:
    policy = policy_from_config(
        {
            "timeout_action": "DELAY",
            "default_timeout_microseconds": "100",
            "allow_timeout_override": True,
            "max_queue_size": 3,
        }
    )
    assert policy == QueuePolicy("DELAY", 100, True, 3)
