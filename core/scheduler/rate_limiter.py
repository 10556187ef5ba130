"""Triton's rate limiter: model instances execute only while the resources they need are free.

With ``--rate-limit=execution_count`` every instance group's ``rate_limiter {
resources [ { name count global } ] priority }`` applies: before an instance
executes a batch it acquires ``count`` of each resource it names, and it gives
them back when the execute returns. Resources are per device (an instance
takes them from its device's pool) unless ``global: true``. The server has, of
each resource, the count ``--rate-limit-resource=<name>:<count>[:<device>]``
gives (a device-less setting applies to every device; a global resource
ignores the device). Without any such flag a resource has what the most
demanding instance needs. As in Triton 2.51 (measured): names are
case-sensitive, and once one flag is given an unlisted resource has 0, so an
instance needing more than its resource has fails to load with INVALID_ARG
``Resource count for "R" is limited to 0 which will prevent scheduling of one
or more model instances, the minimum required count is 1``.

Waiting instances are ordered as Triton orders them: by their group's
``priority`` (0 counts as 1) times the executions the instance has started so
far, lower first, then by arrival; so an instance of priority 2 runs about half
as often as one of priority 1 when both always wait. A waiting instance whose
resources are free is not held back by one ahead of it whose resources are
not. With ``--rate-limit=off`` (the default) the section is ignored. Runs on
the core's event loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import Code, TritonError

__all__ = ["Demand", "RateLimiter", "demand_of_group", "parse_resource_flag"]

#: the device key of global resources
GLOBAL = -1


@dataclass(slots=True, frozen=True)
class Demand:
    """What one instance needs to execute: ``{(resource, device or GLOBAL): count}`` and its priority."""

    resources: tuple[tuple[tuple[str, int], int], ...]
    priority: int = 1


def demand_of_group(group: dict[str, Any], device: int) -> Demand | None:
    """The :class:`Demand` of an instance of ``group`` (JSON form) on ``device``; None when it names none."""
    limiter = group.get("rate_limiter") or {}
    needs: Counter[tuple[str, int]] = Counter()
    for res in limiter.get("resources", []):
        key = (str(res["name"]), GLOBAL if res.get("global") else device)
        needs[key] += int(res.get("count", 0))
    if not needs and not limiter:
        return None
    return Demand(tuple(sorted(needs.items())), max(1, int(limiter.get("priority", 0))))


def parse_resource_flag(text: str) -> tuple[str, int, int | None]:
    """``<name>:<count>[:<device>]`` -> ``(name, count, device or None for every device)``.

    :raises ValueError: for another form.
    """
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise ValueError(f"--rate-limit-resource option format is '<resource_name>:<count>:<device>'. Got {text}")
    try:
        count = int(parts[1])
        device = int(parts[2]) if len(parts) == 3 else None
    except ValueError:
        raise ValueError(
            f"--rate-limit-resource option format is '<resource_name>:<count>:<device>'. Got {text}"
        ) from None
    if count < 0:
        raise ValueError(f"--rate-limit-resource count must be >= 0. Got {text}")
    return parts[0], count, device


class RateLimiter:
    """The server's resource pool and the instances waiting for it.

    :param resources: ``--rate-limit-resource`` settings, ``(name, count, device or None)``.
    """

    def __init__(self, resources: list[tuple[str, int, int | None]] | None = None) -> None:
        self._given = list(resources or [])
        self._total: Counter[tuple[str, int]] = Counter()
        self._used: Counter[tuple[str, int]] = Counter()
        self._waiting: list[tuple[int, Demand, Callable[[], None], object]] = []
        self._order = 0
        self._runs: Counter[object] = Counter()  # executions started, per instance

    def _given_count(self, key: tuple[str, int]) -> int:
        name, device = key
        best = 0
        for given_name, count, given_device in self._given:
            if given_name == name and (given_device is None or device == GLOBAL or given_device == device):
                best = max(best, count)
        return best

    def register(self, demand: Demand) -> None:
        """An instance with ``demand`` exists: size the pool for it.

        :raises TritonError: INVALID_ARG when ``--rate-limit-resource`` flags leave it too little.
        """
        for key, count in demand.resources:
            if self._given:
                total = self._given_count(key)
                if total < count:
                    raise TritonError(
                        Code.INVALID_ARG,
                        f'Resource count for "{key[0]}" is limited to {total} which will prevent scheduling of one '
                        f"or more model instances, the minimum required count is {count}",
                    )
                self._total[key] = total
            else:
                self._total[key] = max(self._total[key], count)

    def available(self, key: tuple[str, int]) -> int:
        """Free count of a resource."""
        return self._total[key] - self._used[key]

    def _fits(self, demand: Demand) -> bool:
        return all(self.available(key) >= count for key, count in demand.resources)

    def submit(self, demand: Demand, start: Callable[[], None], owner: object = None) -> None:
        """Run ``start`` once ``demand``'s resources are acquired (now, or when released by others).

        :param owner: the instance asking (its executions so far weigh its priority).
        :raises TritonError: INTERNAL when the demand can never be met (not registered).
        """
        for key, count in demand.resources:
            if count > self._total[key]:
                raise TritonError(
                    Code.INTERNAL,
                    f"rate limiter: resource '{key[0]}' has {self._total[key]}, an instance needs {count}",
                )
        if not self._waiting and self._fits(demand):
            self._start(demand, start, owner)
            return
        self._order += 1
        self._waiting.append((self._order, demand, start, owner))
        self._drain()

    def release(self, demand: Demand) -> None:
        """An execution that held ``demand`` finished: give its resources back, start waiters."""
        for key, count in demand.resources:
            self._used[key] -= count
        self._drain()

    def _start(self, demand: Demand, start: Callable[[], None], owner: object) -> None:
        for key, count in demand.resources:
            self._used[key] += count
        self._runs[owner] += 1
        start()

    def _drain(self) -> None:
        """Start the waiters whose resources are free, lowest scaled priority first."""
        # Triton's order: priority x executions so far (lower first), then arrival
        self._waiting.sort(key=lambda w: (w[1].priority * self._runs[w[3]], w[0]))
        index = 0
        while index < len(self._waiting):
            _order, demand, start, owner = self._waiting[index]
            if self._fits(demand):
                del self._waiting[index]
                self._start(demand, start, owner)
            else:
                index += 1
