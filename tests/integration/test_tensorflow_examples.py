"""The tensorflow backend's real examples (``examples/fetch_models.py``), served by one server.

* ``simple``: Triton's example model as a frozen TF1 GraphDef, called the way NVIDIA's
  ``simple_http_infer_client.py`` / ``simple_grpc_infer_client.py`` call it;
* ``breast_cancer_keras``: a Keras classifier trained at build time; every row of the table sent
  as concurrent requests of mixed sizes through the dynamic batcher equals Keras's own ``predict``
  within 1e-5;
* ``efficientnet_lite0_savedmodel``: EfficientNet-Lite0 converted from ONNX with onnx2tf; the
  coffee photo gives ONNX Runtime's top-5 with logits within 1e-4.

Building the EfficientNet SavedModel installs onnx2tf once into ``~/.cache/tritium`` and converts
for about 1.5 minutes.
"""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support.server import ServerProcess
from tests.support.tensorflow_models import skip_without_tensorflow

skip_without_tensorflow()

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "examples"))
import tensorflow_examples as tx  # noqa: E402  (examples/ is not a package)

MODELS = ["simple", "breast_cancer_keras", "efficientnet_lite0_savedmodel"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("tensorflow_examples")
    repo, images = root / "models", root / "images"
    command = [sys.executable, str(REPO_ROOT / "examples" / "fetch_models.py"), "--output", str(repo)]
    command += ["--images", str(images)]
    for name in MODELS:
        command += ["--model", name]
    subprocess.run(command, check=True, capture_output=True, timeout=1200)
    return repo, images


@pytest.fixture(scope="module")
def server(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repo, _ = built
    proc = ServerProcess([repo], [], log_path=tmp_path_factory.mktemp("log") / "server.log")
    proc.start()
    yield proc
    proc.stop()


def _module(protocol: str):
    return httpclient if protocol == "http" else grpcclient


def _client(server: ServerProcess, protocol: str):
    return _module(protocol).InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_simple_answers_as_nvidias_simple_clients_expect(server: ServerProcess, protocol: str) -> None:
    module, client = _module(protocol), _client(server, protocol)
    input0 = np.arange(16, dtype=np.int32)[None]
    input1 = np.full((1, 16), -1, dtype=np.int32)
    inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(input0)
    inputs[1].set_data_from_numpy(input1)
    outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
    result = client.infer("simple", inputs, outputs=outputs, request_id="1")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), input0 + input1)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), input0 - input1)
    metadata = client.get_model_metadata("simple")
    platform = metadata["platform"] if protocol == "http" else metadata.platform
    assert platform == "tensorflow_graphdef"
    client.close()


def test_keras_classifier_through_the_dynamic_batcher_equals_keras_predict(
    server: ServerProcess, built: tuple[Path, Path]
) -> None:
    import keras

    features, _labels = tx.breast_cancer_data()
    expected = keras.saving.load_model(built[0] / "breast_cancer_keras" / "keras_model.keras").predict(
        features, verbose=0
    )
    sizes = [1, 7, 3, 16, 2, 5, 1, 30] * 20
    chunks, start = [], 0
    while start < len(features):
        size = sizes[len(chunks) % len(sizes)]
        chunks.append((start, features[start : start + size]))
        start += size

    def call(index: int, rows: np.ndarray) -> tuple[int, np.ndarray]:
        protocol = ("http", "grpc")[index % 2]
        module, client = _module(protocol), _client(server, protocol)
        tensor = module.InferInput("features", list(rows.shape), "FP32")
        tensor.set_data_from_numpy(rows)
        try:
            return index, client.infer("breast_cancer_keras", [tensor]).as_numpy("output_0")
        finally:
            client.close()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = dict(pool.map(lambda item: call(*item), chunks))
    got = np.concatenate([results[start] for start, _rows in chunks])
    assert got.shape == expected.shape == (569, 1)
    np.testing.assert_allclose(got, expected, rtol=0, atol=tx.KERAS_TOLERANCE)
    stats = httpclient.InferenceServerClient(server.http_url).get_inference_statistics("breast_cancer_keras")
    model_stats = stats["model_stats"][0]
    assert int(model_stats["inference_count"]) == 569
    assert int(model_stats["execution_count"]) < len(chunks)  # requests were batched together


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_efficientnet_savedmodel_gives_onnxruntimes_top5(
    server: ServerProcess, built: tuple[Path, Path], protocol: str
) -> None:
    import onnxruntime as ort

    repo, images = built
    nchw = tx.coffee_nchw(images / "coffee.jpg")
    nhwc = np.ascontiguousarray(nchw.transpose(0, 2, 3, 1))
    module, client = _module(protocol), _client(server, protocol)
    tensor = module.InferInput("input", list(nhwc.shape), "FP32")
    tensor.set_data_from_numpy(nhwc)
    logits = client.infer("efficientnet_lite0_savedmodel", [tensor]).as_numpy("output_0")
    client.close()
    session = ort.InferenceSession(str(repo / "efficientnet_lite0_onnx" / "1" / "model.onnx"))
    expected = session.run(["logits"], {"input": nchw})[0]
    assert list(np.argsort(-logits[0])[:5]) == list(np.argsort(-expected[0])[:5])
    assert list(np.argsort(-logits[0])[:5])[0] == 967  # espresso
    np.testing.assert_allclose(logits, expected, rtol=0, atol=tx.EFFICIENTNET_TOLERANCE)
