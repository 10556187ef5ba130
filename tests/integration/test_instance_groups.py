"""Instance groups: several instances run in parallel, every group kind, statistics that add up."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.http as httpclient

from tests.integration.test_dynamic_batcher import _concurrent, _http
from tests.support.clients import module_server
from tests.support.scheduling_models import add_batch_model, batch_config
from tests.support.server import ServerProcess

GROUPS = '{ count: 1 kind: KIND_CPU }, { count: 2 kind: KIND_AUTO }, { name: "whole" count: 1 kind: KIND_MODEL }'


def build(repo: Path) -> None:
    """The suite's model repository."""
    add_batch_model(repo, "pair", batch_config(dynamic=None, delay_ms=500, count=2))
    add_batch_model(repo, "groups", batch_config(dynamic=None, delay_ms=500, groups=GROUPS))
    add_batch_model(
        repo,
        "batched_pair",
        batch_config(dynamic="max_queue_delay_microseconds: 300000", delay_ms=300, count=2),
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from module_server(tmp_path_factory.mktemp("instance_groups"), build, [])


def _stats(server: ServerProcess, model: str) -> dict:
    client = httpclient.InferenceServerClient(server.http_url.replace("http://", ""))
    try:
        return client.get_inference_statistics(model)["model_stats"][0]
    finally:
        client.close()


def test_two_instances_run_in_parallel(server: ServerProcess) -> None:
    _http(server, "pair")()  # warm up both connections' paths
    _http(server, "pair")()
    start = time.monotonic()
    results = _concurrent([_http(server, "pair") for _ in range(2)], stagger_s=0.0)
    wall = time.monotonic() - start
    assert len({r["PID"] for r in results}) == 2
    # the one timing assertion of these suites: 2 x 500 ms requests take well under 2 x 500 ms
    assert wall < 1.0, wall


def test_every_group_kind_gets_instances(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url.replace("http://", ""))
    try:
        groups = client.get_model_config("groups")["instance_group"]
    finally:
        client.close()
    assert [(g["name"], g["kind"], g["count"]) for g in groups] == [
        ("groups_0", "KIND_CPU", 1),
        ("groups_1", "KIND_CPU", 2),  # KIND_AUTO without GPUs is KIND_CPU, as in Triton
        ("whole", "KIND_MODEL", 1),
    ]
    before = _stats(server, "groups")
    results = _concurrent([_http(server, "groups") for _ in range(4)], stagger_s=0.02)
    assert len({r["PID"] for r in results}) == 4  # the next request goes to a free instance
    after = _stats(server, "groups")
    assert int(after["execution_count"]) - int(before.get("execution_count", 0)) == 4
    assert int(after["inference_count"]) - int(before.get("inference_count", 0)) == 4


def test_batches_spread_over_instances_and_statistics_add_up(server: ServerProcess) -> None:
    results = _concurrent([_http(server, "batched_pair") for _ in range(6)], stagger_s=0.01)
    batches: dict[tuple[int, int], int] = {}
    for r in results:
        batches[(r["PID"], r["SEQNO"])] = r["NREQ"]
    assert sum(batches.values()) == 6
    stats = _stats(server, "batched_pair")
    assert int(stats["inference_count"]) == 6
    assert int(stats["execution_count"]) == len(batches)
    by_size = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]}
    assert sum(size * count for size, count in by_size.items()) == 6
    assert sum(by_size.values()) == len(batches)
