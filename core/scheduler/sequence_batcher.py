"""Triton's sequence batcher: stateful models, every request of a sequence on one instance, in order.

``sequence_batching { direct {} | oldest {...} max_sequence_idle_microseconds
control_input [...] state [...] }``. A request names its sequence with the
``sequence_id`` parameter (integer or string) and flags its first and last
requests with ``sequence_start`` / ``sequence_end``.

* Routing: a sequence is bound to one model instance when its START request
  arrives (the instance with the fewest sequences that has room: ``direct``
  gives each instance ``max_batch_size`` slots, ``oldest``
  ``max_candidate_sequences``); when every instance is full it waits in a
  backlog. All its requests run on that instance, one at a time, in arrival
  order. A batch holds at most one request per sequence and at most
  ``max_batch_size`` requests. ``direct``: request i of a batch belongs to
  the sequence in slot i; an idle slot below a busy one gets a *null request*
  (READY false, CORRID 0, inputs of zeros, whose response is dropped), as in
  Triton, so a model may keep per-slot state. With ``direct {
  max_queue_delay_microseconds minimum_slot_utilization }`` a batch in which
  fewer than that share of the instance's slots are ready waits up to the delay
  (counted from its oldest request) for more. ``oldest``: oldest first,
  a preferred batch size at once, else waiting up to ``max_queue_delay_microseconds``
  for the largest;
  with ``preserve_ordering`` each instance delivers responses in the order its
  requests became ready to run there (a sequence's next request once its
  previous one finished), as Triton's per-instance dynamic batcher orders them.
* ``iterative_sequence: true`` (Triton's generative sequencer): a request without
  a sequence id gets one (a counter from 1) and START; one the backend releases
  with ``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE`` runs again (inputs still in the
  arena) first in its sequence, same instance, flags 0; one released without it
  ends its sequence. It runs until its final response or its rescheduling.
* Control inputs: ``CONTROL_SEQUENCE_START`` / ``_END`` / ``_READY`` (with
  their ``int32_false_true`` / ``fp32_false_true`` / ``bool_false_true``
  values) and ``CONTROL_SEQUENCE_CORRID`` (its ``data_type``) are added to
  each request as the inputs the config names, shape ``[1, 1]`` for a model
  that batches, ``[1]`` otherwise.
* Implicit state: for each ``state`` entry the request gets input
  ``input_name`` holding the sequence's state (``initial_state`` — zeros or
  ``data_file`` under the model's ``initial_state/`` folder — on its START
  request) and the output ``output_name`` it produces becomes the state for
  the next request. Outputs that the config does not list stay hidden from
  the client. This works for every backend, the python backend included.
* Ends: a sequence is released after its END request ran, or when no request
  of it arrived for ``max_sequence_idle_microseconds``. A later request
  without START is then refused with Triton's error. A sequence whose instance
  went away (its worker died) ends too, its queued requests failing; its next
  request without START gets Triton's error followed by why (``...: sequence 7
  was ended because the model instance serving it failed; its state is lost,
  start it again``).

Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..errors import Code, TritonError
from .base import Batch, Executor, Payload, admit
from .dynamic_batcher import _OrderedDelivery as OrderedDelivery
from .sequence_controls import control_bytes, parse_controls, parse_state

__all__ = ["SequenceBatcher", "SequenceHost"]

_START, _END = 1, 2
#: how many sequences ended by a lost instance are remembered (to say so to their next request)
_LOST_KEPT = 65_536


class SequenceHost(Protocol):
    """What the sequence batcher needs from the model (:class:`tritium.core.model.batching.BatcherServices`)."""

    path: str

    def add_input(self, payload: Payload, name: str, datatype: str, shape: list[int], data: bytes) -> None: ...

    def set_state_sink(self, payload: Payload, sink: Callable[[str, str, list[int], bytes], None]) -> None: ...

    def null_payload(self, template: Payload) -> Payload: ...

    def drop_inputs(self, payload: Payload, count: int) -> None: ...


class _Sequence:
    __slots__ = ("bound_at", "corr", "ended", "executor", "inflight", "last_ns", "queue", "running", "state")

    def __init__(self, corr: int | str) -> None:
        self.corr = corr
        self.executor: Executor | None = None
        self.queue: deque[Payload] = deque()
        self.last_ns = time.perf_counter_ns()
        self.ended = False  # its END request arrived
        self.inflight = False  # one of its requests is executing
        #: iterative sequences: its request that runs until released (final response or rescheduled)
        self.running: Payload | None = None
        self.state: dict[str, tuple[str, list[int], bytes]] = {}  # state input name -> (datatype, shape, bytes)
        self.bound_at = 0


class SequenceBatcher:
    """The sequence batcher of one model version (see the module docstring).

    :param model_name: the model name (Triton's sequence errors name it).
    :param model_label: how other errors name the model (``'m' version 1``).
    :param config: the normalized model config (JSON form).
    :param on_executed: statistics callback, ``(batch_size, [input, infer, output] ns)``.
    :param available: tells whether an instance may take work now.
    :param host: the model (adds inputs to payloads, reports state outputs).
    :raises TritonError: INVALID_ARG for a control input or state the batcher cannot serve.
    """

    def __init__(
        self,
        model_name: str,
        model_label: str,
        config: dict[str, Any],
        on_executed: Callable[[int, Sequence[int]], None],
        available: Callable[[Executor], bool],
        host: SequenceHost,
    ) -> None:
        self._name = model_name
        self._label = model_label
        self._on_executed = on_executed
        self._available = available
        self._host = host
        seq = config.get("sequence_batching") or {}
        mbs = int(config.get("max_batch_size", 0))
        self._batching = mbs > 0
        self.max_batch = max(1, mbs)
        self.strategy = "oldest" if "oldest" in seq else "direct"
        oldest = seq.get("oldest") or {}
        self.capacity = int(oldest.get("max_candidate_sequences", 0)) or self.max_batch
        if self.strategy == "direct":
            self.capacity = self.max_batch
        preferred = [int(p) for p in oldest.get("preferred_batch_size", []) if 0 < int(p) <= self.max_batch]
        self.max_preferred = max(preferred) if preferred else self.max_batch
        #: oldest: batch sizes that go without waiting for the queue delay (each sequence adds one request)
        self.preferred = frozenset(preferred)
        direct = seq.get("direct") or {}
        strategy = oldest if self.strategy == "oldest" else direct
        self.delay_ns = int(strategy.get("max_queue_delay_microseconds", 0)) * 1000
        #: direct: the share of an instance's slots that must be ready before a batch goes
        #: without waiting (up to ``delay_ns``) for more
        self.min_slot_utilization = float(direct.get("minimum_slot_utilization", 0.0) or 0.0)
        #: oldest ``preserve_ordering``: per instance, responses in the order its requests came
        self.preserve_ordering = self.strategy == "oldest" and bool(oldest.get("preserve_ordering", False))
        self._orders: dict[Executor, OrderedDelivery] = {}
        self._admitted: set[int] = set()  # ids of the payloads in an instance's order, not yet dispatched
        #: ``iterative_sequence``: requests may be rescheduled; ids are given to requests without one
        self.iterative = bool(seq.get("iterative_sequence", False))
        self._next_corr = 1
        self._running: dict[int, _Sequence] = {}  # id of a running request (iterative) -> its sequence
        self.idle_ns = int(seq.get("max_sequence_idle_microseconds", 1_000_000)) * 1000
        self._controls = parse_controls(self._name, seq.get("control_input", []))
        self._states = [parse_state(self._name, st, self._batching, self._host.path) for st in seq.get("state", [])]
        self._sequences: dict[int | str, _Sequence] = {}
        #: sequences ended because their instance went away (oldest first, at most _LOST_KEPT): a later
        #: request of one is told why it must START again
        self._lost: OrderedDict[int | str, None] = OrderedDict()
        self._backlog: deque[_Sequence] = deque()
        self._bound: dict[Executor, list[_Sequence | None]] = {}  # per instance: its slots
        self._busy: dict[Executor, list[_Sequence]] = {}
        self._stopped: TritonError | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._reaper: asyncio.TimerHandle | None = None
        self._bind_counter = 0

    # -- Scheduler -----------------------------------------------------------------
    def enqueue(self, payload: Payload) -> None:
        """Route ``payload`` to its sequence (fails it with Triton's error when it has none)."""
        if not admit(payload, self._stopped, bool(self._bound), self._label):
            return
        corr = payload.wire.get("corr", 0)
        flags = int(payload.wire.get("flags", 0))
        if self.iterative and (corr == 0 or corr == "" or isinstance(corr, bool)):
            # Triton's GenerativeSequencer: a sequence of its own, starting with this request
            corr, flags = self._next_corr, _START
            self._next_corr += 1
            payload.wire["corr"], payload.wire["flags"] = corr, flags
        if corr == 0 or corr == "" or isinstance(corr, bool):
            payload.fail(
                TritonError(
                    Code.INVALID_ARG,
                    f"inference request to model '{self._name}' must specify a non-zero or non-empty correlation ID",
                )
            )
            return
        seq = self._sequences.get(corr)
        if not flags & _START and (seq is None or seq.ended):
            message = (
                f"inference request for sequence {corr} to model '{self._name}' must specify the START flag "
                "on the first request of the sequence"
            )
            if seq is None and corr in self._lost:
                message += (
                    f": sequence {corr} was ended because the model instance serving it failed; "
                    "its state is lost, start it again"
                )
            payload.fail(TritonError(Code.INVALID_ARG, message))
            return
        if flags & _START:
            self._lost.pop(corr, None)
        if seq is None:
            seq = _Sequence(corr)
            self._sequences[corr] = seq
            self._bind(seq)
        seq.ended = bool(flags & _END)
        seq.last_ns = time.perf_counter_ns()
        seq.queue.append(payload)
        self._eligible(seq)
        self._arm_reaper()
        if seq.executor is not None:
            self._schedule(seq.executor)

    def inflight_count(self) -> int:
        """Requests queued plus executing."""
        return sum(len(s.queue) + (1 if s.inflight else 0) for s in self._sequences.values())

    def add_executor(self, executor: Executor) -> None:
        """An instance became ready: it takes backlogged sequences."""
        if executor not in self._bound:
            self._bound[executor] = [None] * self.capacity
            if self.preserve_ordering:
                self._orders[executor] = OrderedDelivery()
            while self._backlog and None in self._bound[executor]:
                self._attach(self._backlog.popleft(), executor)
            self._schedule(executor)

    def remove_executor(self, executor: Executor) -> None:
        """An instance is gone: its sequences (queued requests included) fail and end."""
        sequences = self._bound.pop(executor, [])
        self._busy.pop(executor, None)
        order = self._orders.pop(executor, None)
        error = TritonError(Code.UNAVAILABLE, f"model '{self._name}' instance serving the sequence is gone")
        for seq in sequences:
            if seq is None:
                continue
            self._sequences.pop(seq.corr, None)
            if not seq.ended:
                self._remember_lost(seq.corr)
            if seq.running is not None:
                self._running.pop(id(seq.running), None)
                seq.running = None
            while seq.queue:
                payload = seq.queue.popleft()
                self._admitted.discard(id(payload))
                payload.fail(error)
        if order is not None:
            order.flush()
        if not self._bound:
            for seq in list(self._backlog):
                self._sequences.pop(seq.corr, None)
                while seq.queue:
                    seq.queue.popleft().fail(error)
            self._backlog.clear()

    def _remember_lost(self, corr: int | str) -> None:
        self._lost[corr] = None
        self._lost.move_to_end(corr)
        while len(self._lost) > _LOST_KEPT:
            self._lost.popitem(last=False)

    def stop(self, error: TritonError) -> None:
        """Fail every queued request with ``error`` and refuse new ones."""
        self._stopped = error
        for handle in (self._timer, self._reaper):
            if handle is not None:
                handle.cancel()
        self._admitted.clear()
        for seq in self._sequences.values():
            while seq.queue:
                seq.queue.popleft().fail(error)
        for order in self._orders.values():
            order.flush()

    def _eligible(self, seq: _Sequence) -> None:
        """``preserve_ordering``: the sequence's next request joins its instance's order once it
        may run (bound, nothing of the sequence in flight), as Triton hands it to the instance's
        dynamic batcher then."""
        if not self.preserve_ordering or seq.executor is None or seq.inflight or not seq.queue:
            return
        head = seq.queue[0]
        order = self._orders.get(seq.executor)
        if order is not None and id(head) not in self._admitted:
            self._admitted.add(id(head))
            order.admit(head)

    # -- binding ---------------------------------------------------------------------
    def _bind(self, seq: _Sequence) -> None:
        choices = [e for e, slots in self._bound.items() if None in slots and self._available(e)]
        if not choices:
            self._backlog.append(seq)
            return
        self._attach(seq, max(choices, key=lambda e: self._bound[e].count(None)))

    def _attach(self, seq: _Sequence, executor: Executor) -> None:
        slots = self._bound[executor]
        seq.executor = executor
        self._bind_counter += 1
        seq.bound_at = self._bind_counter
        slots[slots.index(None)] = seq
        self._eligible(seq)

    def _release(self, seq: _Sequence) -> None:
        """The sequence ended (END ran, or idle): free its slot for a backlogged one."""
        if self._sequences.get(seq.corr) is seq:
            del self._sequences[seq.corr]
        if seq in self._backlog:
            self._backlog.remove(seq)
        executor = seq.executor
        if executor is None or executor not in self._bound:
            return
        slots = self._bound[executor]
        slots[slots.index(seq)] = None
        while self._backlog and None in slots:
            self._attach(self._backlog.popleft(), executor)
        self._schedule(executor)

    # -- batches ------------------------------------------------------------------------
    def _schedule(self, executor: Executor) -> None:
        if executor in self._busy or executor not in self._bound or not self._available(executor):
            return
        slots = self._bound[executor]
        ready = [s for s in slots if s is not None and s.queue and not s.inflight]
        if not ready:
            return
        if self.strategy == "oldest":
            ready.sort(key=lambda s: s.queue[0].arrival_ns)
            if self.delay_ns and len(ready) < self.max_preferred:
                # the oldest requests that make up the largest preferred size go at once (Triton's
                # preferred_batch_size); with none, wait up to the delay of the oldest request
                best = max((p for p in self.preferred if p <= len(ready)), default=0)
                waited = time.perf_counter_ns() - ready[0].queue[0].arrival_ns
                if best:
                    ready = ready[:best]
                elif waited < self.delay_ns:
                    self._arm_timer((self.delay_ns - waited) / 1e9)
                    return
        elif self.delay_ns and len(ready) < self.min_slot_utilization * len(slots):
            # direct: too few slots ready; wait for more, up to the delay of the oldest request
            waited = time.perf_counter_ns() - min(s.queue[0].arrival_ns for s in ready)
            if waited < self.delay_ns:
                self._arm_timer((self.delay_ns - waited) / 1e9)
                return
        chosen = ready[: self.max_batch]
        prepared: dict[int, Payload] = {}  # id(sequence) -> its request in this batch
        for seq in chosen:
            payload = seq.queue.popleft()
            self._admitted.discard(id(payload))
            seq.inflight = True
            try:
                self._prepare(seq, payload)
            except TritonError as exc:
                seq.inflight = False
                payload.fail(exc)
                if self.preserve_ordering:
                    self._orders[executor].flush()
                continue
            prepared[id(seq)] = payload
            if self.iterative:
                seq.running = payload
                self._running[id(payload)] = seq
        if not prepared:
            return
        payloads = list(prepared.values())
        if self.strategy == "direct" and len(slots) > 1:
            try:
                payloads = self._slot_aligned(slots, prepared)
            except TritonError as exc:  # no room for the null requests
                for seq in chosen:
                    seq.inflight = False
                    if seq.running is not None:
                        self._running.pop(id(seq.running), None)
                        seq.running = None
                for payload in prepared.values():
                    payload.fail(exc)
                return
        now = time.perf_counter_ns()
        for payload in payloads:
            payload.dispatch_ns = now
        if self.preserve_ordering:
            order = self._orders[executor]
            for payload in payloads:
                order.wrap(payload)
        self._busy[executor] = chosen
        on_release = self._on_release if self.iterative else None
        executor.execute(Batch(payloads, executor, self._on_free, self._on_executed, on_release))

    def _slot_aligned(self, slots: list[_Sequence | None], prepared: dict[int, Payload]) -> list[Payload]:
        """``direct``: request i of the batch is slot i; idle slots below a busy one get null requests.

        A null request (READY false, CORRID 0, inputs of zeros, initial state)
        is what Triton sends there; its response is dropped.

        :param prepared: the batch's requests by ``id`` of their sequence.
        """
        last = max(i for i, s in enumerate(slots) if s is not None and id(s) in prepared)
        template = next(iter(prepared.values()))
        out: list[Payload] = []
        nulls: list[Payload] = []
        try:
            for i in range(last + 1):
                seq = slots[i]
                if seq is not None and id(seq) in prepared:
                    out.append(prepared[id(seq)])
                    continue
                null = self._host.null_payload(template)
                nulls.append(null)
                self._add_controls(null, 0, 0, ready=False)
                for st in self._states:
                    self._host.add_input(null, st.input_name, st.datatype, st.shape, st.initial)
                out.append(null)
        except TritonError as exc:
            for null in nulls:
                null.fail(exc)  # gives their shared memory back
            raise
        return out

    def _prepare(self, seq: _Sequence, payload: Payload) -> None:
        """Add the control inputs and the implicit state to a request about to run."""
        flags = int(payload.wire.get("flags", 0))
        self._add_controls(payload, seq.corr, flags, ready=True)
        if not self._states:
            return
        if flags & _START:
            seq.state.clear()
        for st in self._states:
            datatype, st_shape, data = seq.state.get(st.input_name) or (
                st.datatype,
                st.shape,
                st.initial,
            )
            self._host.add_input(payload, st.input_name, datatype, st_shape, data)
        outputs = {st.output_name: st.input_name for st in self._states}

        def sink(name: str, datatype: str, out_shape: list[int], data: bytes) -> None:
            seq.state[outputs[name]] = (datatype, out_shape, data)

        self._host.set_state_sink(payload, sink)

    def _add_controls(self, payload: Payload, corr: int | str, flags: int, ready: bool) -> None:
        shape = [1, 1] if self._batching else [1]
        for control in self._controls:
            self._host.add_input(payload, control[0], control[2], shape, control_bytes(control, corr, flags, ready))

    def _on_free(self, executor: Executor) -> None:
        for seq in self._busy.pop(executor, []):
            if seq.running is not None:
                continue  # iterative: its request is not released yet (a decoupled model answers later)
            self._settle(seq)
        self._schedule(executor)

    def _settle(self, seq: _Sequence) -> None:
        """The sequence's request is done: it ends, or its next request may run."""
        seq.inflight = False
        seq.last_ns = time.perf_counter_ns()
        if seq.ended and not seq.queue:
            self._release(seq)
        else:
            self._eligible(seq)

    def _on_release(self, payload: Payload, rescheduled: bool) -> None:
        """``iterative_sequence``: the backend released ``payload`` (see :class:`Batch`)."""
        seq = self._running.pop(id(payload), None)
        if seq is None:  # a null request, or its instance is gone
            if rescheduled:
                error = f"model '{self._name}': the rescheduled request's sequence is gone"
                payload.fail(TritonError(Code.UNAVAILABLE, error))
            return
        seq.running = None
        if rescheduled:  # the same request again, first in its sequence, flags cleared (as Triton)
            self._host.drop_inputs(payload, len(self._controls) + len(self._states))
            payload.wire["flags"] = 0
            seq.queue.appendleft(payload)
        else:  # Triton's GenerativeSequencer: a request released for good ends its sequence
            seq.ended = True
        executor = seq.executor
        if executor is None or seq in self._busy.get(executor, ()):
            return  # its batch is still executing: _on_free settles it
        self._settle(seq)
        self._schedule(executor)

    def _arm_timer(self, delay_s: float) -> None:
        loop = asyncio.get_running_loop()
        timer = self._timer
        if timer is not None:
            if timer.when() <= loop.time() + delay_s:
                return  # it fires first
            timer.cancel()
        self._timer = loop.call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        for executor in list(self._bound):
            self._schedule(executor)

    # -- idle sequences ------------------------------------------------------------------
    def _arm_reaper(self) -> None:
        if self._reaper is None and self._sequences:
            delay = min(max(self.idle_ns / 4e9, 0.01), 1.0)
            self._reaper = asyncio.get_running_loop().call_later(delay, self._reap)

    def _reap(self) -> None:
        self._reaper = None
        now = time.perf_counter_ns()
        for seq in list(self._sequences.values()):
            if not seq.queue and not seq.inflight and now - seq.last_ns >= self.idle_ns:
                self._release(seq)
        self._arm_reaper()
