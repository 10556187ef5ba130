"""Stream a deterministic "audio" signal to ``streaming_mean`` in chunks, as one sequence.

    tritium-server --model-repository=examples/sequence_models
    python examples/sequence_models/stream_client.py [--grpc] [--url 127.0.0.1:8000]

Prints the running mean after each chunk and checks it against numpy.
"""

from __future__ import annotations

import argparse

import numpy as np

SAMPLE_RATE = 16_000
CHUNK = 1_600  # 100 ms


def signal(seconds: float, seed: int = 0) -> np.ndarray:
    """A 440 Hz tone plus a DC offset of 0.1 and deterministic noise, FP32."""
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    noise = np.random.default_rng(seed).normal(0.0, 0.01, t.size)
    return (0.5 * np.sin(2 * np.pi * 440 * t) + 0.1 + noise).astype(np.float32)


def stream(client_module, client, sequence_id, audio: np.ndarray) -> list[float]:
    """Send ``audio`` chunk by chunk as sequence ``sequence_id``; return the running means."""
    chunks = [audio[i : i + CHUNK] for i in range(0, audio.size, CHUNK)]
    means = []
    for i, chunk in enumerate(chunks):
        tensor = client_module.InferInput("AUDIO_CHUNK", [1, chunk.size], "FP32")
        tensor.set_data_from_numpy(chunk.reshape(1, -1))
        result = client.infer(
            "streaming_mean",
            [tensor],
            sequence_id=sequence_id,
            sequence_start=i == 0,
            sequence_end=i == len(chunks) - 1,
        )
        means.append(float(result.as_numpy("MEAN")[0, 0]))
    return means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--grpc", action="store_true", help="use gRPC (default: HTTP)")
    parser.add_argument("--url", default=None, help="server address (default 127.0.0.1:8000, or :8001 with --grpc)")
    args = parser.parse_args()
    if args.grpc:
        import tritonclient.grpc as module
    else:
        import tritonclient.http as module
    url = args.url or ("127.0.0.1:8001" if args.grpc else "127.0.0.1:8000")
    client = module.InferenceServerClient(url)
    audio = signal(1.0)
    means = stream(module, client, "utterance-1", audio)
    expected = np.cumsum(audio.astype(np.float64))[CHUNK - 1 :: CHUNK] / np.arange(CHUNK, audio.size + 1, CHUNK)
    for i, mean in enumerate(means):
        print(f"after {(i + 1) * CHUNK / SAMPLE_RATE:.1f} s: mean {mean:+.6f}")
    assert np.allclose(means, expected, rtol=0, atol=1e-12), "running means differ from numpy"
    print("matches numpy")


if __name__ == "__main__":
    main()
