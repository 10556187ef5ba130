"""The rate limiter's pool and its order of waiting instances (Triton's scaled priority)."""

from __future__ import annotations

import pytest

from tritium.core.errors import TritonError
from tritium.core.scheduler.rate_limiter import (
    Demand,
    RateLimiter,
    demand_of_group,
    parse_resource_flag,
)

R1 = Demand(((("R", 0), 1),), priority=1)
R2 = Demand(((("R", 0), 1),), priority=2)


def test_priority_scaled_by_executions() -> None:
    limiter = RateLimiter()
    limiter.register(R1)
    started: list[str] = []
    limiter.submit(R1, lambda: None, "hold")  # takes the only unit
    # both instances always wait: priority 1 ("a") runs about twice as often as priority 2 ("b")
    for _ in range(6):
        for name, demand in (("a", R1), ("b", R2)):
            limiter.submit(demand, lambda n=name: started.append(n), name)
    for _ in range(12):
        limiter.release(R1)
    assert started.count("a") == started.count("b") == 6  # everything ran in the end
    first_six = started[:6]
    assert first_six.count("a") == 4 and first_six.count("b") == 2


def test_pool_sizes_and_flag_errors() -> None:
    group = {"rate_limiter": {"resources": [{"name": "R", "count": 2}, {"name": "G", "global": True, "count": 1}]}}
    demand = demand_of_group(group, 3)
    assert demand is not None and dict(demand.resources) == {("R", 3): 2, ("G", -1): 1}
    free = RateLimiter()
    free.register(demand)
    assert free.available(("R", 3)) == 2  # no flag: what the most demanding instance needs
    limited = RateLimiter([parse_resource_flag("R:1"), parse_resource_flag("G:1")])
    with pytest.raises(TritonError) as info:
        limited.register(demand)
    assert info.value.message == (
        'Resource count for "R" is limited to 1 which will prevent scheduling of one or more model instances, '
        "the minimum required count is 2"
    )
    assert parse_resource_flag("R:4:1") == ("R", 4, 1)
    with pytest.raises(ValueError):
        parse_resource_flag("R")
