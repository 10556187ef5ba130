"""tritonserver's --id, --model-load-retry-count, --model-config-name and the flags tritium accepts only
with a value that asks for nothing (tritium/cli_triton.py)."""

from __future__ import annotations

import pytest

from tritium.cli import parse_args
from tritium.cli_triton import NOOP_FLAGS, triton_notes


def parse(*flags: str):  # type: ignore[no-untyped-def]
    return parse_args(["--model-repository=/nonexistent", *flags])


def test_defaults() -> None:
    options, args = parse()
    assert (options.server_id, options.model_load_retries, options.model_config_name) == ("tritium", 0, "")
    assert triton_notes(args) == []


def test_id_retry_count_and_config_name() -> None:
    options, _ = parse("--id=triton", "--model-load-retry-count=2", "--model-config-name=h100")
    assert (options.server_id, options.model_load_retries, options.model_config_name) == ("triton", 2, "h100")


@pytest.mark.parametrize(
    "flags",
    [
        ["--pinned-memory-pool-byte-size=0"],
        ["--cuda-memory-pool-byte-size=0:0", "--cuda-memory-pool-byte-size=1:0"],
        ["--cuda-virtual-address-size=0:0"],
        ["--response-cache-byte-size=0"],
        ["--buffer-manager-thread-count=0"],
        ["--http-thread-count=8"],
        ["--grpc-infer-allocation-pool-size=8"],
        ["--grpc-infer-response-compression-level=none"],
        ["--model-namespacing=false"],
        ["--enable-peer-access=false"],
        ["--reuse-http-port=false", "--reuse-grpc-port=0"],
    ],
)
def test_values_that_ask_for_nothing_are_accepted_with_a_log_line(flags: list[str]) -> None:
    _options, args = parse(*flags)
    notes = triton_notes(args)
    assert len(notes) == len(flags)
    for flag, note in zip(flags, notes, strict=True):
        name = flag.split("=")[0]
        assert note == f"{flag} accepted: tritium does not have {NOOP_FLAGS[name].lacks}, and this value asks for none"


@pytest.mark.parametrize(
    "flag, message",
    [
        (
            "--pinned-memory-pool-byte-size=268435456",
            "--pinned-memory-pool-byte-size=268435456: tritium does not have a pinned host-memory pool",
        ),
        ("--cuda-memory-pool-byte-size=0:67108864", "it accepts --cuda-memory-pool-byte-size only with a value"),
        ("--cuda-memory-pool-byte-size=0", "(<gpu>:0)"),
        ("--model-namespacing=true", "tritium does not have model namespacing"),
        ("--http-thread-count=0", "(1 or more)"),
        ("--grpc-infer-response-compression-level=high", "(none)"),
        ("--response-cache-byte-size=1024", "use --cache-config local,size=<bytes>"),
        ("--model-load-retry-count=-1", "invalid retry count '-1' (expected a whole number >= 0)"),
        ("--model-config-name=a b", "invalid model config name 'a b'"),
        ("--model-config-name=../x", "it names a file in configs/, not a path"),
        ("--id=", "the server id must not be empty"),
        ("--vertex-ai-thread-count=8", "--vertex-ai-thread-count is a tritonserver flag for Vertex AI thread counts"),
    ],
)
def test_other_values_are_refused_naming_the_flag(flag: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse(flag)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag, key, value", [("--trace-count=5", "count", 5), ("--trace-log-frequency=3", "log_frequency", 3)]
)
def test_deprecated_trace_flags(flag: str, key: str, value: int) -> None:
    options, _ = parse(flag)
    assert getattr(options.trace, key) == value
