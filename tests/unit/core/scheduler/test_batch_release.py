"""A batch's request releases: final responses and rescheduled requests
(``TRITONSERVER_REQUEST_RELEASE_RESCHEDULE``), with fake payloads (no processes)."""

from __future__ import annotations

from typing import Any

from tritium.core.scheduler.base import Batch, Payload


class _Handler:
    def __init__(self) -> None:
        self.responses: list[tuple[Any, bool]] = []

    def on_response(
        self, payload: Payload, outputs: Any, error: Any, parameters: Any, final: bool, worker: Any
    ) -> None:
        payload.final = final
        self.responses.append((error, final))

    def on_executed(self, payload: Payload) -> None:
        pass


def _batch(handler: _Handler, releases: list[tuple[int, bool]] | None) -> Batch:
    payloads = [Payload({"id": str(i), "inputs": []}, 1, handler, None) for i in range(2)]

    def on_release(payload: Payload, rescheduled: bool) -> None:
        assert releases is not None
        releases.append((payloads.index(payload), rescheduled))

    return Batch(
        payloads,
        object(),
        lambda executor: None,
        lambda size, t: None,  # type: ignore[arg-type]
        on_release if releases is not None else None,
    )


def test_rescheduled_requests_complete_the_batch_without_a_response() -> None:
    handler, releases = _Handler(), []
    batch = _batch(handler, releases)
    batch.on_response(0, [], None, None, False, None, rescheduled=True)
    assert (releases, handler.responses, batch.complete) == ([(0, True)], [], False)
    batch.on_response(1, [], None, None, True, None)
    assert releases == [(0, True), (1, False)]  # a final response releases the request too
    assert handler.responses == [(None, True)]
    assert batch.complete
    assert not batch.payloads[0].done  # it runs on, in another batch


def test_rescheduling_without_a_scheduler_that_reschedules_fails_the_request() -> None:
    handler = _Handler()
    batch = _batch(handler, None)
    batch.on_response(0, [], None, None, False, None, rescheduled=True)
    [(error, final)] = handler.responses
    assert final and error.message.startswith("Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE")
