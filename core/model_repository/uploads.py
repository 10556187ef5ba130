"""Model folders built from the ``file:<path>`` contents of a load request.

A load request may carry a model's files (``"file:1/model.py": <base64>``
over HTTP, ``bytes_param`` over gRPC) for a model that exists only in the
request. Loading them runs uploaded code, so the server accepts them only
when started with ``--model-load-allow-file-override=true``. Each upload
gets a fresh folder under the server's cache folder; every path is checked
before anything is written: relative, no ``..`` component, no NUL, and the
resolved target stays in the folder (symlinks included). Files are created
with ``O_EXCL | O_NOFOLLOW``. A refused upload leaves nothing behind.
Runs in a worker thread of the core process (blocking file I/O).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..errors import Code, TritonError
from .paths import escapes_root, safe_join

__all__ = ["ALLOW_FLAG", "check_upload_path", "write_upload"]

#: the command-line flag that allows ``file:`` uploads (named in the refusal)
ALLOW_FLAG = "--model-load-allow-file-override"


def check_upload_path(relative: str) -> str:
    """Refuse an upload path that is empty, absolute, has ``..``/NUL, or backslashes.

    :returns: the path with ``/`` separators.
    :raises TritonError: INVALID_ARG naming the path.
    """
    parts = relative.split("/")
    if (
        not relative
        or relative.startswith("/")
        or os.path.isabs(relative)
        or "\\" in relative
        or "\0" in relative
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise TritonError(
            Code.INVALID_ARG,
            f"invalid file override path 'file:{relative}': it must be a relative path inside the model folder "
            "without '.', '..' or empty components",
        )
    return relative


def write_upload(root: Path, name: str, files: dict[str, bytes]) -> Path:
    """Write ``files`` (relative path -> contents) into a new folder under ``root``; return the folder.

    :raises TritonError: INVALID_ARG for a path that would leave the folder
        (nothing is written then), INTERNAL when the files cannot be written.
    """
    for relative in files:
        check_upload_path(relative)
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
    try:
        for relative, data in files.items():
            target = safe_join(folder, *relative.split("/"), what="file override path")
            target.parent.mkdir(parents=True, exist_ok=True)
            if escapes_root(folder, target.parent):
                raise TritonError(Code.INVALID_ARG, f"invalid file override path 'file:{relative}'")
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
    except TritonError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise TritonError(Code.INTERNAL, f"failed to write the model files of '{name}': {exc}") from None
    return folder
