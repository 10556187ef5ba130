"""Triton's dynamic batcher: requests queued by priority, grouped into batches for free instances.

``dynamic_batching { preferred_batch_size max_queue_delay_microseconds
preserve_ordering priority_levels default_priority_level
default_queue_policy priority_queue_policy }`` with Triton's semantics
(``DynamicBatchScheduler::GetDynamicBatch``): when an instance is free the
batcher walks the queue in serving order (see :mod:`.priority_queue`) and
takes requests while

* the batch stays within the largest preferred batch size (``max_batch_size``
  when none is given), and
* the request's input shapes equal the first request's (dims of -1 may
  differ only for inputs with ``allow_ragged_batch``);

then it sends the batch at once when it reached the largest preferred size,
sends the largest prefix that is a preferred size when there is one, and
otherwise waits until the oldest request has waited
``max_queue_delay_microseconds`` before sending what it has. A batch never
exceeds ``max_batch_size``. The batch goes to the worker as one EXECUTE frame,
its inputs gathered contiguously (``gather``). With ``preserve_ordering``
responses are delivered in arrival order across batches and instances.
A model with ``max_batch_size: 0`` gets the queue policies and priorities and
batches of one request, sent without waiting (as Triton's dynamic batch
scheduler serves a model that does not batch).

Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import Code, TritonError
from ..model.validation import request_prefix
from .base import Batch, Executor, Payload, QueueFull, Rejected, admit, cancelled_error, no_instance_error
from .priority_queue import PriorityQueue, policy_from_config

__all__ = ["DynamicBatcher", "shape_key"]


def shape_key(wire: dict[str, Any], ragged: frozenset[str]) -> tuple[Any, ...]:
    """What must match for two requests to share a batch: each input's shape past the batch dim."""
    return tuple(
        (item[0], tuple(item[2][1:])) for item in sorted(wire["inputs"], key=lambda i: i[0]) if item[0] not in ragged
    )


class DynamicBatcher:
    """The dynamic batcher of one model version (see the module docstring).

    :param model_label: how errors name the model.
    :param config: the normalized model config (JSON form).
    :param on_executed: statistics callback, ``(batch_size, [input, infer, output] ns)``.
    :param available: tells whether an instance may take work now.
    :param gather: lays the inputs of a batch of several payloads out contiguously.
    :param on_rejected: called for a payload failed in the queue (statistics).
    """

    def __init__(
        self,
        model_label: str,
        config: dict[str, Any],
        on_executed: Callable[[int, Sequence[int]], None],
        available: Callable[[Executor], bool],
        gather: Callable[[list[Payload]], None] | None = None,
    ) -> None:
        self._label = model_label
        self._on_executed = on_executed
        self._available = available
        self._gather = gather
        db = config.get("dynamic_batching") or {}
        self.max_batch_size = max(1, int(config.get("max_batch_size", 0)))
        preferred = sorted({int(p) for p in db.get("preferred_batch_size", []) if 0 < int(p) <= self.max_batch_size})
        self.preferred = set(preferred)
        self.max_preferred = preferred[-1] if preferred else self.max_batch_size
        self.delay_ns = int(db.get("max_queue_delay_microseconds", 0)) * 1000
        self.preserve_ordering = bool(db.get("preserve_ordering", False))
        self.ragged = frozenset(str(i["name"]) for i in config.get("input", []) if i.get("allow_ragged_batch"))
        self.queue = PriorityQueue(
            int(db.get("priority_levels", 0)),
            int(db.get("default_priority_level", 0)),
            policy_from_config(db.get("default_queue_policy")),
            {int(k): policy_from_config(v) for k, v in (db.get("priority_queue_policy") or {}).items()},
        )
        self._free: deque[Executor] = deque()
        self._executors: set[Executor] = set()
        self._running = 0
        self._batch_sizes: dict[Executor, int] = {}  # requests in the batch each instance executes
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0
        self._stopped: TritonError | None = None
        self._order = _OrderedDelivery() if self.preserve_ordering else None

    # -- Scheduler -----------------------------------------------------------
    def enqueue(self, payload: Payload) -> None:
        """Queue ``payload`` (fails it at once when its priority level is full)."""
        if not admit(payload, self._stopped, bool(self._executors), self._label):
            return
        params = payload.wire
        try:
            self.queue.push(payload, int(params.get("priority", 0)), int(params.get("timeout", 0)))
        except QueueFull as exc:  # Triton names the request in this one
            payload.fail(QueueFull(exc.code, request_prefix(str(params.get("id", ""))) + exc.message))
            return
        if self._order is not None:
            self._order.admit(payload)
        self._schedule()

    def inflight_count(self) -> int:
        """Requests queued plus executing."""
        return len(self.queue) + self._running

    def add_executor(self, executor: Executor) -> None:
        """An instance became ready."""
        if executor not in self._executors:
            self._executors.add(executor)
            self._free.append(executor)
            self._schedule()

    def remove_executor(self, executor: Executor) -> None:
        """An instance is gone; when none is left, queued requests fail."""
        self._executors.discard(executor)
        while executor in self._free:
            self._free.remove(executor)
        if not self._executors:
            self._fail_queued(no_instance_error(self._label))

    def stop(self, error: TritonError) -> None:
        """Fail queued requests with ``error`` and refuse new ones."""
        self._stopped = error
        self._fail_queued(error)

    def cancel(self, payload: Payload) -> bool:
        """Drop a cancelled ``payload`` from the queue and fail it CANCELLED; False when it is not queued."""
        if not self.queue.remove(payload):
            return False
        payload.fail(cancelled_error())
        if self._order is not None:
            self._order.flush()
        return True

    # -- internals ---------------------------------------------------------------
    def _fail_queued(self, error: TritonError) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for payload in self.queue.drain():
            payload.fail(error)

    def _reject_expired(self) -> None:
        for payload in self.queue.expire():
            payload.fail(Rejected(Code.UNAVAILABLE, "Request timeout expired"))

    def _schedule(self) -> None:
        """Form and send batches while an instance is free; else arm the timer for the next event."""
        self._reject_expired()
        while self._free and len(self.queue):
            count, wait_ns = self._next_batch()
            if count == 0:
                self._arm(wait_ns)
                break
            executor = self._free.popleft()
            if executor not in self._executors or not self._available(executor):
                continue
            self._dispatch(executor, self.queue.pop_first(count))
        deadline = self.queue.next_deadline()
        if deadline:
            self._arm(deadline - time.perf_counter_ns())

    def _next_batch(self) -> tuple[int, int]:
        """``(requests to send now, 0)`` or ``(0, ns to wait)`` (Triton's GetDynamicBatch)."""
        size = 0
        count = 0
        best = 0  # requests in the longest prefix whose batch size is a preferred size
        key: tuple[Any, ...] | None = None
        for payload in self.queue:
            k = shape_key(payload.wire, self.ragged)
            if key is None:
                key = k
            elif k != key:
                break
            if size + payload.batch_size > self.max_preferred and count:
                break
            size += payload.batch_size
            count += 1
            if size in self.preferred:
                best = count
            if size >= self.max_preferred:
                break
        if size >= self.max_preferred:
            return count, 0
        if best:
            return best, 0
        waited = time.perf_counter_ns() - self.queue.oldest_arrival_ns()
        if self.delay_ns == 0 or waited >= self.delay_ns:
            # as Triton: a batch cut short (a request of another shape, or one that does not fit)
            # still waits for the queue delay of its oldest request
            return count, 0
        return 0, self.delay_ns - waited

    def _arm(self, wait_ns: int) -> None:
        at = time.perf_counter_ns() + max(0, wait_ns)
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = asyncio.get_running_loop().call_later(max(0, wait_ns) / 1e9, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._schedule()

    def _dispatch(self, executor: Executor, payloads: list[Payload]) -> None:
        now = time.perf_counter_ns()
        for payload in payloads:
            payload.dispatch_ns = now
        if len(payloads) > 1 and self._gather is not None:
            try:
                self._gather(payloads)
            except TritonError as exc:
                for payload in payloads:
                    payload.fail(exc)
                self._free.appendleft(executor)
                return
        self._running += len(payloads)
        self._batch_sizes[executor] = len(payloads)
        if self._order is not None:
            for payload in payloads:
                self._order.wrap(payload)
        executor.execute(Batch(payloads, executor, self._on_free, self._on_executed))

    def _on_free(self, executor: Executor) -> None:
        self._running -= self._batch_sizes.pop(executor, 0)
        if executor in self._executors and self._available(executor) and executor not in self._free:
            self._free.append(executor)
        self._schedule()


class _OrderedDelivery:
    """``preserve_ordering``: hold back responses until every earlier request's final response came."""

    def __init__(self) -> None:
        self._order: deque[Payload] = deque()  # admitted, not yet fully delivered
        self._held: dict[int, list[tuple[Any, ...]]] = {}
        self._done: set[int] = set()

    def admit(self, payload: Payload) -> None:
        self._order.append(payload)

    def wrap(self, payload: Payload) -> None:
        handler = payload.handler
        if isinstance(handler, _Holder) and handler.order is self:
            return  # a rescheduled request, wrapped when it first ran
        payload.handler = _Holder(handler, self)

    def on_response(self, handler: Any, payload: Payload, args: tuple[Any, ...]) -> None:
        if id(payload) in self._done:
            return  # nothing follows a final response (a worker failing it again as it dies)
        self._held.setdefault(id(payload), []).append((handler, payload, args))
        if args[3]:
            self._done.add(id(payload))
        self._flush()

    def flush(self) -> None:
        """Deliver what is held and may go now (after an admitted request failed without its handler)."""
        self._flush()

    def _flush(self) -> None:
        while self._order:
            head = self._order[0]
            key = id(head)
            if key in self._held:
                for handler, p, args in self._held.pop(key):
                    handler.on_response(p, *args)
                if key not in self._done:
                    return
                self._done.discard(key)
                self._order.popleft()
            elif head.final:  # failed in the queue, delivered directly
                self._order.popleft()
            else:
                return


class _Holder:
    """A payload's handler while ``preserve_ordering`` holds its responses."""

    __slots__ = ("inner", "order")

    def __init__(self, inner: Any, order: _OrderedDelivery) -> None:
        self.inner = inner
        self.order = order

    def on_response(self, payload: Payload, *args: Any) -> None:
        self.order.on_response(self.inner, payload, args)

    def on_executed(self, payload: Payload) -> None:
        self.inner.on_executed(payload)

    def on_cancel(self, payload: Payload) -> None:
        self.inner.on_cancel(payload)
