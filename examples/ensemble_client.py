#!/usr/bin/env python3
"""Classify photos with the ``efficientnet_ensemble`` example: send the encoded files, get labels back.

The server decodes and resizes each image (image_preprocess), runs EfficientNet-Lite0
(efficientnet_lite0_onnx) and picks the top-1 class (label_postprocess) in one request;
see docs/ensembles.md.

Usage:
    python examples/ensemble_client.py [-i http|grpc] [-u URL] IMAGE [IMAGE ...]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

MODEL = "efficientnet_ensemble"


def classify(files: list[str], protocol: str, url: str) -> list[tuple[str, int, str]]:
    """``(file, class index, label)`` of each file, all in one batched request."""
    if protocol == "grpc":
        import tritonclient.grpc as client_module
    else:
        import tritonclient.http as client_module  # type: ignore[no-redef]
    images = np.array([[open(f, "rb").read()] for f in files], dtype=np.object_)  # BYTES [B, 1]
    image = client_module.InferInput("IMAGE", list(images.shape), "BYTES")
    image.set_data_from_numpy(images)
    outputs = [client_module.InferRequestedOutput("LABEL"), client_module.InferRequestedOutput("CLASS_ID")]
    result = client_module.InferenceServerClient(url).infer(MODEL, [image], outputs=outputs)
    labels, ids = result.as_numpy("LABEL"), result.as_numpy("CLASS_ID")
    return [(f, int(ids[i, 0]), labels[i, 0].decode("utf-8")) for i, f in enumerate(files)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-i", "--protocol", choices=["http", "grpc"], default="http")
    parser.add_argument(
        "-u", "--url", help="server address (default: localhost:8000 for HTTP, localhost:8001 for gRPC)"
    )
    parser.add_argument("images", nargs="+", help="image files (JPEG, PNG, ...)")
    args = parser.parse_args(argv)
    url = args.url or ("localhost:8001" if args.protocol == "grpc" else "localhost:8000")
    try:
        results = classify(args.images, args.protocol, url)
    except Exception as exc:  # the client library's errors carry the server's message
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path, index, label in results:
        print(f"{path}: ({index}) = {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
