#!/usr/bin/env python3
"""Classify images with an image-classification model served by tritium (or Triton).

Works like Triton's ``image_client.py``: it asks the server for the model's metadata and
configuration to learn the input name, shape, format, datatype, max_batch_size and output
name, pre-processes the images with Pillow and numpy, sends them in batches of ``-b`` (repeating
images to fill the last batch) and asks for the top ``-c`` classes through the classification
extension. Output, per request:

    Request 1, batch size 1
        10.82 (967) = espresso
    PASS

Example (after ``python examples/fetch_models.py`` and starting the server):

    python examples/image_client.py -m efficientnet_lite0_onnx -c 3 -s INCEPTION \\
        examples/images/coffee.jpg

Scalings: INCEPTION (x/127.5 - 1), VGG (subtract the per-channel mean, as Triton's client
does), IMAGENET (x/255, then ImageNet mean and std) and NONE (raw 0-255 values).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from PIL import Image, UnidentifiedImageError
from tritonclient.utils import InferenceServerException, triton_to_np_dtype

SCALINGS = ("NONE", "INCEPTION", "VGG", "IMAGENET")
IMAGENET_MEAN = {3: (0.485, 0.456, 0.406), 1: (0.449,)}
IMAGENET_STD = {3: (0.229, 0.224, 0.225), 1: (0.226,)}
VGG_MEAN = {3: (123, 117, 104), 1: (128,)}


class ClientError(Exception):
    """A problem the user can fix; printed as ``error: ...`` with exit status 1."""


def parse_model(metadata: dict[str, Any], config: dict[str, Any]) -> tuple[int, str, str, int, int, int, str, str]:
    """Check the model is an image classifier and return
    (max_batch_size, input name, output name, c, h, w, format, datatype)."""
    if len(metadata.get("inputs", [])) != 1 or len(config.get("input", [])) != 1:
        raise ClientError("expecting a model with 1 input")
    if len(metadata.get("outputs", [])) != 1:
        raise ClientError("expecting a model with 1 output")
    inp, out = metadata["inputs"][0], metadata["outputs"][0]
    max_batch_size = int(config.get("max_batch_size", 0))
    if out["datatype"] != "FP32":
        raise ClientError(f"expecting output datatype FP32, model '{metadata['name']}' has {out['datatype']}")
    out_dims = [int(d) for d in out["shape"]][1 if max_batch_size > 0 else 0 :]
    if sum(1 for d in out_dims if d != 1) > 1:
        raise ClientError(f"expecting the model output to be a vector, got shape {out['shape']}")
    dims = [int(d) for d in inp["shape"]][1 if max_batch_size > 0 else 0 :]
    if len(dims) != 3:
        raise ClientError(f"expecting input to have 3 dimensions (plus batch), got shape {inp['shape']}")
    fmt = config["input"][0].get("format", "FORMAT_NONE")
    if fmt == "FORMAT_NONE":  # not stated in the config: guess from where the channels are
        fmt = "FORMAT_NCHW" if dims[0] in (1, 3) else "FORMAT_NHWC" if dims[2] in (1, 3) else fmt
    if fmt == "FORMAT_NCHW":
        c, h, w = dims
    elif fmt == "FORMAT_NHWC":
        h, w, c = dims
    else:
        raise ClientError(f"unexpected input format {fmt}, expecting FORMAT_NCHW or FORMAT_NHWC")
    if c not in (1, 3) or h < 1 or w < 1:
        raise ClientError(f"expecting an image input with 1 or 3 channels and fixed size, got {dims}")
    return max_batch_size, inp["name"], out["name"], c, h, w, fmt, inp["datatype"]


def load_image(path: str) -> Image.Image:
    """Open and decode an image file, or raise ClientError."""
    try:
        img = Image.open(path)
        img.load()
    except (OSError, UnidentifiedImageError, ValueError) as e:
        raise ClientError(f"cannot read image '{path}': {e}") from e
    return img


def preprocess(img: Image.Image, fmt: str, dtype: str, c: int, h: int, w: int, scaling: str) -> np.ndarray:
    """Convert, resize (bilinear), scale and lay out one image as the model input wants it."""
    sample = img.convert("L" if c == 1 else "RGB")
    resized = np.array(sample.resize((w, h), Image.BILINEAR))
    if resized.ndim == 2:
        resized = resized[:, :, np.newaxis]
    npdtype = triton_to_np_dtype(dtype)
    typed = resized.astype(npdtype)
    if scaling == "INCEPTION":
        scaled = (typed / 127.5) - 1
    elif scaling == "VGG":
        scaled = typed - np.asarray(VGG_MEAN[c], dtype=npdtype)
    elif scaling == "IMAGENET":
        mean, std = np.asarray(IMAGENET_MEAN[c], dtype=npdtype), np.asarray(IMAGENET_STD[c], dtype=npdtype)
        scaled = (typed / npdtype(255) - mean) / std
    else:
        scaled = typed
    ordered = np.transpose(scaled, (2, 0, 1)) if fmt == "FORMAT_NCHW" else scaled
    return np.ascontiguousarray(ordered, dtype=npdtype)


def image_files(path: str) -> list[str]:
    """The image itself, or every regular, non-hidden file of a folder, sorted."""
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path) if not f.startswith("."))
        files = [f for f in files if os.path.isfile(f)]
        if not files:
            raise ClientError(f"no images in folder '{path}'")
        return files
    if not os.path.exists(path):
        raise ClientError(f"no such file or folder: '{path}'")
    return [path]


def batches(
    images: list[np.ndarray], files: list[str], batch_size: int
) -> Iterator[tuple[list[np.ndarray], list[str]]]:
    """Batches of ``batch_size``; the last one is filled up by starting over with the first images."""
    idx, last = 0, False
    while not last:
        batch, names = [], []
        for _ in range(batch_size):
            batch.append(images[idx])
            names.append(files[idx])
            idx = (idx + 1) % len(images)
            last = last or idx == 0
        yield batch, names


def print_classes(classes: np.ndarray) -> None:
    """Print ``score (index) = label`` for each "score:index:label" classification string.

    The score is rounded to 2 decimals: the server's 6 (Triton's ``%f``) differ in the last
    digit from one CPU to another, and the ranking is what the example shows.
    """
    for entry in classes.reshape(-1):
        text = entry.decode("utf-8") if isinstance(entry, bytes) else str(entry)
        fields = text.split(":", 2)
        try:
            score = f"{float(fields[0]):.2f}"
        except ValueError:
            score = fields[0]
        if len(fields) == 3:
            print(f"    {score} ({fields[1]}) = {fields[2]}")
        else:
            print(f"    {score} ({fields[1] if len(fields) > 1 else '?'})")


def fetch_model(client: Any, protocol: str, model: str, version: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Model metadata and config as plain dicts (the HTTP JSON shape) for either protocol."""
    if protocol == "grpc":
        metadata = client.get_model_metadata(model, version, as_json=True)
        config = client.get_model_config(model, version, as_json=True)["config"]
    else:
        metadata = client.get_model_metadata(model, version)
        config = client.get_model_config(model, version)
    return metadata, config


def run(args: argparse.Namespace) -> None:
    protocol = args.protocol.lower()
    lib = grpcclient if protocol == "grpc" else httpclient
    url = args.url or ("localhost:8001" if protocol == "grpc" else "localhost:8000")
    try:
        client = lib.InferenceServerClient(url=url, verbose=args.verbose)
        live = client.is_server_live()
    except Exception as e:  # connection refused, DNS failure, bad URL, ...
        raise ClientError(f"cannot reach the server at {url} ({protocol}): {e}") from e
    if not live:
        raise ClientError(f"the server at {url} is not live")

    try:
        metadata, config = fetch_model(client, protocol, args.model_name, args.model_version)
    except InferenceServerException as e:
        version = f" version {args.model_version}" if args.model_version else ""
        raise ClientError(f"cannot get model '{args.model_name}'{version}: {e.message()}") from e
    max_batch_size, input_name, output_name, c, h, w, fmt, dtype = parse_model(metadata, config)
    if max_batch_size == 0 and args.batch_size != 1:
        raise ClientError("this model doesn't support batching; use -b 1")
    if max_batch_size > 0 and args.batch_size > max_batch_size:
        raise ClientError(f"batch size {args.batch_size} exceeds the model's max_batch_size {max_batch_size}")

    files = image_files(args.image_filename)
    images = [preprocess(load_image(f), fmt, dtype, c, h, w, args.scaling) for f in files]

    for request_id, (batch, _names) in enumerate(batches(images, files, args.batch_size), start=1):
        data = np.stack(batch, axis=0) if max_batch_size > 0 else batch[0]
        inputs = [lib.InferInput(input_name, list(data.shape), dtype)]
        inputs[0].set_data_from_numpy(data)
        outputs = [lib.InferRequestedOutput(output_name, class_count=args.classes)]
        try:
            result = client.infer(
                args.model_name,
                inputs,
                model_version=args.model_version,
                outputs=outputs,
                request_id=str(request_id),
            )
        except InferenceServerException as e:
            raise ClientError(f"inference failed: {e.message()}") from e
        classes = result.as_numpy(output_name)
        if classes is None:
            raise ClientError(f"the response has no output '{output_name}'")
        print(f"Request {request_id}, batch size {args.batch_size}")
        for per_image in classes if max_batch_size > 0 else [classes]:
            print_classes(np.asarray(per_image))
    print("PASS")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print the client's requests and responses")
    parser.add_argument("-m", "--model-name", required=True, help="name of the model")
    parser.add_argument("-x", "--model-version", default="", help="model version (default: the server's choice)")
    parser.add_argument("-b", "--batch-size", type=int, default=1, help="images per request (default: 1)")
    parser.add_argument("-c", "--classes", type=int, default=1, help="number of top classes to print (default: 1)")
    parser.add_argument(
        "-s", "--scaling", type=str.upper, choices=SCALINGS, default="NONE", help="pixel scaling (default: NONE)"
    )
    parser.add_argument(
        "-u", "--url", default=None, help="server URL (default: localhost:8000 for HTTP, localhost:8001 for gRPC)"
    )
    parser.add_argument(
        "-i", "--protocol", type=str.lower, choices=("http", "grpc"), default="http", help="protocol (default: http)"
    )
    parser.add_argument("image_filename", help="an image file, or a folder of them")
    args = parser.parse_args(argv)
    if args.batch_size < 1 or args.classes < 1:
        parser.error("batch size and class count must be at least 1")
    try:
        run(args)
    except ClientError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
