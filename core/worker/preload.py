"""Which frameworks the template process imports before it forks a model's worker.

Importing torch costs a process about 500 MiB (most of it pages that relocation writes at
import). When the template process has imported it, every worker forked afterwards shares
those pages copy-on-write instead of making its own: the pytorch backend's worker, and a
python model whose ``model.py`` imports torch (found by reading the file's import
statements, without running it). Only frameworks that start no thread at import are
imported there (a fork copies the forking thread alone): torch qualifies; onnxruntime,
openvino and the tree libraries do not or need not (their backends have one shared worker
anyway). A framework the template imports costs nothing more in all: the worker that needs
it would have held the same pages. Core process.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("tritium.worker")

__all__ = ["frameworks_for", "PRELOADABLE"]

#: what the template may import -> the top-level modules whose import means a model needs it
PRELOADABLE: dict[str, frozenset[str]] = {
    "torch": frozenset({"torch", "torchvision", "torchaudio", "transformers", "sentence_transformers", "timm"}),
}
#: backends whose worker imports a preloadable framework
BACKEND_FRAMEWORKS: dict[str, tuple[str, ...]] = {"pytorch": ("torch",)}
#: the largest model file read for its imports, bytes
MAX_SOURCE_BYTES = 1 << 20


def _imports(path: Path) -> set[str]:
    """Top-level module names a Python file imports (anywhere in it); empty when unreadable."""
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            return set()
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def frameworks_for(backend: str, model_path: Path, version: int, config: dict[str, Any]) -> tuple[str, ...]:
    """The frameworks (keys of :data:`PRELOADABLE`) a model's workers should find imported.

    :param config: the model config (JSON form; ``default_model_filename`` names a python model's file).
    """
    if backend != "python":
        return BACKEND_FRAMEWORKS.get(backend, ())
    filename = str(config.get("default_model_filename") or "model.py")
    imports = _imports(model_path / str(version) / filename)
    return tuple(name for name, users in PRELOADABLE.items() if imports & users)
