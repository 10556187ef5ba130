"""tritium-analyzer's search space, candidate configs and the choice under constraints (no server)."""

from __future__ import annotations

from tritium.analyzer.report import Constraints, choose
from tritium.analyzer.run import Result
from tritium.analyzer.space import FULL, QUICK, Candidate, candidate_config, candidates
from tritium.core.model_config.parser import parse_config_text
from tritium.perf import Measurement
from tritium.proto import model_config_pb2 as mc

BATCHING = parse_config_text("""
name: "m" backend: "onnxruntime" max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 3 kind: KIND_CPU }, { count: 1 kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 7 }
""")
PLAIN = parse_config_text('name: "p" backend: "python"')


def test_quick_space() -> None:
    assert [c.label for c in candidates(BATCHING, QUICK)] == ["i1", "i1 dyn b8 100us", "i2", "i2 dyn b8 100us"]
    assert [c.label for c in candidates(PLAIN, QUICK)] == ["i1", "i2"]


def test_full_space_halves_the_batch_and_tries_preferred_sizes() -> None:
    labels = [c.label for c in candidates(BATCHING, FULL) if c.instances == 1]
    assert labels == [
        "i1",
        "i1 dyn b8 0us",
        "i1 dyn b8 pref8 0us",
        "i1 dyn b8 500us",
        "i1 dyn b8 pref8 500us",
        "i1 dyn b8 2000us",
        "i1 dyn b8 pref8 2000us",
        "i1 dyn b4 0us",
        "i1 dyn b4 pref4 0us",
        "i1 dyn b4 500us",
        "i1 dyn b4 pref4 500us",
        "i1 dyn b4 2000us",
        "i1 dyn b4 pref4 2000us",
    ]
    assert {c.instances for c in candidates(BATCHING, FULL)} == {1, 2, 4}


def test_candidate_config_sets_instances_and_batcher_and_keeps_the_rest() -> None:
    on = candidate_config(BATCHING, Candidate(2, 4, True, (4,), 500))
    assert [(g.count, g.kind) for g in on.instance_group] == [(2, mc.ModelInstanceGroup.KIND_CPU)]
    assert on.max_batch_size == 4 and list(on.dynamic_batching.preferred_batch_size) == [4]
    assert on.dynamic_batching.max_queue_delay_microseconds == 500
    assert on.input[0].name == "x" and on.backend == "onnxruntime"
    off = candidate_config(BATCHING, Candidate(1, 8))
    assert not off.HasField("dynamic_batching") and off.max_batch_size == 8
    assert BATCHING.dynamic_batching.max_queue_delay_microseconds == 7  # the original is untouched
    plain = candidate_config(PLAIN, Candidate(3))
    assert [(g.count, g.kind) for g in plain.instance_group] == [(3, mc.ModelInstanceGroup.KIND_AUTO)]
    assert plain.max_batch_size == 0 and not plain.HasField("dynamic_batching")


def _result(instances: int, *points: tuple[int, float, float]) -> Result:
    return Result(Candidate(instances), "", [Measurement(c, t, p99 / 2, p99) for c, t, p99 in points])


def test_choose_under_constraints() -> None:
    a = _result(1, (1, 100.0, 2000.0), (4, 300.0, 9000.0))
    b = _result(2, (1, 150.0, 3000.0), (4, 250.0, 5000.0))
    best = choose([a, b], Constraints())
    assert (best.result is a, best.point.concurrency, best.met) == (True, 4, True)
    best = choose([a, b], Constraints(p99_ms=6))
    assert (best.result is b, best.point.concurrency, best.met) == (True, 4, True)
    best = choose([a, b], Constraints(p99_ms=2.5, min_throughput=120))
    assert best is not None and not best.met and best.result is a and best.point.throughput == 300.0
    assert choose([Result(Candidate(1), "", [], "failed")], Constraints()) is None
