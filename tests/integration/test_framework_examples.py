"""The framework backends' real example models, served together from one model repository.

``examples/fetch_models.py`` builds EfficientNet-Lite0 as ONNX, TorchScript
and OpenVINO IR, all-MiniLM-L6-v2 as a python model and as TorchScript, and
an XGBoost and a LightGBM classifier trained on scikit-learn's breast-cancer
data; a TensorRT plan sits beside them. One server serves the mix (``model.onnx``,
``model.pt``, ``model.xml``, ``xgboost.json``, ``model.txt``, and an ensemble
mixing python, pytorch and openvino steps) through tritonclient, each answer checked against the framework run in this process;
on a machine without a GPU the TensorRT model fails to load with a message
naming what is missing, and the others keep serving.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support import framework_models as fm
from tests.support.server import ServerProcess
from tritium.core.model.devices import gpu_ids

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "examples"))
import framework_examples as fx  # noqa: E402  (examples/ is not a package)
import image_client  # noqa: E402

BUILT = ["efficientnet_ensemble_frameworks", "minilm", "minilm_torchscript", "breast_cancer_trees"]
SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("framework_examples")
    repo, images = root / "models", root / "images"
    command = [
        sys.executable,
        str(REPO_ROOT / "examples" / "fetch_models.py"),
        "--output",
        str(repo),
        "--images",
        str(images),
    ]
    for name in BUILT:
        command += ["--model", name]
    subprocess.run(command, check=True, capture_output=True, timeout=900)
    (repo / "engine" / "1").mkdir(parents=True)
    (repo / "engine" / "1" / "model.plan").write_bytes(b"a TensorRT plan needs a GPU")
    (repo / "engine" / "config.pbtxt").write_text(
        'platform: "tensorrt_plan"\nmax_batch_size: 8\n'
        'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    )
    return repo, images


@pytest.fixture(scope="module")
def server(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repo, _ = built
    proc = ServerProcess([repo], ["--exit-on-error=false"], log_path=tmp_path_factory.mktemp("log") / "server.log")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def coffee(built: tuple[Path, Path]) -> np.ndarray:
    img = image_client.load_image(built[1] / "coffee.jpg")
    return image_client.preprocess(img, "FORMAT_NCHW", "FP32", 3, 224, 224, "INCEPTION")[np.newaxis]


def _infer(server: ServerProcess, protocol: str, model: str, inputs: dict[str, np.ndarray], output: str) -> np.ndarray:
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    tensors = []
    for name, array in inputs.items():
        tensor = module.InferInput(name, list(array.shape), {"float32": "FP32", "int64": "INT64"}[array.dtype.name])
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    try:
        return client.infer(model, tensors).as_numpy(output)
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_torchscript_efficientnet_names_espresso_as_the_eager_model_does(server, built, coffee, protocol: str) -> None:
    logits = _infer(server, protocol, "efficientnet_lite0_torchscript", {"INPUT__0": coffee}, "OUTPUT__0")
    module = fm.load_torchscript(built[0] / "efficientnet_lite0_torchscript" / "1" / "model.pt")
    with torch.no_grad():
        expected = module(torch.from_numpy(coffee)).numpy()
    assert int(logits[0].argmax()) == 967  # espresso
    np.testing.assert_allclose(logits, expected, rtol=0, atol=1e-4)


def test_torchscript_classification_extension_uses_the_labels(server, coffee) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("INPUT__0", list(coffee.shape), "FP32")
    tensor.set_data_from_numpy(coffee, binary_data=True)
    result = client.infer(
        "efficientnet_lite0_torchscript",
        [tensor],
        outputs=[httpclient.InferRequestedOutput("OUTPUT__0", class_count=1)],
    )
    assert result.as_numpy("OUTPUT__0")[0][0].decode().endswith(":967:espresso")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_ensemble_mixing_python_pytorch_and_openvino_steps_names_both_photos(server, built, protocol: str) -> None:
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    data = np.array([[(built[1] / name).read_bytes()] for name in ("coffee.jpg", "cat.jpg")], dtype=np.object_)
    tensor = module.InferInput("IMAGE", list(data.shape), "BYTES")
    tensor.set_data_from_numpy(data)
    result = client.infer("efficientnet_ensemble_frameworks", [tensor])
    for output in ("LABEL_TORCHSCRIPT", "LABEL_OPENVINO"):
        assert result.as_numpy(output).reshape(-1).tolist() == [b"espresso", b"Egyptian cat"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_openvino_efficientnet_gives_onnxruntimes_top5(server, built, coffee, protocol: str) -> None:
    import onnxruntime as ort

    logits = _infer(server, protocol, "efficientnet_lite0_openvino", {"input": coffee}, "logits")
    onnx_path = built[0] / "efficientnet_lite0_onnx" / "1" / "model.onnx"
    expected = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(
        ["logits"], {"input": coffee}
    )[0]
    assert list(np.argsort(-logits[0])[:5]) == list(np.argsort(-expected[0])[:5])
    assert int(logits[0].argmax()) == 967
    np.testing.assert_allclose(logits, expected, rtol=0, atol=0.05)


def _tokens(built: tuple[Path, Path]) -> dict[str, np.ndarray]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(built[0] / "minilm_torchscript" / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    rows = tokenizer.encode_batch(SENTENCES)
    return {
        name: np.array([getattr(r, field) for r in rows], np.int64)
        for name, field in (("input_ids", "ids"), ("attention_mask", "attention_mask"), ("token_type_ids", "type_ids"))
    }


def test_minilm_torchscript_gives_the_python_models_similarities(server, built) -> None:
    embeddings = _infer(server, "grpc", "minilm_torchscript", _tokens(built), "embedding")
    client = httpclient.InferenceServerClient(server.http_url)
    text = httpclient.InferInput("TEXT", [len(SENTENCES), 1], "BYTES")
    text.set_data_from_numpy(np.array([[s.encode()] for s in SENTENCES], dtype=np.object_))
    python = client.infer("minilm", [text]).as_numpy("EMBEDDING")
    similarities = embeddings @ embeddings.T
    np.testing.assert_allclose(similarities, python @ python.T, rtol=0, atol=1e-5)
    assert abs(similarities[0, 1] - 0.755) < 0.005 and abs(similarities[0, 2] + 0.105) < 0.005


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(
    ("model", "train"), [("breast_cancer_xgboost", "train_xgboost"), ("breast_cancer_lightgbm", "train_lightgbm")]
)
def test_tree_models_equal_the_frameworks_predict_proba(server, protocol: str, model: str, train: str) -> None:
    x, _y = fx.breast_cancer()
    classifier = getattr(fx, train)()  # trained again, deterministically, as fetch_models.py did
    got = _infer(server, protocol, model, {"input__0": x[:100]}, "output__0")
    np.testing.assert_allclose(got, classifier.predict_proba(x[:100]), rtol=0, atol=2e-6)


def test_tensorrt_plan_without_a_gpu_fails_clearly_and_the_rest_serve(server) -> None:
    if gpu_ids():
        pytest.skip("this machine has a GPU: the TensorRT path is checked by scripts/gpu_check_tensorrt.sh")
    client = httpclient.InferenceServerClient(server.http_url)
    assert not client.is_model_ready("engine")
    assert (
        "failed to load 'engine' version 1: Unavailable: the tensorrt backend runs TensorRT engines on NVIDIA "
        "GPUs; this machine lacks an NVIDIA GPU with its driver"
    ) in server.log()
    for model in (
        "efficientnet_lite0_onnx",
        "efficientnet_lite0_torchscript",
        "efficientnet_lite0_openvino",
        "minilm_torchscript",
        "breast_cancer_xgboost",
        "breast_cancer_lightgbm",
    ):
        assert client.is_model_ready(model), model
