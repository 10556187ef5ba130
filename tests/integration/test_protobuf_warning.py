"""A server whose protobuf runs in pure Python says so at start-up (it parses every gRPC message
about 100x slower); one on the compiled implementation says nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
WARNING = (
    "protobuf runs its pure-Python implementation (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION='python'): gRPC "
    "requests and model configs parse about 100x slower; unset it for the compiled implementation"
)


@pytest.mark.parametrize("setting", ["python", None], ids=["pure-python", "compiled"])
def test_start_up_warns_about_pure_python_protobuf(tmp_path: Path, setting: str | None) -> None:
    args = ["--model-control-mode=explicit", "--allow-metrics=false"]
    server = ServerProcess([ROOT / "examples" / "python_models"], args, log_path=tmp_path / "server.log")
    server.env.pop("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", None)
    if setting is not None:
        server.env["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = setting
    with server:
        log = server.log()
    warned = [line for line in log.splitlines() if "protobuf runs its pure-Python" in line]
    if setting is None:
        assert warned == [], log
    else:
        assert len(warned) == 1 and warned[0].startswith("W") and warned[0].endswith(WARNING), log
