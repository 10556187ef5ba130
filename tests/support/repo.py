"""Build small model repositories for tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["add_model", "identity_config"]


def add_model(
    root: Path, name: str, config: str | None, versions: tuple[int, ...] = (1,), files: dict[str, str] | None = None
) -> Path:
    """Create ``root/name`` with ``config.pbtxt`` (unless None) and version folders.

    :param files: extra files, relative to the model folder ("1/model.py": text).
    """
    model = root / name
    model.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (model / "config.pbtxt").write_text(textwrap.dedent(config))
    for v in versions:
        (model / str(v)).mkdir(exist_ok=True)
    for rel, text in (files or {}).items():
        path = model / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return model


def identity_config(
    dtype: str = "TYPE_FP32", dims: str = "[ 16 ]", max_batch_size: int = 8, count: int = 1, extra: str = ""
) -> str:
    """config.pbtxt of an ``identity`` model with INPUT0 -> OUTPUT0."""
    return f"""
        backend: "identity"
        max_batch_size: {max_batch_size}
        input [ {{ name: "INPUT0" data_type: {dtype} dims: {dims} }} ]
        output [ {{ name: "OUTPUT0" data_type: {dtype} dims: {dims} }} ]
        instance_group [ {{ count: {count} kind: KIND_CPU }} ]
        {extra}
    """
