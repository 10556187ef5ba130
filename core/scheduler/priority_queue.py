"""Triton's priority queue for the dynamic batcher: priority levels, each with a queue policy.

``dynamic_batching { priority_levels: N default_priority_level: D
default_queue_policy {...} priority_queue_policy { key: L value {...} } }``:

* a request's ``priority`` parameter picks its level, 1 being the highest;
  0, or a value above ``priority_levels``, means ``default_priority_level``
  (as Triton's ``InferenceRequest::SetPriority``);
* each level has a :class:`QueuePolicy`: ``max_queue_size`` (a full level
  rejects with ``Exceeds maximum queue size``, UNAVAILABLE),
  ``default_timeout_microseconds`` (a request still queued past its timeout
  is rejected with ``Request timeout expired``, UNAVAILABLE, or with
  ``timeout_action: DELAY`` moved behind the requests of its level that have
  not timed out), and ``allow_timeout_override`` (the request's ``timeout``
  parameter, in microseconds, replaces a non-zero default when it is
  shorter; with no default timeout it is ignored — both as Triton 2.51 does).

Requests are served highest level first; within a level oldest first, then
the delayed (timed-out DELAY) ones.
Runs on the core's event loop; times are ``perf_counter_ns``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import Code
from .base import Payload, QueueFull

__all__ = ["PriorityQueue", "QueuePolicy", "policy_from_config"]

REJECT, DELAY = "REJECT", "DELAY"


@dataclass(slots=True, frozen=True)
class QueuePolicy:
    """Triton's ``ModelQueuePolicy`` for one priority level.

    :ivar timeout_action: ``"REJECT"`` or ``"DELAY"``.
    :ivar default_timeout_us: queue timeout in microseconds (0: none).
    :ivar allow_timeout_override: the request's ``timeout`` parameter may shorten it.
    :ivar max_queue_size: most requests waiting at this level (0: unbounded).
    """

    timeout_action: str = REJECT
    default_timeout_us: int = 0
    allow_timeout_override: bool = False
    max_queue_size: int = 0


def policy_from_config(policy: dict[str, Any] | None) -> QueuePolicy:
    """A :class:`QueuePolicy` from the JSON form of a ``ModelQueuePolicy`` (None: the defaults)."""
    policy = policy or {}
    return QueuePolicy(
        str(policy.get("timeout_action", REJECT)),
        int(policy.get("default_timeout_microseconds", 0)),
        bool(policy.get("allow_timeout_override", False)),
        int(policy.get("max_queue_size", 0)),
    )


class _Entry:
    __slots__ = ("deadline_ns", "payload")

    def __init__(self, payload: Payload, deadline_ns: int) -> None:
        self.payload = payload
        self.deadline_ns = deadline_ns  # 0: none


class PriorityQueue:
    """Queued payloads by priority level (see the module docstring).

    :param levels: ``priority_levels`` (0: a single level).
    :param default_level: ``default_priority_level``.
    :param default_policy: the policy of levels without their own.
    :param level_policies: ``priority_queue_policy``, by level.
    """

    def __init__(
        self,
        levels: int = 0,
        default_level: int = 0,
        default_policy: QueuePolicy | None = None,
        level_policies: dict[int, QueuePolicy] | None = None,
    ) -> None:
        self.levels = max(1, levels)
        self.default_level = default_level if 1 <= default_level <= self.levels else 1
        default_policy = default_policy or QueuePolicy()
        level_policies = level_policies or {}
        self._policies = [level_policies.get(lv, default_policy) for lv in range(1, self.levels + 1)]
        self._queues: list[deque[_Entry]] = [deque() for _ in range(self.levels)]
        self._delayed: list[deque[_Entry]] = [deque() for _ in range(self.levels)]
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def level_of(self, priority: int) -> int:
        """The level (1-based) a request's ``priority`` parameter maps to."""
        if priority <= 0 or priority > self.levels:
            return self.default_level
        return priority

    def push(self, payload: Payload, priority: int, timeout_us: int) -> None:
        """Queue ``payload``.

        :param priority: the request's ``priority`` parameter (0: default level).
        :param timeout_us: the request's ``timeout`` parameter (0: none).
        :raises QueueFull: UNAVAILABLE ``Exceeds maximum queue size`` when its level is full.
        """
        index = self.level_of(priority) - 1
        policy = self._policies[index]
        queue = self._queues[index]
        if policy.max_queue_size and len(queue) >= policy.max_queue_size:
            raise QueueFull(Code.UNAVAILABLE, "Exceeds maximum queue size")
        timeout = policy.default_timeout_us
        if policy.allow_timeout_override and 0 < timeout_us < timeout:
            timeout = timeout_us
        deadline = payload.arrival_ns + timeout * 1000 if timeout else 0
        queue.append(_Entry(payload, deadline))
        self._size += 1

    def expire(self, now_ns: int | None = None) -> list[Payload]:
        """Apply the timeouts: return the payloads to reject; move DELAY ones behind the rest."""
        now = time.perf_counter_ns() if now_ns is None else now_ns
        rejected: list[Payload] = []
        for index, queue in enumerate(self._queues):
            if not any(e.deadline_ns and e.deadline_ns <= now for e in queue):
                continue
            keep: deque[_Entry] = deque()
            delay = self._policies[index].timeout_action == DELAY
            for entry in queue:
                if entry.deadline_ns and entry.deadline_ns <= now:
                    if delay:
                        entry.deadline_ns = 0
                        self._delayed[index].append(entry)
                    else:
                        rejected.append(entry.payload)
                        self._size -= 1
                else:
                    keep.append(entry)
            self._queues[index] = keep
        return rejected

    def next_deadline(self) -> int:
        """The earliest queue timeout (ns), 0 when none."""
        deadlines = [e.deadline_ns for q in self._queues for e in q if e.deadline_ns]
        return min(deadlines) if deadlines else 0

    def __iter__(self) -> Iterator[Payload]:
        """Payloads in serving order (highest level first; in a level oldest first, delayed last)."""
        for queue in self._ordered():
            for entry in queue:
                yield entry.payload

    def _ordered(self) -> Iterator[deque[_Entry]]:
        for queue, delayed in zip(self._queues, self._delayed, strict=True):
            yield queue
            yield delayed

    def oldest_arrival_ns(self) -> int:
        """Arrival time of the oldest queued payload (0 when empty)."""
        arrivals = [q[0].payload.arrival_ns for q in self._ordered() if q]
        return min(arrivals) if arrivals else 0

    def pop_first(self, count: int) -> list[Payload]:
        """Remove and return the first ``count`` payloads in serving order."""
        out: list[Payload] = []
        for queue in self._ordered():
            while queue and len(out) < count:
                out.append(queue.popleft().payload)
        self._size -= len(out)
        return out

    def remove(self, payload: Payload) -> bool:
        """Take ``payload`` out of the queue (its client cancelled it); False when it is not queued."""
        for queue in self._ordered():
            for i, entry in enumerate(queue):
                if entry.payload is payload:
                    del queue[i]
                    self._size -= 1
                    return True
        return False

    def drain(self) -> list[Payload]:
        """Remove and return everything."""
        return self.pop_first(self._size)
