"""The rate limiter (``--rate-limit=execution_count``): instances wait for their group's resources.

Each model reports when its execute began and ended (T0/T1, from the model
itself), so the assertions are about overlap, not durations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.integration.test_dynamic_batcher import _concurrent
from tests.support.clients import module_server
from tests.support.scheduling_models import add_batch_model, batch_config
from tests.support.server import ServerProcess


def _group(resource: str, count: int = 1, is_global: bool = False) -> str:
    glob = "global: true" if is_global else ""
    return f'{{ count: 1 kind: KIND_CPU rate_limiter {{ resources [ {{ name: "{resource}" count: {count} {glob} }} ] priority: 1 }} }}'


def build(repo: Path) -> None:
    """Two models sharing resource R (one unit: they take turns), two sharing S (two units given)."""
    for name, group in (
        ("r_a", _group("R")),
        ("r_b", _group("R")),
        ("s_a", _group("S")),
        ("s_b", _group("S")),
        ("g_a", _group("G", is_global=True)),
        ("g_b", _group("G", is_global=True)),
    ):
        add_batch_model(repo, name, batch_config(dynamic=None, delay_ms=700, groups=group))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = [
        "--rate-limit=execution_count",
        "--rate-limit-resource=R:1",
        "--rate-limit-resource=S:2",
        "--rate-limit-resource=G:1",
    ]
    yield from module_server(tmp_path_factory.mktemp("rate_limiter"), build, args)


def _interval(server: ServerProcess, model: str) -> Callable[[], tuple[float, float]]:
    def call() -> tuple[float, float]:
        client = httpclient.InferenceServerClient(server.http_url.replace("http://", ""))
        try:
            x = httpclient.InferInput("INPUT0", [1, 1], "FP32")
            x.set_data_from_numpy(np.ones((1, 1), np.float32))
            result = client.infer(model, [x])
            return float(result.as_numpy("T0")[0, 0]), float(result.as_numpy("T1")[0, 0])
        finally:
            client.close()

    return call


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.parametrize("pair", [("r_a", "r_b"), ("g_a", "g_b")])
def test_instances_needing_the_only_unit_take_turns(server: ServerProcess, pair: tuple[str, str]) -> None:
    a, b = _concurrent([_interval(server, pair[0]), _interval(server, pair[1])], stagger_s=0.05)
    assert not _overlap(a, b), (a, b)


def test_instances_run_together_when_the_server_has_enough(server: ServerProcess) -> None:
    a, b = _concurrent([_interval(server, "s_a"), _interval(server, "s_b")], stagger_s=0.05)
    assert _overlap(a, b), (a, b)


def test_too_few_resources_fail_the_load(tmp_path: Path) -> None:
    add_batch_model(tmp_path, "needs_two", batch_config(dynamic=None, groups=_group("R", count=2)))
    add_batch_model(tmp_path, "unlisted", batch_config(dynamic=None, groups=_group("Q")))
    proc = ServerProcess(
        [tmp_path],
        ["--rate-limit=execution_count", "--rate-limit-resource=R:1", "--exit-on-error=false"],
        log_path=tmp_path / "server.log",
    ).start()  # live once every model has been loaded or has failed to
    proc.stop()
    log = proc.log()
    # Triton 2.51's messages: too few given, and an unlisted resource once any is listed
    assert (
        'Resource count for "R" is limited to 1 which will prevent scheduling of one or more model instances, '
        "the minimum required count is 2" in log
    )
    assert (
        'Resource count for "Q" is limited to 0 which will prevent scheduling of one or more model instances, '
        "the minimum required count is 1" in log
    )


def test_bad_resource_flag_is_refused(tmp_path: Path) -> None:
    proc = ServerProcess([tmp_path], ["--rate-limit-resource=R1"], log_path=tmp_path / "server.log")
    proc.start(wait_ready=False)
    try:
        assert proc.wait_exit(60) != 0
    finally:
        proc.stop()
    assert "--rate-limit-resource option format is '<resource_name>:<count>:<device>'. Got R1" in proc.log()
