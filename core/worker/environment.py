"""Model execution environments: which Python interpreter runs a model's workers.

A model may name its own environment with Triton's config parameter
``EXECUTION_ENV_PATH`` (``$$TRITON_MODEL_DIRECTORY`` stands for the model's
folder): a folder holding a virtual environment or an unpacked conda
environment (its ``bin/python`` runs the workers), or a packed archive of one
(``.tar.gz``, ``.tgz``, ``.tar``, as conda-pack or ``tar`` make them) that is
unpacked once, with ``tarfile``'s ``data`` filter, into a cache keyed by the
archive's SHA-256. The path must stay inside the model repository.

The environment needs Python >= 3.10 and numpy, nothing of tritium: its
workers get a private import path holding only the ``tritium`` package (and
msgpack) of the server, so the model sees its environment's packages, not
the server's. Runs in the core, when a model loads.
"""

from __future__ import annotations

import atexit
import hashlib
import io
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import Code, TritonError
from ..model_repository.paths import escapes_root
from ..observability.progress import Progress

log = logging.getLogger("tritium.repository")

__all__ = ["WorkerEnvironment", "resolve_environment", "cache_dir", "PARAMETER"]

PARAMETER = "EXECUTION_ENV_PATH"
_ARCHIVES = (".tar.gz", ".tgz", ".tar")


class WorkerEnvironment:
    """The interpreter and extra environment variables of a model's workers."""

    def __init__(self, python: str, env: Mapping[str, str] | None = None) -> None:
        self.python = python
        self.env = dict(env or {})


def cache_dir() -> Path:
    """Where packed environments are unpacked (``$TRITIUM_CACHE_DIR`` or ``~/.cache/tritium``)."""
    base = os.environ.get("TRITIUM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tritium"
    )
    return Path(base) / "environments"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _Counting(io.RawIOBase):
    """A read-only file that reports how many of the archive's (compressed) bytes were read."""

    def __init__(self, raw: Any, progress: Progress) -> None:
        self._raw, self._progress = raw, progress

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer)
        self._progress.update(n or 0)
        return n

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()


def _unpack(archive: Path, model: str) -> Path:
    target = cache_dir() / _sha256(archive)
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=target.parent))
    try:
        progress = Progress(
            log, f"model '{model}': unpacking execution environment {archive.name}", archive.stat().st_size
        )
        with open(archive, "rb") as raw, tarfile.open(fileobj=_Counting(raw, progress)) as tar:
            tar.extractall(staging, filter="data")
        progress.close()
        (staging / ".complete").write_text(str(archive))
        try:
            staging.rename(target)
        except OSError:  # another server unpacked it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    except (OSError, tarfile.TarError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise TritonError(
            Code.INVALID_ARG, f"model '{model}': cannot unpack execution environment {archive}: {exc}"
        ) from None
    return target


@lru_cache(maxsize=1)
def _import_shim() -> str:
    """A folder holding only ``tritium`` (and msgpack), for workers running in another environment.

    Built from symbolic links to this installation's packages (an editable
    install maps tritium's subpackages to separate folders, so each is linked).
    """
    import msgpack

    import tritium

    shim = Path(tempfile.mkdtemp(prefix="tritium-worker-path-"))
    atexit.register(shutil.rmtree, shim, True)
    package = shim / "tritium"
    package.mkdir()
    root = Path(tritium.__file__).resolve().parent
    for item in root.iterdir():
        if item.name != "__pycache__":
            (package / item.name).symlink_to(item)
    for sub in ("core", "backends", "frontends", "proto"):
        module = __import__(f"tritium.{sub}", fromlist=["__path__"])
        link = package / sub
        if not link.exists():
            link.symlink_to(Path(module.__path__[0]).resolve())
    (shim / "msgpack").symlink_to(Path(msgpack.__file__).resolve().parent)
    return str(shim)


def _check(python: str, model: str, where: str) -> None:
    probe = "import sys, numpy; assert sys.version_info >= (3, 10), sys.version"
    try:
        result = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TritonError(Code.INVALID_ARG, f"model '{model}': cannot run {python} of {where}: {exc}") from None
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["unknown error"])[-1]
        raise TritonError(
            Code.INVALID_ARG,
            f"model '{model}': the execution environment {where} cannot run a tritium worker "
            f"(it needs Python >= 3.10 and numpy): {last}",
        )


def resolve_environment(
    model: str, model_path: Path, repository: Path, config: Mapping[str, Any]
) -> WorkerEnvironment | None:
    """The environment the workers of a model run in; None for the server's own (no ``EXECUTION_ENV_PATH``).

    Blocking (it may unpack an archive and runs the environment's Python once).

    :raises TritonError: INVALID_ARG for a path outside the model repository, a
        missing environment, an archive that cannot be unpacked, or an
        environment whose Python cannot run a worker.
    """
    value = ((config.get("parameters") or {}).get(PARAMETER) or {}).get("string_value", "")
    if not value:
        return None
    raw = value.replace("$$TRITON_MODEL_DIRECTORY", str(model_path))
    path = Path(raw) if os.path.isabs(raw) else model_path / raw
    if escapes_root(repository, path):
        raise TritonError(Code.INVALID_ARG, f"model '{model}': {PARAMETER} '{value}' leaves the model repository")
    if path.is_file() and path.name.endswith(_ARCHIVES):
        path = _unpack(path, model)
        entries = [p for p in path.iterdir() if not p.name.startswith(".")]
        if not (path / "bin").exists() and len(entries) == 1 and entries[0].is_dir():
            path = entries[0]  # an archive of the folder rather than of its contents
    elif not path.is_dir():
        raise TritonError(Code.INVALID_ARG, f"model '{model}': execution environment '{value}' does not exist")
    python = path / "bin" / "python"
    if not python.exists():
        python = path / "bin" / "python3"
    if not python.exists():
        raise TritonError(Code.INVALID_ARG, f"model '{model}': execution environment '{value}' has no bin/python")
    _check(str(python), model, f"'{value}'")
    return WorkerEnvironment(str(python), {"PYTHONPATH": _import_shim(), "PYTHONNOUSERSITE": "1"})
