"""Execute timeouts of the instances in one worker: which batch each instance runs now, and its timer.

A model with an execute timeout (``execute_timeout_seconds``) gets its worker killed when a
batch of one of its instances runs longer. An instance runs its batches one at a time, in
the order they were handed to it, so only the first one handed and not yet done is timed;
when it is done the next one's timer starts. Core process, event loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

__all__ = ["ExecuteTimeouts"]


class ExecuteTimeouts:
    """The timed instances of one worker.

    :param on_timeout: called with ``(batch id, instance id, seconds)`` when a batch runs past
        its instance's timeout.
    """

    def __init__(self, on_timeout: Callable[[int, int, float], None]) -> None:
        self._on_timeout = on_timeout
        #: True while some instance has a timeout (else nothing needs telling: a plain attribute,
        #: read for every batch)
        self.active = False
        self._seconds: dict[int, float] = {}  # instance id -> its timeout
        self._handed: dict[int, deque[int]] = {}  # instance id -> its batches not yet done, in order
        self._timers: dict[int, asyncio.TimerHandle] = {}  # batch id -> the timer of the batch running

    def add_instance(self, instance_id: int, seconds: float) -> None:
        """Time the batches of ``instance_id`` (``seconds`` > 0)."""
        self._seconds[instance_id] = seconds
        self._handed[instance_id] = deque()
        self.active = True

    def remove_instance(self, instance_id: int) -> None:
        """The instance left the worker."""
        self._seconds.pop(instance_id, None)
        self.active = bool(self._seconds)
        for batch_id in self._handed.pop(instance_id, ()):
            timer = self._timers.pop(batch_id, None)
            if timer is not None:
                timer.cancel()

    def handed(self, batch_id: int, instance_id: int) -> None:
        """A batch went to ``instance_id``: timed now if it is the instance's only one."""
        handed = self._handed.get(instance_id)
        if handed is not None:
            handed.append(batch_id)
            if len(handed) == 1:
                self._start(batch_id, instance_id)

    def done(self, batch_id: int) -> None:
        """A batch's execute returned: its timer stops, and its instance's next batch is timed."""
        timer = self._timers.pop(batch_id, None)
        if timer is not None:
            timer.cancel()
        for instance_id, handed in self._handed.items():
            if handed and handed[0] == batch_id:
                handed.popleft()
                if handed:
                    self._start(handed[0], instance_id)  # the worker starts it now
                return

    def cancel_all(self) -> None:
        """The worker is gone: no timer fires."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def _start(self, batch_id: int, instance_id: int) -> None:
        seconds = self._seconds[instance_id]
        self._timers[batch_id] = asyncio.get_running_loop().call_later(seconds, self._fire, batch_id, instance_id)

    def _fire(self, batch_id: int, instance_id: int) -> None:
        self._timers.pop(batch_id, None)
        self._on_timeout(batch_id, instance_id, self._seconds.get(instance_id, 0.0))
