"""The one check that refuses a decoupled model for a single-response call, with Triton's messages."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tritium.core.api import Code, TritonError, refuse_decoupled


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("HTTP end point", "HTTP end point doesn't support models with decoupled transaction policy"),
        ("ModelInfer RPC", "ModelInfer RPC doesn't support models with decoupled transaction policy"),
        (None, "infer (use infer_stream) doesn't support models with decoupled transaction policy"),
    ],
)
def test_a_decoupled_model_is_refused_naming_the_call(call: str | None, message: str) -> None:
    model = SimpleNamespace(decoupled=True)
    with pytest.raises(TritonError) as info:
        refuse_decoupled(model) if call is None else refuse_decoupled(model, call)  # type: ignore[arg-type]
    assert (info.value.code, info.value.message) == (Code.UNSUPPORTED, message)


def test_a_model_that_is_not_decoupled_passes() -> None:
    assert refuse_decoupled(SimpleNamespace(decoupled=False), "HTTP end point") is None  # type: ignore[arg-type,func-returns-value]
