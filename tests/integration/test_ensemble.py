"""Ensembles of python models (L0_ensemble-style), black-box over HTTP and gRPC.

One tritium-server for the module serves tests/support/ensembles.py's models
plus ensembles whose configs are wrong in each way Triton checks (with
``--exit-on-error=false``, so the good ones serve). TRITON holds what real
Triton 2.51 (nvidia-pytriton 0.7.0, python backend) answered for the same
repository. Deliberate difference: an error in a step names the step
(``step 1 (model 'fail')``) after Triton's ``in ensemble '<name>', `` prefix;
Triton gives only the step's message.
"""

from __future__ import annotations

import queue
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.ensembles import add_ensemble, add_python, build_repo, step
from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess

X = np.arange(8, dtype=np.float32).reshape(2, 4)

#: real Triton 2.51's answers for the same models and requests
TRITON = {
    "ens_ok": [[2.0, 3.0, 4.0, 5.0]],
    "fail_message": "in ensemble 'ens_fail', step exploded",
    "decoupled_http": "HTTP end point doesn't support models with decoupled transaction policy",
    "decoupled_grpc": "ModelInfer RPC doesn't support models with decoupled transaction policy",
    "unknown": "Request for unknown model: '{}' is not found",
    "metadata": {
        "name": "ens_ok",
        "versions": ["1"],
        "platform": "ensemble",
        "inputs": [{"name": "IN", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "OUT", "datatype": "FP32", "shape": [-1, 4]}],
    },
    "config": {
        "name": "ens_ok",
        "platform": "ensemble",
        "backend": "",
        "runtime": "",
        "version_policy": {"latest": {"num_versions": 1}},
        "max_batch_size": 8,
        "input": [
            {
                "name": "IN",
                "data_type": "TYPE_FP32",
                "format": "FORMAT_NONE",
                "dims": [4],
                "is_shape_tensor": False,
                "allow_ragged_batch": False,
                "optional": False,
                "is_non_linear_format_io": False,
            }
        ],
        "output": [
            {
                "name": "OUT",
                "data_type": "TYPE_FP32",
                "dims": [4],
                "label_filename": "",
                "is_shape_tensor": False,
                "is_non_linear_format_io": False,
            }
        ],
        "batch_input": [],
        "batch_output": [],
        "ensemble_scheduling": {
            "step": [
                {
                    "model_name": "add_one",
                    "model_version": -1,
                    "input_map": {"INPUT0": "IN"},
                    "output_map": {"OUTPUT0": "mid"},
                    "model_namespace": "",
                },
                {
                    "model_name": "add_one",
                    "model_version": -1,
                    "input_map": {"INPUT0": "mid"},
                    "output_map": {"OUTPUT0": "OUT"},
                    "model_namespace": "",
                },
            ]
        },
        "instance_group": [],
        "default_model_filename": "",
        "cc_model_filenames": {},
        "metric_tags": {},
        "parameters": {},
        "model_warmup": [],
        "model_transaction_policy": {"decoupled": False},
    },
}

#: the config errors: model -> Triton 2.51's message for it
CONFIG_ERRORS = {
    "ens_cycle": "ensemble tensor 'b' is unused in ensemble 'ens_cycle'",
    "ens_notproduced": "output 'OUT' for ensemble 'ens_notproduced' is not written: at least one of its "
    "depending tensors, 'ghost', is not connected",
    "ens_unmapped": "ensemble output 'OUT' for ensemble ens_unmapped' is not used",
    "ens_unused_in": "ensemble input 'IN' for ensemble ens_unused_in' is not used",
    "ens_unknown": "ensemble ens_unknown contains models that are not available or ambiguous: nope",
    "ens_badinput": "in ensemble ens_badinput, ensemble tensor IN is mapping to non-existing input NOPE "
    "in model add_one",
    # a cycle on the way to an output: b = add2(a, c), c = add_one(b)
    "ens_loop": "output 'OUT' for ensemble 'ens_loop' is not written: at least one of its depending tensors, "
    "'b', is not connected",
    "ens_twice": "ensemble tensor 'OUT' can appear in an output map only once for ensemble 'ens_twice' step 1",
    "ens_dtype": "in ensemble ens_dtype, ensemble tensor IN: inconsistent data type: TYPE_INT32 is inferred from "
    "model ens_dtype while TYPE_FP32 is inferred from model add_one",
    "ens_missing_in": "in ensemble ens_missing_in, input INPUT1 in model add2 is not mapped to any ensemble tensors",
    "ens_mbs": "ensemble ens_mbs allows maximum batch size 8, but it contains model id4 which only allows maximum "
    "batch size to be 4",
}


def _bad_ensembles(root: Path) -> None:
    one = "add_one"
    add_ensemble(
        root,
        "ens_cycle",
        [
            step(one, {"INPUT0": "IN"}, {"OUTPUT0": "a"}),
            step(one, {"INPUT0": "b"}, {"OUTPUT0": "c"}),
            step(one, {"INPUT0": "c"}, {"OUTPUT0": "b"}),
            step(one, {"INPUT0": "a"}, {"OUTPUT0": "OUT"}),
        ],
    )
    add_ensemble(
        root,
        "ens_notproduced",
        [step(one, {"INPUT0": "IN"}, {"OUTPUT0": "mid"}), step(one, {"INPUT0": "ghost"}, {"OUTPUT0": "OUT"})],
    )
    add_ensemble(
        root,
        "ens_unmapped",
        [step(one, {"INPUT0": "IN"}, {"OUTPUT0": "mid"}), step(one, {"INPUT0": "mid"}, {"OUTPUT0": "other"})],
    )
    add_ensemble(root, "ens_unused_in", [step(one, {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})])
    add_ensemble(
        root,
        "ens_unknown",
        [step("nope", {"INPUT0": "IN"}, {"OUTPUT0": "mid"}), step(one, {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})],
    )
    add_ensemble(
        root,
        "ens_badinput",
        [step(one, {"NOPE": "IN"}, {"OUTPUT0": "mid"}), step(one, {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})],
    )
    add_ensemble(
        root,
        "ens_loop",
        [
            step(one, {"INPUT0": "IN"}, {"OUTPUT0": "a"}),
            step("add2", {"INPUT0": "a", "INPUT1": "c"}, {"OUTPUT0": "b"}),
            step(one, {"INPUT0": "b"}, {"OUTPUT0": "c"}),
            step(one, {"INPUT0": "c"}, {"OUTPUT0": "OUT"}),
        ],
    )
    add_ensemble(
        root,
        "ens_twice",
        [step(one, {"INPUT0": "IN"}, {"OUTPUT0": "OUT"}), step(one, {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})],
    )
    add_ensemble(root, "ens_dtype", [step(one, {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})])
    config = root / "ens_dtype" / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "IN" data_type: TYPE_FP32', 'name: "IN" data_type: TYPE_INT32'))
    add_ensemble(root, "ens_missing_in", [step("add2", {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})])
    add_model(root, "id4", identity_config("TYPE_FP32", "[ 4 ]", max_batch_size=4))
    add_ensemble(root, "ens_mbs", [step("id4", {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("ensembles")
    repo = build_repo(root / "models")
    _bad_ensembles(repo)
    proc = ServerProcess([repo], ["--exit-on-error=false"], log_path=root / "server.log")
    proc.start()
    try:
        client = httpclient.InferenceServerClient(proc.http_url)
        deadline = time.monotonic() + 120
        while not client.is_model_ready("ens_diamond"):
            assert time.monotonic() < deadline, proc.log()
            time.sleep(0.2)
        yield proc
    finally:
        proc.stop()


def _http_in(name: str = "IN", x: np.ndarray = X) -> list[httpclient.InferInput]:
    i = httpclient.InferInput(name, list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return [i]


def _grpc_in(name: str = "IN", x: np.ndarray = X) -> list[grpcclient.InferInput]:
    i = grpcclient.InferInput(name, list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return [i]


def _stats(server: ServerProcess, model: str) -> dict:
    return httpclient.InferenceServerClient(server.http_url).get_inference_statistics(model)["model_stats"][0]


def test_chain_gives_triton_answer_over_both_protocols(server):
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    http = httpclient.InferenceServerClient(server.http_url).infer("ens_ok", _http_in(x=x))
    grpc = grpcclient.InferenceServerClient(server.grpc_url).infer("ens_ok", _grpc_in(x=x))
    for result in (http, grpc):
        assert result.as_numpy("OUT").tolist() == TRITON["ens_ok"]
    assert http.get_response()["model_name"] == "ens_ok" and http.get_response()["model_version"] == "1"
    assert grpc.get_response().model_version == "1"


def test_diamond_runs_parallel_steps_and_joins_them(server):
    result = httpclient.InferenceServerClient(server.http_url).infer("ens_diamond", _http_in())
    np.testing.assert_array_equal(result.as_numpy("OUT"), 2 * (X + 1))


def test_an_ensemble_can_be_a_step_of_another(server):
    result = grpcclient.InferenceServerClient(server.grpc_url).infer("ens_nested", _grpc_in())
    np.testing.assert_array_equal(result.as_numpy("OUT"), X + 3)


def test_error_in_middle_step_fails_request_and_names_the_step(server):
    expected = "in ensemble 'ens_fail', step 1 (model 'fail'): step exploded"
    # Triton's message is the same without "step 1 (model 'fail'): " (a documented difference)
    assert expected.replace("step 1 (model 'fail'): ", "") == TRITON["fail_message"]
    with pytest.raises(InferenceServerException) as http_err:
        httpclient.InferenceServerClient(server.http_url).infer("ens_fail", _http_in())
    assert http_err.value.status() == "500" and http_err.value.message() == expected
    with pytest.raises(InferenceServerException) as grpc_err:
        grpcclient.InferenceServerClient(server.grpc_url).infer("ens_fail", _grpc_in())
    assert grpc_err.value.status() == "StatusCode.INTERNAL" and grpc_err.value.message() == expected
    # the server keeps serving, and the failure is counted for the ensemble
    assert httpclient.InferenceServerClient(server.http_url).infer("ens_ok", _http_in()).as_numpy("OUT").shape == (2, 4)
    assert _stats(server, "ens_fail")["inference_stats"]["fail"]["count"] >= 2


def test_bad_request_is_checked_against_the_ensemble_config(server):
    with pytest.raises(InferenceServerException) as err:
        httpclient.InferenceServerClient(server.http_url).infer("ens_ok", _http_in("WRONG"))
    assert err.value.status() == "400"
    assert err.value.message() == "unexpected inference input 'WRONG' for model 'ens_ok'"


def _stream(server: ServerProcess, model: str, request_id: str) -> list:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        client.async_stream_infer(model, _grpc_in(x=X[:1]), request_id=request_id, enable_empty_final_response=True)
        out = []
        while True:
            result, error = results.get(timeout=60)
            out.append((result, error))
            if error is not None:
                return out
            final = result.get_response().parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                return out
    finally:
        client.stop_stream()


def test_decoupled_ensemble_streams_each_response(server):
    got = _stream(server, "ens_dec", "r1")
    assert all(error is None for _, error in got)
    values = [r.as_numpy("OUT").tolist() for r, _ in got if r.get_response().outputs]
    x = X[:1]
    assert values == [(x * k + 1).tolist() for k in (1, 2, 3)]
    assert len(got) == 4 and not got[-1][0].get_response().outputs  # then the final flag alone
    assert {r.get_response().id for r, _ in got} == {"r1"}
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("ens_dec")
    assert config["model_transaction_policy"] == {"decoupled": True}  # as Triton sets it


def test_decoupled_ensemble_refused_by_unary_calls_as_in_triton(server):
    with pytest.raises(InferenceServerException) as http_err:
        httpclient.InferenceServerClient(server.http_url).infer("ens_dec", _http_in())
    assert http_err.value.status() == "501" and http_err.value.message() == TRITON["decoupled_http"]
    with pytest.raises(InferenceServerException) as grpc_err:
        grpcclient.InferenceServerClient(server.grpc_url).infer("ens_dec", _grpc_in())
    assert grpc_err.value.message() == TRITON["decoupled_grpc"]
    assert grpc_err.value.status() == "StatusCode.UNIMPLEMENTED"


def test_stream_error_names_the_step(server):
    got = _stream(server, "ens_fail", "e1")
    assert len(got) == 1 and got[0][1] is not None
    assert "in ensemble 'ens_fail', step 1 (model 'fail'): step exploded" in str(got[0][1])


def test_metadata_and_config_as_triton(server):
    client = httpclient.InferenceServerClient(server.http_url)
    assert client.get_model_metadata("ens_ok") == TRITON["metadata"]
    assert client.get_model_config("ens_ok") == TRITON["config"]
    assert client.is_model_ready("ens_ok")


def test_statistics_per_composing_model_and_for_the_ensemble(server):
    before_one, before_ens = _stats(server, "add_one"), _stats(server, "ens_ok")
    client = grpcclient.InferenceServerClient(server.grpc_url)
    for _ in range(3):
        client.infer("ens_ok", _grpc_in())
    after_one, after_ens = _stats(server, "add_one"), _stats(server, "ens_ok")
    success = lambda s: s["inference_stats"]["success"]["count"]  # noqa: E731
    assert success(after_one) - success(before_one) == 6  # two add_one steps per request
    assert success(after_ens) - success(before_ens) == 3
    # Triton 2.51 counted 6 inferences and 3 executions for three requests of batch 2 to this ensemble
    assert after_ens["inference_count"] - before_ens["inference_count"] == 6
    assert after_ens["execution_count"] - before_ens["execution_count"] == 3


def test_config_errors_fail_the_ensemble_with_triton_messages(server):
    log = server.log()
    client = httpclient.InferenceServerClient(server.http_url)
    for model, message in CONFIG_ERRORS.items():
        assert message in log, model
        assert not client.is_model_ready(model)
        with pytest.raises(InferenceServerException) as err:
            client.infer(model, _http_in())
        assert err.value.message() == TRITON["unknown"].format(model)


def test_config_error_stops_the_server_by_default(tmp_path):
    repo = tmp_path / "models"
    add_ensemble(repo, "ens_unused_in", [step("add_one", {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})])
    proc = ServerProcess([repo], log_path=tmp_path / "server.log")
    proc.start(wait_ready=False)
    try:
        assert proc.wait_exit(120) == 1
    finally:
        proc.stop()
    assert f"ens_unused_in: {CONFIG_ERRORS['ens_unused_in']}" in proc.log()


def test_ensemble_not_ready_while_a_composing_model_is_down(tmp_path):
    """An ensemble is ready only while its composing models are (a killed worker makes it not ready)."""
    repo = tmp_path / "models"
    add_python(repo, "add_one", "import os\n" + _PID_MODEL)
    add_ensemble(repo, "ens_one", [step("add_one", {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})])
    with ServerProcess([repo], log_path=tmp_path / "server.log") as proc:
        client = httpclient.InferenceServerClient(proc.http_url)
        deadline = time.monotonic() + 120
        while not client.is_model_ready("ens_one"):
            assert time.monotonic() < deadline, proc.log()
            time.sleep(0.2)
        pid = int(client.infer("add_one", _http_in("INPUT0")).as_numpy("OUTPUT0")[0, 0])
        import os
        import signal

        os.kill(pid, signal.SIGKILL)  # the worker this test's server started
        deadline = time.monotonic() + 60
        seen_down = False
        while time.monotonic() < deadline:
            if not client.is_model_ready("add_one"):
                seen_down = True
                assert not client.is_model_ready("ens_one") or client.is_model_ready("add_one")
                break
            time.sleep(0.02)
        # the instance comes back (restart), and with it the ensemble
        deadline = time.monotonic() + 120
        while not client.is_model_ready("ens_one"):
            assert time.monotonic() < deadline, proc.log()
            time.sleep(0.2)
        assert seen_down or "restart" in proc.log().lower()


_PID_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        pid = np.full((1, 4), os.getpid(), np.float32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pid)]) for r in requests]
"""


def test_metrics_list_the_ensemble_and_its_models(server):
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    assert 'nv_inference_request_success{model="ens_ok",version="1"}' in text
    assert 'nv_inference_request_success{model="add_one",version="1"}' in text


def test_classification_extension_on_an_ensemble_output_as_triton(server):
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    out = httpclient.InferRequestedOutput("OUT", class_count=2)
    result = httpclient.InferenceServerClient(server.http_url).infer("ens_ok", _http_in(x=x), outputs=[out])
    assert result.as_numpy("OUT").tolist() == [[b"5.000000:3", b"4.000000:2"]]  # Triton 2.51's answer
