"""The config ``parameters`` of the openvino, fil and tensorflow backends, parsed and checked (no framework needed).

The black-box suites load models with these parameters; this checks every
accepted form and each refusal's message directly.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tritium.core.backend.api import Backend, Model
from tritium.core.errors import TritonError

ROOT = Path(__file__).resolve().parents[4]


def _backend(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"tritium_backend_{name}_params", ROOT / f"backends/{name}/libtriton_{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


openvino, fil = _backend("openvino"), _backend("fil")


def _model(**parameters: str) -> Model:
    config = {"name": "m", "parameters": {k: {"string_value": v} for k, v in parameters.items()}}
    return Model("m", 1, config, "/nonexistent", Backend("b", "", {}), False)


def test_openvino_parameters_become_compile_properties() -> None:
    model = _model(
        NUM_STREAMS="2", PERFORMANCE_HINT="throughput", INFERENCE_NUM_THREADS="3", INFERENCE_PRECISION_HINT="F32"
    )
    assert openvino._compile_options(model) == {
        "NUM_STREAMS": "2",
        "PERFORMANCE_HINT": "THROUGHPUT",
        "INFERENCE_NUM_THREADS": "3",
        "INFERENCE_PRECISION_HINT": "f32",
    }
    assert openvino._compile_options(_model(NUM_STREAMS="auto")) == {"NUM_STREAMS": "AUTO"}
    assert openvino._compile_options(_model()) == {}
    assert openvino._yes_no(_model(ENABLE_BATCH_PADDING="yes"), "ENABLE_BATCH_PADDING") is True
    assert openvino._yes_no(_model(RESHAPE_IO_LAYERS="NO"), "RESHAPE_IO_LAYERS") is False


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"NUM_STREAMS": "zero"}, "failed to convert 'NUM_STREAMS' of model 'm' to an integer: 'zero'"),
        ({"NUM_STREAMS": "0"}, "parameter 'NUM_STREAMS' of model 'm' must be >= 1, got 0"),
        (
            {"INFERENCE_PRECISION_HINT": "int4"},
            "parameter 'INFERENCE_PRECISION_HINT' of model 'm' must be one of f32, bf16, f16",
        ),
        (
            {"ENABLE_BATCH_PADDING": "true"},
            "parameter 'ENABLE_BATCH_PADDING' of model 'm' must be YES or NO, got 'true'",
        ),
    ],
)
def test_openvino_refusals(parameters: dict[str, str], message: str) -> None:
    with pytest.raises(TritonError) as info:
        openvino.TRITONBACKEND_ModelInitialize(_model(**parameters))
    assert message in info.value.message


def test_fil_parameters() -> None:
    settings = fil._settings(
        _model(model_type="lightgbm", output_class="true", predict_proba="false", threshold="0.25", cpu_nthread="2")
    )
    assert settings == {
        "model_type": "lightgbm",
        "output_class": True,
        "predict_proba": False,
        "threshold": 0.25,
        "threads": 2,
    }
    assert fil._settings(_model(model_type="xgboost"))["threshold"] == 0.5


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        (
            {},
            "the fil backend needs parameter 'model_type' (xgboost, xgboost_json, xgboost_ubj, lightgbm, treelite_checkpoint)",
        ),
        (
            {"model_type": "xgboost", "threshold": "half"},
            "failed to convert 'threshold' of model 'm' to a number: 'half'",
        ),
        (
            {"model_type": "xgboost", "output_class": "sure"},
            "failed to convert 'output_class' of model 'm' to a boolean: 'sure'",
        ),
    ],
)
def test_fil_refusals(parameters: dict[str, str], message: str) -> None:
    with pytest.raises(TritonError) as info:
        fil._settings(_model(**parameters))
    assert message in info.value.message


def test_fil_output_follows_the_parameters() -> None:
    import numpy as np

    scores = np.array([[0.2], [0.8]])
    proba = fil._postprocess({"predict_proba": True, "output_class": True, "threshold": 0.5}, scores)
    np.testing.assert_allclose(proba, [[0.8, 0.2], [0.2, 0.8]])
    classes = fil._postprocess({"predict_proba": False, "output_class": True, "threshold": 0.7}, scores)
    assert classes.tolist() == [[0.0], [1.0]]
    multiclass = fil._postprocess(
        {"predict_proba": False, "output_class": True, "threshold": 0.5}, np.array([[0.1, 0.7, 0.2]])
    )
    assert multiclass.tolist() == [[1.0]]
    plain = fil._postprocess({"predict_proba": False, "output_class": False, "threshold": 0.5}, scores)
    assert plain.dtype == np.float32 and plain.tolist() == scores.astype(np.float32).tolist()


tensorflow = _backend("tensorflow")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"version": "1"},
            "starting from 23.04, Triton no longer supports Tensorflow 1. Please switch to Tensorflow 2.",
        ),
        ({"version": "3"}, "unexpected TensorFlow library version '3', expects 2."),
        (
            {"allow-soft-placement": "maybe"},
            "failed to convert 'allow-soft-placement' of the tensorflow backend to a boolean: 'maybe'",
        ),
        (
            {"gpu-memory-fraction": "half"},
            "failed to convert 'gpu-memory-fraction' of the tensorflow backend to a number: 'half'",
        ),
        ({"gpu-memory-fraction": "1.5"}, "'gpu-memory-fraction' must be between 0 and 1, got 1.5"),
    ],
)
def test_tensorflow_backend_config_refusals(config: dict[str, str], message: str) -> None:
    with pytest.raises(TritonError) as err:
        tensorflow._backend_settings(config)
    assert err.value.message == message


def test_tensorflow_backend_config_values() -> None:
    assert tensorflow._backend_settings({}) == {"allow_soft_placement": True, "gpu_memory_fraction": 0.0}
    assert tensorflow._backend_settings(
        {"version": "2", "allow-soft-placement": "false", "gpu-memory-fraction": "0.25"}
    ) == {"allow_soft_placement": False, "gpu_memory_fraction": 0.25}


def test_tensorflow_model_parameters() -> None:
    settings = tensorflow._model_settings(
        _model(TF_NUM_INTRA_THREADS="2", TF_NUM_INTER_THREADS="3", TF_USE_PER_SESSION_THREADS="on", TF_GRAPH_TAG="x")
    )
    assert settings["intra_threads"] == 2 and settings["inter_threads"] == 3
    assert settings["per_session_threads"] is True and settings["graph_tag"] == "x"
    assert settings["share"] == 1 and settings["jit_level"] == 0


def test_tensorflow_kind_gpu_without_a_gpu_names_what_is_missing() -> None:
    from tritium.core.backend.api import ModelInstance

    model = _model()
    model.state = {"settings": {"gpu_accelerators": [], "jit_level": 0}}
    model.backend.state = {"gpus": 0, "version": "2.19.1"}
    with pytest.raises(TritonError) as err:
        tensorflow._device(model, ModelInstance("m_0_0", "KIND_GPU", 0, model))
    assert err.value.message == (
        "model 'm' has a KIND_GPU instance, but this TensorFlow (2.19.1) sees no GPU (the tensorflow-cpu package, "
        "or no NVIDIA GPU, driver or CUDA libraries here): pip install 'tritium[tensorflow-gpu]' on a machine "
        "with an NVIDIA GPU, or use KIND_CPU"
    )
    assert tensorflow._device(model, ModelInstance("m_0_0", "KIND_CPU", 0, model)) == "/device:CPU:0"
    model.backend.state = {"gpus": 1, "version": "2.19.1"}
    assert tensorflow._device(model, ModelInstance("m_0_0", "KIND_GPU", 0, model)) == "/device:GPU:0"


def test_tensorflow_xla_on_cpu_without_the_flag_warns(caplog: pytest.LogCaptureFixture, monkeypatch) -> None:
    from tritium.core.backend.api import ModelInstance

    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    model = _model()
    model.state = {"settings": {"gpu_accelerators": [], "jit_level": 1}}
    with caplog.at_level("WARNING", logger="tritium.backend.tensorflow"):
        assert tensorflow._device(model, ModelInstance("m_0_0", "KIND_CPU", 0, model)) == "/device:CPU:0"
    assert caplog.messages == [
        "model 'm': XLA global_jit_level 1 is set, but TensorFlow clusters CPU operations for XLA only with "
        "TF_XLA_FLAGS=--tf_xla_cpu_global_jit in the server's environment"
    ]
    caplog.clear()
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_cpu_global_jit")
    with caplog.at_level("WARNING", logger="tritium.backend.tensorflow"):
        tensorflow._device(model, ModelInstance("m_0_0", "KIND_CPU", 0, model))
    assert caplog.messages == []
