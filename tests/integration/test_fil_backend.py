"""The fil backend, black-box: XGBoost, LightGBM and scikit-learn forests over HTTP and gRPC.

The models are trained here on scikit-learn's bundled breast-cancer data (569
rows, 30 features) and every answer is compared with the framework's own
``predict_proba`` / ``predict`` in this process. The example models of
``examples/fetch_models.py`` are served in ``test_framework_examples.py``.
"""

from __future__ import annotations

import concurrent.futures
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support import framework_models as fm
from tests.support.clients import module_server
from tests.support.repo import add_model
from tests.support.server import ServerProcess

FEATURES = 30


def _config(model_type: str, extra: str = "", dims: int = 2, io: bool = True) -> str:
    params = f'parameters {{ key: "model_type" value: {{ string_value: "{model_type}" }} }}\n' + extra
    if not io:
        return 'backend: "fil"\n' + params
    return (
        'backend: "fil"\nmax_batch_size: 64\n'
        f'input [ {{ name: "input__0" data_type: TYPE_FP32 dims: [ {FEATURES} ] }} ]\n'
        f'output [ {{ name: "output__0" data_type: TYPE_FP32 dims: [ {dims} ] }} ]\n'
        "dynamic_batching { max_queue_delay_microseconds: 200000 }\n" + params
    )


def _flag(key: str, value: str = "true") -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


@pytest.fixture(scope="module")
def trained() -> dict[str, Any]:
    import lightgbm
    import xgboost
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier

    x, y = load_breast_cancer(return_X_y=True)
    x = x.astype(np.float32)
    return {
        "x": x,
        "xgb": xgboost.XGBClassifier(n_estimators=40, max_depth=4, random_state=0).fit(x, y),
        "lgb": lightgbm.LGBMClassifier(n_estimators=40, num_leaves=15, random_state=0, verbose=-1).fit(x, y),
        "rf": RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0).fit(x, y),
    }


@pytest.fixture(scope="module")
def server(trained: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    import treelite

    def build(repo: Path) -> None:
        booster = trained["xgb"].get_booster()
        add_model(repo, "xgb_proba", _config("xgboost_json", _flag("predict_proba") + _flag("output_class")))
        booster.save_model(str(repo / "xgb_proba" / "1" / "xgboost.json"))
        add_model(repo, "xgb_class", _config("xgboost_ubj", _flag("output_class") + _flag("threshold", "0.3"), dims=1))
        booster.save_model(str(repo / "xgb_class" / "1" / "xgboost.ubj"))
        add_model(repo, "xgb_binary_name", _config("xgboost", dims=1))  # XGBoost 3 writes UBJSON to xgboost.model
        with warnings.catch_warnings():  # "Saving model in the UBJSON format as default"
            warnings.simplefilter("ignore", UserWarning)
            booster.save_model(str(repo / "xgb_binary_name" / "1" / "xgboost.model"))
        add_model(repo, "lgb_proba", _config("lightgbm", _flag("predict_proba") + _flag("output_class")))
        trained["lgb"].booster_.save_model(str(repo / "lgb_proba" / "1" / "model.txt"))
        add_model(
            repo,
            "rf_proba",
            _config(
                "treelite_checkpoint", _flag("predict_proba") + _flag("output_class") + _flag("storage_type", "DENSE")
            ),
        )
        treelite.sklearn.import_model(trained["rf"]).serialize(str(repo / "rf_proba" / "1" / "checkpoint.tl"))
        add_model(repo, "auto", _config("lightgbm", _flag("predict_proba") + _flag("output_class"), io=False))
        trained["lgb"].booster_.save_model(str(repo / "auto" / "1" / "model.txt"))
        add_model(repo, "bad_file", _config("xgboost_json"), files={"1/xgboost.json": "{not json"})
        add_model(repo, "bad_type", _config("catboost"))
        add_model(repo, "bad_dims", _config("lightgbm").replace(f"dims: [ {FEATURES} ]", "dims: [ 7 ]"))
        trained["lgb"].booster_.save_model(str(repo / "bad_dims" / "1" / "model.txt"))

    yield from module_server(tmp_path_factory.mktemp("fil"), build, ["--exit-on-error=false"])


def _infer(server: ServerProcess, protocol: str, model: str, x: np.ndarray) -> np.ndarray:
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    tensor = module.InferInput("input__0", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    try:
        return client.infer(model, [tensor]).as_numpy("output__0")
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(("model", "estimator"), [("xgb_proba", "xgb"), ("lgb_proba", "lgb"), ("rf_proba", "rf")])
def test_probabilities_equal_the_frameworks_predict_proba(
    server: ServerProcess, trained: dict[str, Any], model: str, estimator: str, protocol: str
) -> None:
    x = trained["x"][:40]
    got = _infer(server, protocol, model, x)
    expected = trained[estimator].predict_proba(x)
    assert got.shape == (40, 2) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=2e-6)


def test_output_class_uses_the_threshold_and_plain_output_is_the_probability(server: ServerProcess, trained) -> None:
    x = trained["x"][:64]
    p = trained["xgb"].predict_proba(x)[:, 1]
    np.testing.assert_array_equal(_infer(server, "http", "xgb_class", x)[:, 0], (p > 0.3).astype(np.float32))
    np.testing.assert_allclose(_infer(server, "grpc", "xgb_binary_name", x)[:, 0], p, rtol=0, atol=2e-6)


def test_auto_complete_fills_input_output_and_batching(server: ServerProcess, trained) -> None:
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("auto")
    assert config["max_batch_size"] == 4 and "dynamic_batching" in config
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [("input__0", "TYPE_FP32", [FEATURES])]
    assert [(o["name"], o["dims"]) for o in config["output"]] == [("output__0", [2])]
    x = trained["x"][100:103]
    np.testing.assert_allclose(_infer(server, "http", "auto", x), trained["lgb"].predict_proba(x), atol=2e-6)


def test_a_dynamic_batch_returns_each_request_its_rows(server: ServerProcess, trained) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    before = client.get_inference_statistics("lgb_proba")["model_stats"][0]
    slices = [slice(0, 1), slice(1, 6), slice(6, 9), slice(9, 10)]
    with concurrent.futures.ThreadPoolExecutor(len(slices)) as pool:
        results = list(pool.map(lambda s: _infer(server, "http", "lgb_proba", trained["x"][s]), slices))
    for s, got in zip(slices, results):
        np.testing.assert_allclose(got, trained["lgb"].predict_proba(trained["x"][s]), atol=2e-6)
    after = client.get_inference_statistics("lgb_proba")["model_stats"][0]
    assert int(after["execution_count"]) - int(before["execution_count"]) < len(slices)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("bad_file", "Internal: failed to load model 'bad_file' from '"),
        (
            "bad_type",
            "Invalid argument: unable to load model 'bad_type': unknown model_type 'catboost' (expected one of "
            "xgboost, xgboost_json, xgboost_ubj, lightgbm, treelite_checkpoint)",
        ),
        ("bad_dims", "unable to load model 'bad_dims': input 'input__0' has dims [7], the model takes 30 features"),
    ],
)
def test_broken_models_fail_to_load_with_the_reason(server: ServerProcess, model: str, message: str) -> None:
    line = next(line for line in server.log().splitlines() if f"failed to load '{model}' version 1: " in line)
    assert message in line
    assert httpclient.InferenceServerClient(server.http_url).is_model_ready("xgb_proba")


def test_gpu_layout_parameters_are_logged_as_ignored(server: ServerProcess) -> None:
    assert (
        "model 'rf_proba': parameter 'storage_type' tunes cuML FIL's GPU layout; the CPU predictor has no "
        "such setting (ignored)"
    ) in server.log()


def test_missing_treelite_is_a_clear_load_error(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    add_model(repo, "needs_treelite", _config("xgboost_json"), files={"1/xgboost.json": "{}"})
    server = ServerProcess(
        [repo],
        ["--exit-on-error=false"],
        log_path=tmp_path / "server.log",
        env=fm.without_package(tmp_path, "treelite"),
    )
    server.start()
    try:
        assert not httpclient.InferenceServerClient(server.http_url).is_model_ready("needs_treelite")
        assert (
            "failed to load 'needs_treelite' version 1: Unavailable: the fil backend needs the treelite "
            "package: pip install 'tritium[fil]' (No module named 'treelite')"
        ) in server.log()
    finally:
        server.stop()
