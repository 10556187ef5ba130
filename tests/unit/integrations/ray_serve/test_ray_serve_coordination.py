"""The Ray Serve integration's coordination without Ray: coordinator, replica agents, aggregation, arguments.

Replicas here are :class:`ReplicaAgent` objects over fake servers in one event
loop, talking to a :class:`Coordinator` through an adapter with Serve's
``handle.method.remote(...)`` shape. The real cluster is tested in
tests/integration/test_ray_serve.py.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from tritium.core.errors import Code, TritonError
from tritium.core.observability.stats import MemoryMetrics, MetricsSnapshot
from tritium.integrations.ray_serve.agent import ReplicaAgent
from tritium.integrations.ray_serve.aggregate import merge_statistics, render_metrics
from tritium.integrations.ray_serve.args import Settings, TritiumArgs
from tritium.integrations.ray_serve.coordinator import GONE, TIMEOUT, Coordinator

FAST = Settings(query_timeout_s=2.0, repository_timeout_s=2.0, poll_s=0.05, stale_s=30.0)


class _Method:
    def __init__(self, target: Any, name: str) -> None:
        self.target, self.name = target, name

    def remote(self, *args: Any) -> Any:
        return getattr(self.target, self.name)(*args)


class Handle:
    """``handle.method.remote(...)`` over a local object, as a Serve deployment handle calls it."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def __getattr__(self, name: str) -> _Method:
        return _Method(self.target, name)


class FakeOptions:
    model_control_mode = "explicit"


class FakeServer:
    """The slice of InferenceServer the agent uses; ``models`` are the loaded ones."""

    def __init__(self, models: set[str], count: int = 0) -> None:
        self.models = set(models)
        self.count = count
        self.options = FakeOptions()
        self.ready = True

    def metrics_snapshot(self) -> MetricsSnapshot:
        """What the metrics collector reads (no model is loaded as far as it knows)."""
        return MetricsSnapshot((), MemoryMetrics(self.count, 0, 0, 0, 0, 0))

    def custom_metrics(self) -> list[Any]:
        """The models' own metric families (none here)."""
        return []

    def model_ready(self, name: str, version: str = "") -> bool:
        return name in self.models

    def statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        if name and name not in self.models:
            raise TritonError(Code.INVALID_ARG, f"requested model '{name}' is not available")
        names = [name] if name else sorted(self.models)
        return {"model_stats": [_stat(n, self.count) for n in names]}

    async def load_model(self, name: str, config: str | None = None, files: Any = None) -> None:
        if name.startswith("bad"):
            raise TritonError(Code.INVALID_ARG, f"failed to load '{name}'")
        self.models.add(name)

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        self.models.discard(name)


def _stat(name: str, count: int) -> dict[str, Any]:
    return {
        "name": name,
        "version": "1",
        "last_inference": count,
        "inference_count": count,
        "execution_count": count,
        "inference_stats": {"success": {"count": count, "ns": 10 * count}},
        "response_stats": {},
        "batch_stats": [{"batch_size": 1, "compute_infer": {"count": count, "ns": 5 * count}}],
        "memory_usage": [],
    }


class DeadActor:
    class _Ready:
        @staticmethod
        def remote() -> Any:
            async def fail() -> None:
                raise RuntimeError("ActorDiedError")

            return fail()

    __ray_ready__ = _Ready()


async def _replica(coordinator: Coordinator, replica_id: str, server: FakeServer) -> ReplicaAgent:
    agent = ReplicaAgent(server, Handle(coordinator), replica_id, None, FAST)
    await agent.join()
    agent.start()
    return agent


def test_calls_reach_every_replica_and_answers_combine() -> None:
    async def main() -> None:
        coordinator = Coordinator(FAST)
        a = await _replica(coordinator, "a", FakeServer({"m"}, count=3))
        b = await _replica(coordinator, "b", FakeServer({"m"}, count=4))
        assert await coordinator.members() == ["a", "b"]
        assert await a.ready() and await b.model_ready("m")
        stats = await a.statistics("m")
        assert stats["model_stats"][0]["inference_count"] == 7
        assert stats["model_stats"][0]["inference_stats"]["success"] == {"count": 7, "ns": 70}
        assert stats["model_stats"][0]["last_inference"] == 4
        b.server.models.discard("m")
        assert not await a.model_ready("m")  # not ready on every replica
        assert (await a.statistics("m"))["model_stats"][0]["inference_count"] == 3  # only where it is loaded
        with pytest.raises(TritonError, match="requested model 'x' is not available"):
            await a.statistics("x")
        text = (await b.metrics()).decode()
        assert text.count("# TYPE tritium_arena_reserved_bytes gauge") == 1
        assert 'tritium_arena_reserved_bytes{replica="a"} 3\n' in text
        assert 'tritium_arena_reserved_bytes{replica="b"} 4\n' in text
        await a.stop()
        await b.stop()

    asyncio.run(main())


def test_load_and_unload_reach_every_replica_and_a_later_replica_replays_them() -> None:
    async def main() -> None:
        coordinator = Coordinator(FAST)
        a = await _replica(coordinator, "a", FakeServer({"m"}))
        b = await _replica(coordinator, "b", FakeServer({"m"}))
        await a.load_model("x")
        assert "x" in a.server.models and "x" in b.server.models
        await b.load_model("y")
        await a.unload_model("y")
        assert "y" not in a.server.models and "y" not in b.server.models
        with pytest.raises(TritonError, match="failed to load 'bad'") as info:
            await b.load_model("bad")
        assert info.value.code == Code.INVALID_ARG
        generation, log = await coordinator.repository_log()
        assert generation == 4
        assert [(op["action"], op["name"]) for op in log] == [("load", "x"), ("unload", "y"), ("load", "bad")]
        c = await _replica(coordinator, "c", FakeServer({"m", "y"}))  # joins later: replays the log
        assert c.server.models == {"m", "x"} and c.generation == 4
        await a.stop()
        await b.stop()
        await c.stop()

    asyncio.run(main())


def test_a_restarted_coordinator_adopts_the_replicas_log() -> None:
    async def main() -> None:
        first = Coordinator(FAST)
        a = await _replica(first, "a", FakeServer(set()))
        await a.load_model("x")
        second = Coordinator(FAST)  # the coordinator replica was lost; Serve started a new one
        a.coordinator = Handle(second)
        await asyncio.sleep(0.3)  # a's next poll is answered "join first": it joins with its log
        assert await second.members() == ["a"]
        assert (await second.repository_log())[0] == 1
        b = await _replica(second, "b", FakeServer(set()))
        assert b.server.models == {"x"}
        await a.stop()
        await b.stop()

    asyncio.run(main())


def test_a_dead_replica_is_not_waited_for_and_a_silent_one_times_out() -> None:
    async def main() -> None:
        coordinator = Coordinator(FAST)
        await coordinator.join("dead", DeadActor())
        await coordinator.join("silent", None)  # alive as far as anyone knows, never polls
        replies = await coordinator.call_all("ready", None, timeout_s=1.0)
        assert replies == {"dead": GONE, "silent": TIMEOUT}
        assert await coordinator.members() == ["silent"]
        assert await coordinator.poll("dead") is None  # it must join again

    asyncio.run(main())


def test_a_replica_that_stops_polling_is_dropped_after_stale_s() -> None:
    async def main() -> None:
        coordinator = Coordinator(Settings(stale_s=0.2, poll_s=0.05))
        await coordinator.join("quiet")
        await asyncio.sleep(0.3)
        assert await coordinator.members() == []

    asyncio.run(main())


def test_outside_explicit_mode_only_the_local_server_answers_a_load() -> None:
    async def main() -> None:
        coordinator = Coordinator(FAST)
        server = FakeServer(set())
        server.options.model_control_mode = "none"

        async def refuse(name: str, config: Any = None, files: Any = None) -> None:
            raise TritonError(Code.UNAVAILABLE, "explicit model load / unload is not allowed if polling is enabled")

        server.load_model = refuse  # type: ignore[method-assign]
        a = await _replica(coordinator, "a", server)
        with pytest.raises(TritonError, match="not allowed") as info:
            await a.load_model("x")
        assert info.value.code == Code.UNAVAILABLE
        assert (await coordinator.repository_log()) == (0, [])
        await a.stop()

    asyncio.run(main())


def test_statistics_add_up_per_model_and_batch_size() -> None:
    one = {"model_stats": [_stat("m", 2), _stat("n", 1)]}
    two = {"model_stats": [_stat("m", 5)]}
    two["model_stats"][0]["batch_stats"].append({"batch_size": 4, "compute_infer": {"count": 1, "ns": 9}})
    merged = merge_statistics([one, two])["model_stats"]
    assert [s["name"] for s in merged] == ["m", "n"]
    assert merged[0]["inference_count"] == 7 and merged[0]["last_inference"] == 5
    assert merged[0]["batch_stats"] == [
        {"batch_size": 1, "compute_infer": {"count": 7, "ns": 35}},
        {"batch_size": 4, "compute_infer": {"count": 1, "ns": 9}},
    ]
    assert one["model_stats"][0]["inference_count"] == 2  # inputs untouched


def test_metrics_of_all_replicas_in_one_family_each_labelled_by_replica() -> None:
    family = (
        "nv_inference_count",
        "Number of inferences",
        "counter",
        [("nv_inference_count", {"model": "m", "version": "1"}, 3)],
    )
    text = render_metrics({"r2": [family], "r1": [family]}).decode()
    assert text == (
        "# HELP nv_inference_count Number of inferences\n"
        "# TYPE nv_inference_count counter\n"
        'nv_inference_count{model="m",replica="r1",version="1"} 3\n'
        'nv_inference_count{model="m",replica="r2",version="1"} 3\n'
    )


def test_arguments_validate_like_tritium_server_and_map_to_serve_options(tmp_path: Any) -> None:
    args = TritiumArgs(
        model_repository="models,s3://bucket/more",
        load_model="a,b",
        model_control_mode="explicit",
        server_args="--strict-readiness=false",
        max_replicas="3",
        min_replicas="1",
        num_cpus="0.5",
    )
    assert args.server_argv() == [
        f"--model-repository={os.path.abspath('models')}",
        "--model-repository=s3://bucket/more",
        "--model-control-mode=explicit",
        "--load-model=a",
        "--load-model=b",
        "--strict-readiness=false",
    ]
    options = args.deployment_options()
    assert options["autoscaling_config"]["max_replicas"] == 3 and "num_replicas" not in options
    same_loop = {"env_vars": {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0"}}
    assert options["ray_actor_options"] == {"num_cpus": 0.5, "num_gpus": 0.0, "runtime_env": same_loop}
    assert options["logging_config"] == {"enable_access_log": False}
    serve_like = TritiumArgs(model_repository="m", access_log="true", separate_thread="true").deployment_options()
    assert serve_like["ray_actor_options"]["runtime_env"] == {
        "env_vars": {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "1"}
    }
    assert serve_like["logging_config"] == {"enable_access_log": True}
    assert TritiumArgs(model_repository="m").deployment_options()["num_replicas"] == 1
    with pytest.raises(ValueError, match="unrecognized arguments: --bogus"):
        TritiumArgs(model_repository="m", server_args="--bogus")
    with pytest.raises(ValueError, match="num_replicas cannot be combined with autoscaling"):
        TritiumArgs(model_repository="m", num_replicas=2, max_replicas=3)
    with pytest.raises(ValueError, match=r"min_replicas \(4\) is more than max_replicas \(3\)"):
        TritiumArgs(model_repository="m", min_replicas=4, max_replicas=3)
    with pytest.raises(ValueError, match="not applied through Ray Serve's proxies"):
        TritiumArgs(model_repository="m", server_args=["--http-restricted-api=model-repository:k=v"])
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        TritiumArgs(model_repository="m", num_replica=2)


@pytest.mark.parametrize(
    ("root_path", "path", "status"),
    [
        ("", "/v2/health/live", 200),
        ("/tritium", "/tritium/v2/health/live", 200),  # an application deployed with route_prefix /tritium
        ("/tritium/", "/tritium/v2/health/live", 200),
        ("/tritium", "/tritium", 404),
        ("/tritium", "/tritiumx/v2/health/live", 404),
    ],
)
def test_routes_answer_below_the_applications_route_prefix(root_path: str, path: str, status: int) -> None:
    from types import SimpleNamespace

    from starlette.requests import Request

    from tritium.integrations.ray_serve.http_proxy import HttpAdapter

    network = SimpleNamespace(max_json_request_bytes=0, max_decompressed_request_bytes=0)
    server = SimpleNamespace(options=SimpleNamespace(max_request_bytes=1024, network=network), live=True)
    adapter = HttpAdapter(server, cluster=None)  # type: ignore[arg-type]
    scope = {"type": "http", "method": "GET", "path": path, "root_path": root_path, "query_string": b"", "headers": []}
    response = asyncio.run(adapter.handle(Request(scope)))
    assert response.status_code == status
    assert response.body == (b"" if status == 200 else b'{"error":"Not Found"}')
