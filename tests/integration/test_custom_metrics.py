"""Custom metrics of python models (``pb_utils.MetricFamily``) on ``/metrics``, as Triton 2.51 renders them.

The expected lines are what Triton 2.51 printed for the same model (checked on 2026-12-04):
``# HELP``/``# TYPE`` lines, samples with sorted labels, a histogram's ``_count``, ``_sum`` and
cumulative ``_bucket`` lines. Bad uses raise Triton's messages, recorded by the model in a
file (its side channel); where Triton 2.51 crashes the server, tritium raises in the same words.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.support.clients import module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

MODEL = """
import json, os
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        out = json.loads(args["model_config"])["parameters"]["out_dir"]["string_value"]
        Family = pb_utils.MetricFamily
        self.requests = Family(name="probe_requests_total", description="Requests seen", kind=Family.COUNTER)
        self.last = Family(name="probe_last_value", description="Last X", kind=Family.GAUGE)
        self.x = Family(name="probe_x", description="X values", kind=Family.HISTOGRAM)
        self.counter = self.requests.Metric(labels={"model": "probe", "kind": "a"})
        self.plain = self.requests.Metric(labels={})
        self.gauge = self.last.Metric(labels={"model": "probe"})
        self.histogram = self.x.Metric(labels={"model": "probe"}, buckets=[1.0, 2.5, 10.0])
        errors = {}

        def attempt(name, call):
            try:
                errors[name] = "ok " + repr(call())
            except Exception as exc:
                errors[name] = type(exc).__name__ + ": " + str(exc)

        attempt("counter_negative", lambda: self.counter.increment(-1))
        attempt("counter_set", lambda: self.counter.set(3))
        attempt("counter_observe", lambda: self.counter.observe(1))
        attempt("gauge_observe", lambda: self.gauge.observe(1))
        attempt("histogram_increment", lambda: self.histogram.increment(1))
        attempt("histogram_set", lambda: self.histogram.set(1))
        attempt("histogram_value", lambda: self.histogram.value())
        attempt("histogram_without_buckets", lambda: self.x.Metric(labels={"a": "1"}))
        attempt("counter_with_buckets", lambda: self.requests.Metric(labels={"a": "2"}, buckets=[1.0]))
        attempt("unsorted_buckets", lambda: self.x.Metric(labels={"a": "3"}, buckets=[2.0, 1.0]))
        attempt("bad_label", lambda: self.requests.Metric(labels={"bad-label": "x"}))
        attempt("bad_name", lambda: Family(name="bad name!", description="x", kind=Family.COUNTER))
        attempt("other_kind", lambda: Family(name="probe_requests_total", description="x", kind=Family.GAUGE))
        attempt("same_kind", lambda: type(Family(name="probe_requests_total", description="y", kind=Family.COUNTER)).__name__)
        attempt("same_labels_same_metric", lambda: self.requests.Metric(labels={"kind": "a", "model": "probe"}).value())
        attempt("kind_as_int", lambda: Family(name="probe_k", description="x", kind=7))
        attempt("gauge_decrement", lambda: self.gauge.increment(-2))
        name = args["model_instance_name"]
        with open(os.path.join(out, name + ".json.tmp"), "w") as f:
            json.dump(errors, f)
        os.rename(os.path.join(out, name + ".json.tmp"), os.path.join(out, name + ".json"))

    def execute(self, requests):
        responses = []
        for request in requests:
            x = float(pb_utils.get_input_tensor_by_name(request, "X").as_numpy()[0])
            self.counter.increment(1)
            self.plain.increment(2.5)
            self.gauge.set(x)
            self.histogram.observe(x)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([x], np.float32))]))
        return responses
"""


def _config(out: Path, count: int) -> str:
    return f"""
        backend: "python"
        max_batch_size: 0
        input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
        output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
        instance_group [ {{ kind: KIND_CPU count: {count} }} ]
        parameters {{ key: "out_dir" value: {{ string_value: "{out}" }} }}
    """


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    root = tmp_path_factory.mktemp("custom_metrics")
    out = root / "seen"
    out.mkdir()

    def build(repo: Path) -> None:
        add_model(repo, "probe", _config(out, 1), files={"1/model.py": MODEL})
        add_model(repo, "pair", _config(out, 2), files={"1/model.py": MODEL})

    for server in module_server(root, build, ["--model-control-mode=explicit", "--load-model=probe"]):
        yield server, out


def _custom_lines(server: ServerProcess) -> list[str]:
    text = urllib.request.urlopen(server.metrics_url, timeout=30).read().decode()
    return [line for line in text.splitlines() if line.startswith(("probe_", "# HELP probe_", "# TYPE probe_"))]


def _infer(client: httpclient.InferenceServerClient, model: str, x: float) -> None:
    tensor = httpclient.InferInput("X", [1], "FP32")
    tensor.set_data_from_numpy(np.array([x], np.float32))
    assert client.infer(model, [tensor]).as_numpy("Y").tolist() == [x]


def _errors(out: Path, instance: str) -> dict[str, Any]:
    end = time.monotonic() + 60
    while not (out / f"{instance}.json").exists():
        assert time.monotonic() < end, f"{instance} never wrote its report"
        time.sleep(0.05)
    return dict(json.loads((out / f"{instance}.json").read_text()))


def test_counter_gauge_and_histogram_with_labels_as_triton_renders_them(served: Any) -> None:
    server, _out = served
    client = httpclient.InferenceServerClient(server.http_url)
    for x in (0.5, 3.0, 20.0):
        _infer(client, "probe", x)
    # (the model's initialize moved the gauge by -2 first)
    assert _custom_lines(server) == [
        "# HELP probe_requests_total Requests seen",
        "# TYPE probe_requests_total counter",
        "probe_requests_total 7.5",
        'probe_requests_total{kind="a",model="probe"} 3',
        "# HELP probe_last_value Last X",
        "# TYPE probe_last_value gauge",
        'probe_last_value{model="probe"} 20',
        "# HELP probe_x X values",
        "# TYPE probe_x histogram",
        'probe_x_count{model="probe"} 3',
        'probe_x_sum{model="probe"} 23.5',
        'probe_x_bucket{model="probe",le="1"} 1',
        'probe_x_bucket{model="probe",le="2.5"} 1',
        'probe_x_bucket{model="probe",le="10"} 2',
        'probe_x_bucket{model="probe",le="+Inf"} 3',
    ]
    client.close()


def test_bad_uses_raise_tritons_errors(served: Any) -> None:
    _server, out = served
    refused = "TritonModelException: {}: Failed to process the request for model 'probe_0_0', message: {}"
    assert _errors(out, "probe_0_0") == {
        "counter_negative": refused.format(
            "Failed to increment metric value",
            "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by non-negative values.",
        ),
        "counter_set": refused.format(
            "Failed to set metric value", "TRITONSERVER_METRIC_KIND_COUNTER does not support Set"
        ),
        "counter_observe": refused.format(
            "Failed to observe metric value", "TRITONSERVER_METRIC_KIND_COUNTER does not support Observe"
        ),
        "gauge_observe": refused.format(
            "Failed to observe metric value", "TRITONSERVER_METRIC_KIND_GAUGE does not support Observe"
        ),
        "histogram_increment": refused.format(
            "Failed to increment metric value", "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Increment"
        ),
        "histogram_set": refused.format(
            "Failed to set metric value", "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Set"
        ),
        "histogram_value": refused.format(
            "Failed to get metric value", "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Value"
        ),
        "histogram_without_buckets": "TritonModelException: Failed to create metric. Missing required buckets.",
        "counter_with_buckets": "TritonModelException: Failed to create metric. Unexpected buckets found.",
        "unsorted_buckets": refused.format("Error when creating Metric", "Bucket Boundaries must be strictly sorted"),
        "bad_label": refused.format("Error when creating Metric", "Invalid label name"),
        "bad_name": refused.format("Error when creating MetricFamily", "Invalid metric name"),
        "other_kind": refused.format(
            "Error when creating MetricFamily", "Family name already exists with different type"
        ),
        "same_kind": "ok 'MetricFamily'",
        "same_labels_same_metric": "ok 0.0",
        "kind_as_int": (
            "TypeError: __init__(): incompatible constructor arguments. The following argument types are "
            "supported:\n    1. c_python_backend_utils.MetricFamily(name: str, description: str, "
            "kind: c_python_backend_utils.MetricKind)\n\nInvoked with: kwargs: name='probe_k', description='x', kind=7"
        ),
        "gauge_decrement": "ok None",
    }


def test_instances_share_a_metric_and_unload_removes_it(served: Any) -> None:
    """Two instances (a worker each) update one metric per label set, as Triton's instances share
    it; unloading the model takes its families off /metrics."""
    server, out = served
    client = httpclient.InferenceServerClient(server.http_url)
    client.unload_model("probe")
    end = time.monotonic() + 60
    while _custom_lines(server):
        assert time.monotonic() < end, "the unloaded model's metrics stayed on /metrics"
        time.sleep(0.1)
    client.load_model("pair")
    _errors(out, "pair_0_0"), _errors(out, "pair_0_1")
    for x in (1.0, 2.0, 3.0, 4.0):
        _infer(client, "pair", x)
    lines = _custom_lines(server)
    # counts and sums add up over the instances, whichever ran what
    assert 'probe_requests_total{kind="a",model="probe"} 4' in lines
    assert "probe_requests_total 10" in lines
    assert 'probe_x_count{model="probe"} 4' in lines
    assert 'probe_x_sum{model="probe"} 10' in lines
    assert 'probe_x_bucket{model="probe",le="1"} 1' in lines
    assert 'probe_x_bucket{model="probe",le="+Inf"} 4' in lines
    assert 'probe_last_value{model="probe"} 4' in lines  # the latest set, whichever instance made it
    assert lines.count("# TYPE probe_x histogram") == 1
    client.unload_model("pair")
    end = time.monotonic() + 60
    while _custom_lines(server):
        assert time.monotonic() < end, "the unloaded model's metrics stayed on /metrics"
        time.sleep(0.1)
    client.close()
