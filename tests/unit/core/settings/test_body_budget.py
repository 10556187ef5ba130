"""core.network.BodyBudget: the server's one budget for request bodies in flight (HTTP and gRPC)."""

from __future__ import annotations

from tritium.core import Code
from tritium.core.settings.network import BodyBudget


def test_the_default_is_four_requests_at_the_limit_and_never_less_than_one() -> None:
    assert BodyBudget.for_limits(0, 1000).limit == 4000
    assert BodyBudget.for_limits(2500, 1000).limit == 2500
    assert BodyBudget.for_limits(10, 1000).limit == 1000  # a request the size limit allows fits an idle server


def test_reserve_takes_what_fits_and_release_gives_it_back() -> None:
    budget = BodyBudget(100)
    assert budget.reserve(60) and budget.reserve(40)
    assert budget.held == 100
    assert not budget.reserve(1)
    assert budget.held == 100  # a refusal takes nothing
    budget.release(40)
    assert not budget.reserve(41)
    assert budget.reserve(40)
    budget.release(100)
    assert budget.held == 0


def test_the_refusal_is_unavailable_with_the_http_message() -> None:
    error = BodyBudget(24 << 20).refusal()
    assert (error.code, error.message) == (
        Code.UNAVAILABLE,
        f"the server holds {24 << 20} bytes of request bodies already; retry later",
    )


def test_a_budget_hold_gives_back_once_and_takes_nothing_after() -> None:
    from tritium.frontends.kserve_http.inflate import BudgetHold

    budget = BodyBudget(100)
    hold = BudgetHold(budget)
    assert hold.take(60) and hold.take(30) and not hold.take(20)
    assert (hold.held, budget.held) == (90, 90)
    hold.release()
    hold.release()
    assert (hold.held, budget.held) == (0, 0)
    assert not hold.take(1)  # a parse thread still inflating after the connection let go takes nothing
    assert budget.held == 0
