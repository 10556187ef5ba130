"""The ``fil`` backend: tree ensembles (XGBoost, LightGBM, scikit-learn forests) as Triton's FIL backend serves them.

Behaves like Triton's FIL (RAPIDS Forest Inference Library) backend where it
matters to users, on the CPU:

* config ``parameters`` (string values): ``model_type`` — ``xgboost``
  (``xgboost.model``, XGBoost's binary format; a UBJSON file saved under that
  name by XGBoost 3 is read too), ``xgboost_json`` (``xgboost.json``),
  ``xgboost_ubj`` (``xgboost.ubj``), ``lightgbm`` (``model.txt``),
  ``treelite_checkpoint`` (``checkpoint.tl``, e.g. a scikit-learn forest
  converted with ``treelite.sklearn.import_model(...).serialize(...)``);
  ``output_class`` (``true``: a classifier), ``predict_proba`` (``true``: one
  probability per class), ``threshold`` (binary classifiers: class 1 when the
  probability is above it, default 0.5); ``cpu_nthread`` (threads, default all);
* input ``input__0`` FP32 ``[num_features]``, output ``output__0`` FP32:
  ``[num_classes]`` probabilities with ``predict_proba`` (``[1 - p, p]`` for a
  binary classifier), the class index ``[1]`` with ``output_class`` only, the
  model's prediction ``[1]`` otherwise (a regressor's value; a binary
  classifier's probability of class 1);
* auto-complete: ``input__0``/``output__0`` with those dims, ``max_batch_size``
  (``--backend-config`` ``default-max-batch-size``, 4 by default) and
  ``dynamic_batching {}``;
* the GPU layout parameters of cuML's FIL (``algo``, ``storage_type``,
  ``threads_per_tree``, ``blocks_per_sm``, ``transfer_threshold``,
  ``use_experimental_optimizations``) have no counterpart in a CPU predictor:
  they are logged as ignored at load.

Prediction: Treelite's CPU predictor (GTIL); LightGBM models with LightGBM's
own predictor when the ``lightgbm`` package is installed (as fast at one row
and several times faster on large batches, measured: docs/performance.md).
A batch of requests is one call. Runs in the worker process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from tritium.core.backend.api import Model, ModelInstance, Request
from tritium.core.backend.framework import bool_parameter, import_framework, int_parameter, model_file, run_batched
from tritium.core.errors import Code, TritonError

log = logging.getLogger("tritium.backend.fil")

#: model_type -> default file name (Triton's FIL backend)
MODEL_FILES = {
    "xgboost": "xgboost.model",
    "xgboost_json": "xgboost.json",
    "xgboost_ubj": "xgboost.ubj",
    "lightgbm": "model.txt",
    "treelite_checkpoint": "checkpoint.tl",
}
_GPU_LAYOUT = (
    "algo",
    "storage_type",
    "threads_per_tree",
    "blocks_per_sm",
    "transfer_threshold",
    "use_experimental_optimizations",
)
INPUT, OUTPUT = "input__0", "output__0"


def _treelite() -> Any:
    return import_framework("treelite", "fil", "pip install 'tritium[fil]'")


def _settings(model: Model) -> dict[str, Any]:
    model_type = model.parameter("model_type")
    if model_type is None:
        raise TritonError(
            Code.INVALID_ARG,
            f"unable to load model '{model.name}': the fil backend needs parameter 'model_type' "
            f"({', '.join(MODEL_FILES)})",
        )
    if model_type not in MODEL_FILES:
        raise TritonError(
            Code.INVALID_ARG,
            f"unable to load model '{model.name}': unknown model_type '{model_type}' (expected one of "
            f"{', '.join(MODEL_FILES)})",
        )
    threshold_text = model.parameter("threshold", "0.5") or "0.5"
    try:
        threshold = float(threshold_text)
    except ValueError:
        raise TritonError(
            Code.INVALID_ARG, f"failed to convert 'threshold' of model '{model.name}' to a number: '{threshold_text}'"
        ) from None
    for key in _GPU_LAYOUT:
        if model.parameter(key) is not None:
            log.info(
                "model '%s': parameter '%s' tunes cuML FIL's GPU layout; the CPU predictor has no such "
                "setting (ignored)",
                model.name,
                key,
            )
    return {
        "model_type": model_type,
        "output_class": bool_parameter(model, "output_class", False),
        "predict_proba": bool_parameter(model, "predict_proba", False),
        "threshold": threshold,
        "threads": int_parameter(model, "cpu_nthread", -1),
    }


def _load_treelite(treelite: Any, model_type: str, path: str) -> Any:
    frontend = treelite.frontend
    if model_type == "xgboost":
        try:
            return frontend.load_xgboost_model_legacy_binary(path)
        except treelite.TreeliteError:
            return frontend.load_xgboost_model(path, format_choice="ubjson")  # XGBoost 3 saves UBJSON here
    if model_type == "xgboost_json":
        return frontend.load_xgboost_model(path, format_choice="json")
    if model_type == "xgboost_ubj":
        return frontend.load_xgboost_model(path, format_choice="ubjson")
    if model_type == "lightgbm":
        return frontend.load_lightgbm_model(path)
    return treelite.Model.deserialize(path)


def _predictor(settings: dict[str, Any], path: str) -> tuple[Callable[[np.ndarray], np.ndarray], int]:
    """``(predict(x FP32 [n, features]) -> scores FP64/FP32 [n, k], number of features)``.

    ``k`` is 1 for a regressor or a binary classifier scoring class 1, else the
    number of classes.
    """
    treelite = _treelite()
    threads = settings["threads"]
    model = _load_treelite(treelite, settings["model_type"], path)
    features = int(model.num_feature)
    if settings["model_type"] == "lightgbm":
        try:
            import lightgbm
        except ImportError:
            pass  # treelite's GTIL below
        else:
            booster = lightgbm.Booster(model_file=path)
            options = {"num_threads": threads} if threads > 0 else {}

            def predict_lgb(x: np.ndarray) -> np.ndarray:
                scores = np.asarray(booster.predict(x, **options))
                return scores.reshape(len(x), -1)

            return predict_lgb, features

    def predict_gtil(x: np.ndarray) -> np.ndarray:
        scores = treelite.gtil.predict(model, x, nthread=threads)
        return scores.reshape(len(x), -1)

    return predict_gtil, features


def _output_dims(settings: dict[str, Any], classes: int) -> list[int]:
    if settings["predict_proba"]:
        return [2 if classes == 1 else classes]
    return [1]


def TRITONBACKEND_ModelInitialize(model: Model) -> None:
    settings = _settings(model)
    path = model_file(model, MODEL_FILES[settings["model_type"]])
    try:
        predict, features = _predictor(settings, str(path))
        classes = predict(np.zeros((1, features), np.float32)).shape[1]
    except TritonError:
        raise
    except Exception as exc:
        raise TritonError(Code.INTERNAL, f"failed to load model '{model.name}' from '{path}': {exc}") from None
    model.state = {"settings": settings, "path": str(path), "features": features, "classes": classes}
    if model.auto_complete_config and not (model.config.get("input") and model.config.get("output")):
        config = dict(model.config)
        if int(config.get("max_batch_size", 0)) == 0:
            config["max_batch_size"] = int(model.backend.config.get("default-max-batch-size", "4"))
            if "dynamic_batching" not in config and "sequence_batching" not in config:
                config["dynamic_batching"] = {}
        if not config.get("input"):
            config["input"] = [{"name": INPUT, "data_type": "TYPE_FP32", "dims": [features]}]
        if not config.get("output"):
            config["output"] = [{"name": OUTPUT, "data_type": "TYPE_FP32", "dims": _output_dims(settings, classes)}]
        model.set_config(config)


def _check_config(model: Model) -> None:
    """``input__0`` FP32 ``[num_features]`` and ``output__0`` FP32, as Triton's FIL backend requires."""
    state = model.state
    inputs = {str(i["name"]): i for i in model.config.get("input", [])}
    outputs = {str(o["name"]): o for o in model.config.get("output", [])}
    if int(model.config.get("max_batch_size", 0)) <= 0:
        raise TritonError(
            Code.INVALID_ARG, f"unable to load model '{model.name}': the fil backend needs max_batch_size > 0"
        )
    if set(inputs) != {INPUT} or inputs[INPUT].get("data_type") != "TYPE_FP32":
        raise TritonError(
            Code.INVALID_ARG,
            f"unable to load model '{model.name}': the fil backend takes one input '{INPUT}' of TYPE_FP32",
        )
    dims = [int(d) for d in inputs[INPUT].get("dims", [])]
    if dims not in ([state["features"]], [-1]):
        raise TritonError(
            Code.INVALID_ARG,
            f"unable to load model '{model.name}': input '{INPUT}' has dims {dims}, the model takes "
            f"{state['features']} features",
        )
    if set(outputs) != {OUTPUT} or outputs[OUTPUT].get("data_type") != "TYPE_FP32":
        raise TritonError(
            Code.INVALID_ARG,
            f"unable to load model '{model.name}': the fil backend gives one output '{OUTPUT}' of TYPE_FP32",
        )


def TRITONBACKEND_ModelInstanceInitialize(instance: ModelInstance) -> None:
    model = instance.model
    if instance.kind == "KIND_GPU":
        raise TritonError(
            Code.UNSUPPORTED,
            f"model '{model.name}': the fil backend predicts on the CPU (Treelite); use KIND_CPU",
        )
    _check_config(model)
    predict, _features = _predictor(model.state["settings"], model.state["path"])
    instance.state = {"predict": predict}


def _postprocess(settings: dict[str, Any], scores: np.ndarray) -> np.ndarray:
    """Scores ``[n, k]`` -> ``output__0`` as the parameters ask (FP32)."""
    binary = scores.shape[1] == 1
    if settings["predict_proba"]:
        probs = np.concatenate([1.0 - scores, scores], axis=1) if binary else scores
        return probs.astype(np.float32)
    if settings["output_class"]:
        if binary:
            return (scores > settings["threshold"]).astype(np.float32)
        return scores.argmax(axis=1).reshape(-1, 1).astype(np.float32)
    return scores[:, :1].astype(np.float32) if binary else scores.astype(np.float32)


def TRITONBACKEND_ModelInstanceExecute(instance: ModelInstance, requests: list[Request]) -> None:
    settings = instance.model.state["settings"]
    features = instance.model.state["features"]
    predict = instance.state["predict"]

    def run(inputs: dict[str, np.ndarray], wanted: list[str]) -> dict[str, np.ndarray]:
        del wanted
        x = inputs[INPUT]
        if x.ndim != 2 or x.shape[1] != features:
            raise TritonError(Code.INVALID_ARG, f"input '{INPUT}' must be [batch, {features}], got {list(x.shape)}")
        return {OUTPUT: _postprocess(settings, predict(x))}

    results = run_batched(requests, True, run, [OUTPUT], f"fil execute failure for model '{instance.model.name}'")
    for request, outputs in zip(requests, results):
        request.respond(outputs)
