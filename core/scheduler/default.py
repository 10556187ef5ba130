"""The default scheduler: each request goes, alone, to the next free model instance.

Used when a model config names no ``dynamic_batching``/``sequence_batching``.
Requests wait in arrival order while every instance is busy. Each instance
executes one request at a time, as in Triton, but requests are handed to it
ahead of its completions, so the next one is already in the worker's socket
when the current one finishes: the worker never waits for a round trip to
the core between requests. How far ahead depends on how long the model's
executions take (see :func:`pipeline_depth`): a fast model gets several, so
that the frames of several requests travel in one write each way (fewer
system calls and wake-ups per request); a slow one gets one more than it
runs, so no request waits behind a long execution on one instance while
another instance is idle. A request goes ahead to a busy instance only when
no instance is idle, and to the least loaded one.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

from ..errors import TritonError
from .base import Batch, Executor, Payload, admit, cancelled_error, no_instance_error

__all__ = ["DefaultScheduler", "PIPELINE_DEPTH", "FAST_PIPELINE_DEPTH", "FAST_EXECUTE_NS", "pipeline_depth"]

#: requests handed to one instance ahead of its completions, counting the one it runs
PIPELINE_DEPTH = 2
#: the same for a model whose executions are fast (see :data:`FAST_EXECUTE_NS`)
FAST_PIPELINE_DEPTH = 8
#: executions shorter than this on average (ns) make a model fast
FAST_EXECUTE_NS = 200_000


def pipeline_depth(average_execute_ns: float) -> int:
    """How many requests an instance may hold, by the average duration of its model's executions."""
    if 0 < average_execute_ns < FAST_EXECUTE_NS:
        return FAST_PIPELINE_DEPTH
    return PIPELINE_DEPTH


class DefaultScheduler:
    """First-come first-served over the free instances (runs on the event loop).

    :param model_label: how errors name the model (``"'m' version 1"``).
    :param on_executed: statistics callback, ``(batch_size, [input, infer, output] ns)``.
    :param available: tells whether an instance may take work now.
    """

    def __init__(
        self,
        model_label: str,
        on_executed: Callable[[int, Sequence[int]], None],
        available: Callable[[Executor], bool],
    ) -> None:
        self._label = model_label
        self._on_executed_stats = on_executed
        self._available = available
        self._queue: deque[Payload] = deque()
        self._executors: list[Executor] = []
        self._handed: dict[Executor, deque[Payload]] = {}  # per instance, in execution order
        self._running = 0
        self._stopped: TritonError | None = None
        self._average_ns = 0.0  # moving average of execution durations
        self._depth = PIPELINE_DEPTH

    def enqueue(self, payload: Payload) -> None:
        """Run ``payload`` on a free instance now, or queue it."""
        if not admit(payload, self._stopped, bool(self._executors), self._label):
            return
        executor = self._pick() if not self._queue else None
        if executor is not None:
            self._dispatch(executor, payload)
        else:
            self._queue.append(payload)

    def inflight_count(self) -> int:
        """Requests queued plus executing."""
        return len(self._queue) + self._running

    def add_executor(self, executor: Executor) -> None:
        """An instance became ready."""
        if executor not in self._handed:
            self._executors.append(executor)
            self._handed[executor] = deque()
            self._drain()

    def remove_executor(self, executor: Executor) -> None:
        """An instance is gone; when none is left, queued requests fail."""
        if executor in self._handed:
            self._executors.remove(executor)
            del self._handed[executor]
        if not self._executors:
            error = no_instance_error(self._label)
            while self._queue:
                self._queue.popleft().fail(error)

    def stop(self, error: TritonError) -> None:
        """Fail queued requests with ``error`` and refuse new ones."""
        self._stopped = error
        while self._queue:
            self._queue.popleft().fail(error)

    def cancel(self, payload: Payload) -> bool:
        """Drop a cancelled ``payload`` from the queue and fail it CANCELLED; False when it is not queued."""
        try:
            self._queue.remove(payload)
        except ValueError:
            return False
        payload.fail(cancelled_error())
        return True

    # -- internals ----------------------------------------------------------
    def _pick(self) -> Executor | None:
        """An idle instance, else the least loaded one below the pipeline depth, else None."""
        best: Executor | None = None
        least = self._depth
        for executor in self._executors:
            count = len(self._handed[executor])
            if count < least and self._available(executor):
                if not count:
                    return executor
                best, least = executor, count
        return best

    def _dispatch(self, executor: Executor, payload: Payload) -> None:
        # dispatch_ns is when the request starts executing: now if the instance is idle,
        # else when the request handed to it before finishes (see _on_free)
        payload.dispatch_ns = time.perf_counter_ns()
        self._running += 1
        self._handed[executor].append(payload)
        executor.execute(Batch([payload], executor, self._on_free, self._on_executed))

    def _on_executed(self, size: int, timings: Sequence[int]) -> None:
        self._average_ns += (sum(timings) - self._average_ns) * 0.1
        self._depth = pipeline_depth(self._average_ns)
        self._on_executed_stats(size, timings)

    def _on_free(self, executor: Executor) -> None:
        self._running -= 1
        handed = self._handed.get(executor)
        if handed:
            handed.popleft()
            if handed:
                now = time.perf_counter_ns()
                payload = handed[0]
                payload.dispatch_ns = max(payload.dispatch_ns, now)
        self._drain()

    def _drain(self) -> None:
        """Hand queued requests to the instances that can take them."""
        queue = self._queue
        while queue:
            executor = self._pick()
            if executor is None:
                return
            self._dispatch(executor, queue.popleft())
