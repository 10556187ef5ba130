"""The sequence-batcher example (examples/sequence_models/streaming_mean) answers as documented."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support.server import ServerProcess

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sequence_models"


def _client_module() -> Any:
    spec = importlib.util.spec_from_file_location("stream_client", EXAMPLE / "stream_client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log = tmp_path_factory.mktemp("sequence_example") / "server.log"
    proc = ServerProcess([EXAMPLE], [], log_path=log).start()
    try:
        yield proc
    finally:
        proc.stop()


def _expected(example: Any, audio: np.ndarray) -> np.ndarray:
    chunk = example.CHUNK
    return np.cumsum(audio.astype(np.float64))[chunk - 1 :: chunk] / np.arange(chunk, audio.size + 1, chunk)


def test_interleaved_streams_give_numpy_running_means(server: ServerProcess) -> None:
    example = _client_module()
    # (protocol, sequence id, seconds of audio, noise seed): three streams at once, both protocols
    streams = [("http", 1, 0.6, 0), ("grpc", "utterance-b", 0.4, 1), ("http", 3, 0.3, 2)]
    out: dict[Any, Any] = {}

    def run(protocol: str, sequence_id: Any, seconds: float, seed: int) -> None:
        module = httpclient if protocol == "http" else grpcclient
        url = server.http_url.replace("http://", "") if protocol == "http" else server.grpc_url
        client = module.InferenceServerClient(url)
        try:
            out[sequence_id] = example.stream(module, client, sequence_id, example.signal(seconds, seed=seed))
        except Exception as exc:  # noqa: BLE001 - reported by the test
            out[sequence_id] = exc
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=stream) for stream in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for _protocol, sequence_id, seconds, seed in streams:
        means = out[sequence_id]
        assert not isinstance(means, Exception), means
        np.testing.assert_allclose(means, _expected(example, example.signal(seconds, seed=seed)), rtol=0, atol=1e-12)


def test_running_mean_matches_numpy(server: ServerProcess) -> None:
    example = _client_module()
    audio = example.signal(0.5, seed=7)
    client = httpclient.InferenceServerClient(server.http_url.replace("http://", ""))
    try:
        means = example.stream(httpclient, client, 42, audio)
    finally:
        client.close()
    np.testing.assert_allclose(means, _expected(example, audio), rtol=0, atol=1e-12)


def test_a_stream_over_grpc_streaming(server: ServerProcess) -> None:
    # the same stream through ModelStreamInfer: one bidirectional stream, responses in order
    import queue

    example = _client_module()
    audio = example.signal(0.3, seed=3)
    chunks = [audio[i : i + example.CHUNK] for i in range(0, audio.size, example.CHUNK)]
    results: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: results.put(error or result))
        for i, chunk in enumerate(chunks):
            tensor = grpcclient.InferInput("AUDIO_CHUNK", [1, chunk.size], "FP32")
            tensor.set_data_from_numpy(chunk.reshape(1, -1))
            client.async_stream_infer(
                "streaming_mean",
                [tensor],
                sequence_id=991,
                sequence_start=i == 0,
                sequence_end=i == len(chunks) - 1,
            )
        means = []
        for _ in chunks:
            result = results.get(timeout=60)
            assert not isinstance(result, Exception), result
            means.append(float(result.as_numpy("MEAN")[0, 0]))
        client.stop_stream()
    finally:
        client.close()
    np.testing.assert_allclose(means, _expected(example, audio), rtol=0, atol=1e-12)
