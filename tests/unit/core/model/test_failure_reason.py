"""core.model.failure_reason: the reason label a finished request is counted under (Triton's reasons)."""

from __future__ import annotations

from tritium.core import Code, TritonError
from tritium.core.model.model import failure_reason
from tritium.core.scheduler.base import Rejected


def test_reasons() -> None:
    assert failure_reason(None, False) is None
    assert failure_reason(None, True) == "CANCELED"  # the caller went away; the model ran it to the end
    assert failure_reason(TritonError(Code.CANCELLED, "request cancelled"), False) == "CANCELED"
    assert failure_reason(TritonError(Code.INTERNAL, "boom"), True) == "CANCELED"
    assert failure_reason(TritonError(Code.INTERNAL, "boom"), False) == "BACKEND"
    assert failure_reason(Rejected(Code.UNAVAILABLE, "Request timeout expired"), False) == "REJECTED"
