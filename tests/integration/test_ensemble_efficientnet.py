"""The ensemble example end to end: encoded photo -> python pre-processing -> onnxruntime
EfficientNet-Lite0 -> python post-processing -> ImageNet label, against the direct path.

The repository is built by ``examples/fetch_models.py --model efficientnet_ensemble`` (which
builds the EfficientNet model too) into a temporary folder.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.server import ServerProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
ENSEMBLE, MODEL = "efficientnet_ensemble", "efficientnet_lite0_onnx"
sys.path.insert(0, str(REPO_ROOT / "examples"))
import image_client  # noqa: E402  (examples/ is not a package)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("ensemble_efficientnet")
    repo, images = root / "models", root / "images"
    subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "examples" / "fetch_models.py"),
            "--model",
            ENSEMBLE,
            "--output",
            str(repo),
            "--images",
            str(images),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return repo, images


@pytest.fixture(scope="module")
def server(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    repo, _ = built
    proc = ServerProcess([repo], log_path=tmp_path_factory.mktemp("log") / "server.log")
    proc.start()
    try:
        client = httpclient.InferenceServerClient(proc.http_url)
        deadline = time.monotonic() + 120
        while not client.is_model_ready(ENSEMBLE):
            assert time.monotonic() < deadline, proc.log()
            time.sleep(0.2)
        yield proc
    finally:
        proc.stop()


def _direct_top1(server: ServerProcess, path: Path) -> int:
    """The top-1 class of the direct path: client-side pre-processing, then the ONNX model alone."""
    batch = image_client.preprocess(image_client.load_image(str(path)), "FORMAT_NCHW", "FP32", 3, 224, 224, "INCEPTION")
    inp = httpclient.InferInput("input", [1, 3, 224, 224], "FP32")
    inp.set_data_from_numpy(batch[np.newaxis], binary_data=True)
    logits = httpclient.InferenceServerClient(server.http_url).infer(MODEL, [inp]).as_numpy("logits")
    return int(logits[0].argmax())


def _images(paths: list[Path]) -> np.ndarray:
    return np.array([[p.read_bytes()] for p in paths], dtype=np.object_)


def test_same_top1_as_the_direct_path_over_both_protocols(built, server):
    _, images = built
    photos = [images / "coffee.jpg", images / "cat.jpg"]
    direct = [_direct_top1(server, p) for p in photos]
    assert direct == [967, 285]  # espresso, Egyptian cat
    data = _images(photos)
    hin = httpclient.InferInput("IMAGE", list(data.shape), "BYTES")
    hin.set_data_from_numpy(data)
    http = httpclient.InferenceServerClient(server.http_url).infer(ENSEMBLE, [hin])
    gin = grpcclient.InferInput("IMAGE", list(data.shape), "BYTES")
    gin.set_data_from_numpy(data)
    grpc = grpcclient.InferenceServerClient(server.grpc_url).infer(ENSEMBLE, [gin])
    for result in (http, grpc):
        assert result.as_numpy("CLASS_ID").reshape(-1).tolist() == direct
        assert result.as_numpy("LABEL").reshape(-1).tolist() == [b"espresso", b"Egyptian cat"]


def test_the_documented_client(built, server):
    _, images = built
    for protocol, url in (("http", server.http_url), ("grpc", server.grpc_url)):
        result = subprocess.run(
            [
                sys.executable,
                str(REPO_ROOT / "examples" / "ensemble_client.py"),
                "-i",
                protocol,
                "-u",
                url,
                str(images / "coffee.jpg"),
                str(images / "cat.jpg"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [
            f"{images / 'coffee.jpg'}: (967) = espresso",
            f"{images / 'cat.jpg'}: (285) = Egyptian cat",
        ]


def test_a_failing_step_is_named(server):
    data = np.array([[b"not an image"]], dtype=np.object_)
    inp = httpclient.InferInput("IMAGE", [1, 1], "BYTES")
    inp.set_data_from_numpy(data)
    with pytest.raises(InferenceServerException) as err:
        httpclient.InferenceServerClient(server.http_url).infer(ENSEMBLE, [inp])
    assert err.value.status() == "500"
    assert err.value.message() == (
        "in ensemble 'efficientnet_ensemble', step 0 (model 'image_preprocess'): "
        "cannot decode IMAGE: not an image file Pillow can read"
    )


def test_each_composing_model_counts_the_ensemble_requests(built, server):
    _, images = built
    client = httpclient.InferenceServerClient(server.http_url)

    def successes(model: str) -> int:
        return client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]["success"]["count"]

    models = [ENSEMBLE, "image_preprocess", MODEL, "label_postprocess"]
    before = [successes(m) for m in models]
    data = _images([images / "coffee.jpg"])
    inp = httpclient.InferInput("IMAGE", [1, 1], "BYTES")
    inp.set_data_from_numpy(data)
    for _ in range(2):
        client.infer(ENSEMBLE, [inp])
    assert [successes(m) - b for m, b in zip(models, before)] == [2, 2, 2, 2]
