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

__all__ = ["safe_join", "escapes_root", "check_model_name", "check_relative_file", "redact_paths"]


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


def check_model_name(name: str, what: str = "model name") -> str:
    """Refuse a model name that could name a path: separators, ``.``/``..``, NUL, empty.

    Used wherever a name arrives from outside (URLs, load/unload requests,
    a config's ``name``, an ensemble step's ``model_name``).

    :raises TritonError: INVALID_ARG naming the value.
    """
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or os.sep in name
        or (os.altsep is not None and os.altsep in name)
    ):
        raise TritonError(
            Code.INVALID_ARG,
            f"invalid {what} '{name}': a model name cannot be empty, '.', '..' or contain '/', '\\' or NUL",
        )
    return name


def check_relative_file(root: str | os.PathLike[str], value: str, what: str) -> None:
    """Check a config's file name (``default_model_filename``, ``runtime``) stays under ``root``.

    The value is joined under every version folder and the model folder by
    the loader; it must be a relative path without ``..`` components, and
    may not resolve (symlinks included) outside ``root``.

    :raises TritonError: INVALID_ARG naming the field.
    """
    if not value:
        return
    parts = value.replace("\\", "/").split("/")
    if os.path.isabs(value) or ".." in parts or "\0" in value:
        raise TritonError(Code.INVALID_ARG, f"invalid {what} '{value}': it must be a file name inside the model folder")
    safe_join(root, value, what=what)


def redact_paths(text: str, places: dict[str, str]) -> str:
    """``text`` with each folder of ``places`` (absolute path -> role, e.g. ``<backend-directory>``) replaced.

    For messages sent to clients: they name where the server looked without
    telling an outside client where it is installed. The longest paths are
    replaced first, so a folder inside another keeps its own role.
    """
    for path in sorted(places, key=len, reverse=True):
        if path and path != "/":
            text = text.replace(path.rstrip("/"), places[path])
    return text
