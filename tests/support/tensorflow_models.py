"""Tiny TensorFlow models for the tensorflow backend's tests (SavedModels and a frozen TF1 GraphDef).

Each builder writes one model file or folder. TensorFlow is imported on the
first call (it takes seconds), so a test module builds all its models in one
fixture.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def skip_without_tensorflow() -> None:
    """Skip the calling test module where TensorFlow is not installed, without importing it.

    ``pytest.importorskip("tensorflow")`` would import it at collection, before PyTorch's
    ``triton``: the order that crashes the process once a later test imports ``torch.export``
    (see :func:`_tf`).
    """
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed (pip install 'tritium[tensorflow]')", allow_module_level=True)


def _tf() -> Any:
    """TensorFlow, imported in the order that keeps ``torch.export`` working in this process
    (``examples/tensorflow_examples.py``'s ``_tf``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import tensorflow_examples

    return tensorflow_examples._tf()


def add_sub_savedmodel(path: Path) -> None:
    """Signature ``serving_default``: INPUT0, INPUT1 FP32 [-1, 4] -> OUTPUT0 = a + b, OUTPUT1 = a - b;
    signature ``scaled``: the same inputs -> OUTPUT0 = 2a + b (checks that TF_SIGNATURE_DEF picks it)."""
    tf = _tf()
    spec = [tf.TensorSpec([None, 4], tf.float32, name="INPUT0"), tf.TensorSpec([None, 4], tf.float32, name="INPUT1")]

    class AddSub(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.two = tf.Variable(2.0)  # a variable, so the session restores checkpointed state

        @tf.function(input_signature=spec)
        def serve(self, INPUT0: Any, INPUT1: Any) -> dict[str, Any]:  # noqa: N803 (the signature's key names)
            return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}

        @tf.function(input_signature=spec)
        def scaled(self, INPUT0: Any, INPUT1: Any) -> dict[str, Any]:  # noqa: N803
            return {"OUTPUT0": self.two * INPUT0 + INPUT1}

    module = AddSub()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve, "scaled": module.scaled})


def strings_savedmodel(path: Path) -> None:
    """BYTES: TEXT string [-1, 2] -> UPPER string [-1, 2] (upper-cased), LENGTH INT32 [-1, 2] (bytes)."""
    tf = _tf()

    class Strings(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.string, name="TEXT")])
        def serve(self, TEXT: Any) -> dict[str, Any]:  # noqa: N803
            return {"UPPER": tf.strings.upper(TEXT), "LENGTH": tf.strings.length(TEXT)}

    tf.saved_model.save(Strings(), str(path))


def checked_savedmodel(path: Path) -> None:
    """X FP32 [-1, 2] -> Y = sqrt(X); TensorFlow fails the run when X has a negative element."""
    tf = _tf()

    class Checked(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="X")])
        def serve(self, X: Any) -> dict[str, Any]:  # noqa: N803
            with tf.control_dependencies([tf.debugging.assert_non_negative(X, message="X must be >= 0")]):
                return {"Y": tf.sqrt(X)}

    tf.saved_model.save(Checked(), str(path))


def stateful_savedmodel(path: Path) -> None:
    """INPUT, STATE_IN FP32 [-1, 2] -> STATE_OUT = 0.5 * STATE_IN + INPUT, OUTPUT = 2 * STATE_OUT."""
    tf = _tf()
    spec = [tf.TensorSpec([None, 2], tf.float32, name="INPUT"), tf.TensorSpec([None, 2], tf.float32, name="STATE_IN")]

    class Stateful(tf.Module):
        @tf.function(input_signature=spec)
        def serve(self, INPUT: Any, STATE_IN: Any) -> dict[str, Any]:  # noqa: N803
            state = 0.5 * STATE_IN + INPUT
            return {"STATE_OUT": state, "OUTPUT": 2.0 * state}

    tf.saved_model.save(Stateful(), str(path))


def simple_graphdef(path: Path) -> None:
    """Triton's ``simple`` as a frozen TF1 graph (the example's builder, ``examples/tensorflow_examples.py``):
    INPUT0, INPUT1 INT32 [-1, 16] -> OUTPUT0 = sum, OUTPUT1 = difference."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import tensorflow_examples

    path.parent.mkdir(parents=True, exist_ok=True)
    tensorflow_examples.simple_graphdef_writer(path)


def run_savedmodel(path: Path, signature: str = "serving_default", **inputs: Any) -> dict[str, Any]:
    """Run a SavedModel's signature in this process (TensorFlow 2 eager): ``{output key: numpy array}``."""
    tf = _tf()
    fn = tf.saved_model.load(str(path)).signatures[signature]
    return {k: v.numpy() for k, v in fn(**{k: tf.constant(v) for k, v in inputs.items()}).items()}


def run_graphdef(path: Path, fetches: list[str], feeds: dict[str, Any]) -> list[Any]:
    """Run a frozen GraphDef in this process with ``tf.compat.v1`` (names without ``:0``)."""
    tf = _tf()
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(path.read_bytes())
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        return list(session.run([f"{n}:0" for n in fetches], {f"{k}:0": v for k, v in feeds.items()}))
