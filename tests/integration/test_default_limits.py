"""What one client can cost a server started with the default limits (issue 28).

A compression bomb is refused once its output passes ``--max-decompressed-request-bytes``
(64 MiB by default), and the server's peak memory (``VmHWM`` of the PID this test
started, reset first) stays within the bound docs/security.md gives; the inflated bytes
count against ``--max-inflight-request-bytes`` as they grow.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clients import HTTP_ONLY, declare_body, http_call, module_server
from tests.support.hostile import post, reset_peak_rss, rss_mib
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

MIB = 1 << 20
#: --max-decompressed-request-bytes' default
INFLATE_LIMIT = 64 * MIB
#: a compressed body is inflated this much at a time (frontends/kserve_http/inflate.py)
STEP = 4 * MIB
#: the documented bound's slack for the allocator and the parse thread (docs/security.md)
SLACK = 32 * MIB


def _build(repo: Path) -> None:
    add_model(repo, "echo", identity_config("TYPE_UINT8", "[ -1 ]", max_batch_size=0))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with every limit at its default."""
    yield from module_server(tmp_path_factory.mktemp("default_limits"), _build, HTTP_ONLY)


@pytest.fixture(scope="module")
def small_budget(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server whose in-flight budget holds 8 MiB of bodies, a compressed one inflating to 7 MiB at most."""
    args = [
        *HTTP_ONLY,
        f"--max-request-bytes={8 * MIB}",
        f"--max-inflight-request-bytes={8 * MIB}",
        f"--max-decompressed-request-bytes={7 * MIB}",
    ]
    yield from module_server(tmp_path_factory.mktemp("small_budget"), _build, args)


def gzip_zeros(size: int) -> bytes:
    """``size`` zero bytes, gzip-compressed (about 1/1000 of ``size``)."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MIB)
    return b"".join([deflater.compress(zeros) for _ in range(size // MIB)] + [deflater.flush()])


def test_a_compression_bomb_costs_the_documented_bound_at_the_default_limits(server: ServerProcess) -> None:
    bomb = gzip_zeros(2048 * MIB)  # 2 GiB inflated: the old default limit (512 MiB) would have held 512 MiB
    assert len(bomb) < 4 * MIB
    before = reset_peak_rss(server)
    status, reply = post(server, "/v2/models/echo/infer", bomb, {"Content-Encoding": "gzip"})
    assert (status, reply) == (
        413,
        {
            "error": f"decompressed request body exceeds the maximum of {INFLATE_LIMIT} bytes "
            "(--max-decompressed-request-bytes)"
        },
    )
    peak = (rss_mib(server, "VmHWM") - before) * MIB
    # docs/security.md: at most the compressed body, the inflate limit and one step (plus slack)
    assert peak < len(bomb) + INFLATE_LIMIT + STEP + SLACK, f"{peak / MIB:.0f} MiB"
    assert http_call(server, "GET", "/v2/health/ready")[0] == 200


def _binary_request(size: int) -> tuple[bytes, dict[str, str]]:
    """A compressed binary request for ``echo`` of ``size`` zero bytes, asking for a binary output."""
    header = json.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "shape": [size], "datatype": "UINT8", "parameters": {"binary_data_size": size}}
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        }
    ).encode()
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = deflater.compress(header) + deflater.compress(bytes(size)) + deflater.flush()
    return body, {"Content-Encoding": "gzip", "Inference-Header-Content-Length": str(len(header))}


def test_inflated_bytes_count_against_the_in_flight_budget(small_budget: ServerProcess) -> None:
    body, headers = _binary_request(6 * MIB)
    assert len(body) < 64 << 10  # small on the wire; 6 MiB once inflated
    # 4 MiB of the 8 MiB budget held by a body declared and not sent: the inflated 6 MiB do not fit
    held = declare_body(small_budget, "/v2/repository/models/echo/load", 4 * MIB)
    try:
        for _ in range(50):  # the held body's head is read (and its bytes reserved) at once; wait for it
            status, answer, reply = http_call(small_budget, "POST", "/v2/models/echo/infer", body, headers)
            if status == 503:
                break
        assert (status, json.loads(reply)) == (
            503,
            {"error": f"the server holds {8 * MIB} bytes of request bodies already; retry later"},
        )
        assert answer["retry-after"] == "1"
    finally:
        held.close()
    # the budget is back, and each answered request gives its inflated bytes back: twice in a row fits
    for _ in range(2):
        status, answer, reply = http_call(small_budget, "POST", "/v2/models/echo/infer", body, headers)
        assert status == 200, reply[:300]
        assert len(reply) - int(answer["inference-header-content-length"]) == 6 * MIB


def test_a_refused_inflation_gives_its_bytes_back(small_budget: ServerProcess) -> None:
    bomb = gzip_zeros(64 * MIB)  # past the 7 MiB limit
    for _ in range(3):  # each refusal gives back what it took, or the third would find the budget spent
        assert post(small_budget, "/v2/models/echo/infer", bomb, {"Content-Encoding": "gzip"}) == (
            413,
            {
                "error": f"decompressed request body exceeds the maximum of {7 * MIB} bytes "
                "(--max-decompressed-request-bytes)"
            },
        )
    body, headers = _binary_request(6 * MIB)
    assert http_call(small_budget, "POST", "/v2/models/echo/infer", body, headers)[0] == 200
