"""One place for every check of a path that comes from a config, a request or the environment.

A user-supplied path component (a model name, ``runtime``,
``default_model_filename``, ``label_filename``, ...) must resolve to a path
under the root it belongs to. ``..``, absolute paths and symlinks leading
out of the root are refused with the same error whether the target exists or
not, so the answer leaks nothing about the file system.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import Code, TritonError

__all__ = ["safe_join", "escapes_root"]


def escapes_root(root: str | os.PathLike[str], candidate: str | os.PathLike[str]) -> bool:
    """True when ``candidate`` (after resolving symlinks) is not ``root`` or inside it."""
    root_real = os.path.realpath(root)
    cand_real = os.path.realpath(candidate)
    return os.path.commonpath([root_real, cand_real]) != root_real


def safe_join(root: str | os.PathLike[str], *parts: str, what: str = "path") -> Path:
    """Join user-supplied ``parts`` under ``root`` and check the result stays there.

    :param what: how to name the value in the error (``"runtime"``).
    :raises TritonError: INVALID_ARG when a part is absolute, empty, or the
        joined path resolves outside ``root``.
    """
    for part in parts:
        if not part or os.path.isabs(part) or "\0" in part:
            raise TritonError(Code.INVALID_ARG, f"invalid {what} '{part}': must be a relative path")
    candidate = Path(root).joinpath(*parts)
    if escapes_root(root, candidate):
        raise TritonError(
            Code.INVALID_ARG,
            f"invalid {what} '{os.path.join(*parts)}': it leaves the directory it must stay in",
        )
    return candidate
