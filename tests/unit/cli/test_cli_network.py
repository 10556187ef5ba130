"""tritium/cli_network.py: the limit, timeout, health-check, keepalive and TLS flags become settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritium.cli import parse_args
from tritium.core.settings.network import DEFAULT_MAX_REQUEST_BYTES, TlsFiles


def options(*flags: str):  # type: ignore[no-untyped-def]
    return parse_args(["--model-repository=/nonexistent", *flags])[0]


def test_defaults() -> None:
    o = options()
    assert o.max_request_bytes == DEFAULT_MAX_REQUEST_BYTES == 512 << 20
    n = o.network
    assert (n.max_inflight_request_bytes, n.http_header_timeout_s, n.http_body_timeout_s, n.http_idle_timeout_s) == (
        0,
        30.0,
        60.0,
        300.0,
    )
    assert n.max_json_request_bytes == 32 << 20
    assert n.max_decompressed_request_bytes == 64 << 20
    assert options("--max-decompressed-request-bytes=1000").network.max_decompressed_request_bytes == 1000
    assert n.grpc_channel_args == {  # Triton's defaults, and one hour of idleness
        "grpc.keepalive_time_ms": 7_200_000,
        "grpc.keepalive_timeout_ms": 20_000,
        "grpc.http2.max_pings_without_data": 2,
        "grpc.http2.min_ping_interval_without_data_ms": 300_000,
        "grpc.http2.max_ping_strikes": 2,
        "grpc.keepalive_permit_without_calls": 0,
        "grpc.max_connection_idle_ms": 3_600_000,
    }
    assert n.grpc_tls is None and n.http_tls is None
    assert (o.ping_interval_s, o.ping_timeout_s) == (5.0, 10.0)


def test_flags_set_them() -> None:
    o = options(
        "--max-inflight-request-bytes=1000",
        "--http-header-timeout-secs=1.5",
        "--http-idle-timeout-secs=9",
        "--grpc-keepalive-time=1000",
        "--grpc-keepalive-permit-without-calls=true",
        "--grpc-max-connection-idle-secs=0",
        "--worker-ping-timeout-secs=3",
    )
    n = o.network
    assert (n.max_inflight_request_bytes, n.http_header_timeout_s, n.http_idle_timeout_s) == (1000, 1.5, 9.0)
    assert n.grpc_channel_args["grpc.keepalive_time_ms"] == 1000
    assert n.grpc_channel_args["grpc.keepalive_permit_without_calls"] == 1
    assert "grpc.max_connection_idle_ms" not in n.grpc_channel_args
    assert o.ping_timeout_s == 3.0


def test_tls_flags(tmp_path: Path) -> None:
    cert, key, root = (tmp_path / n for n in ("c.pem", "k.pem", "ca.pem"))
    for path in (cert, key, root):
        path.write_text("x")
    n = options("--grpc-use-ssl=true", f"--grpc-server-cert={cert}", f"--grpc-server-key={key}").network
    assert n.grpc_tls == TlsFiles(str(cert), str(key), "", False)
    n = options(
        "--http-use-ssl-mutual=true",
        f"--http-server-cert={cert}",
        f"--http-server-key={key}",
        f"--http-root-cert={root}",
    ).network
    assert n.http_tls == TlsFiles(str(cert), str(key), str(root), True)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--grpc-use-ssl-mutual=true"], "--grpc-use-ssl-mutual needs --grpc-server-cert"),
        (["--http-idle-timeout-secs=0"], "--http-idle-timeout-secs must be > 0"),
        (["--max-inflight-request-bytes=-1"], "--max-inflight-request-bytes must be >= 0"),
        (["--max-decompressed-request-bytes=0"], "--max-decompressed-request-bytes must be > 0"),
    ],
)
def test_bad_flags_are_refused(flags: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        options(*flags)
    assert info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--http-port", "--grpc-port", "--metrics-port", "--openai-port"])
@pytest.mark.parametrize("value", ["99999", "-5", "80x"])
def test_a_port_out_of_range_is_refused(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Triton 2.51 binds 99999 modulo 65536 (34463) and logs 99999: refused here instead
    with pytest.raises(SystemExit) as exc:
        options(f"{flag}={value}")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: invalid port" in err and "expected a number from 0 to 65535" in err


def test_ports_in_range_are_taken() -> None:
    o = options("--http-port=0", "--grpc-port=65535")
    assert (o.http_port, o.grpc_port) == (0, 65535)
