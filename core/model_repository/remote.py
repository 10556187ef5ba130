"""Remote model repositories through fsspec: ``s3://``, ``gs://``, ``az://`` (and any fsspec URL).

A remote repository is mirrored into a local cache folder and the rest of
the server sees only local folders. Each sync lists the repository, writes
the model-level files (``config.pbtxt``, label files) only when their bytes
changed (so that poll mode sees no change where there was none), downloads
each version folder (and other sub-folders such as ``warmup/``) once — a
marker file records a completed download — and removes what the remote
side no longer has. Credentials come from each file system's standard
environment variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ENDPOINT_URL`` for S3 — or Triton's ``s3://host:port/bucket/path``
form; ``GOOGLE_APPLICATION_CREDENTIALS`` for GCS;
``AZURE_STORAGE_CONNECTION_STRING`` / ``AZURE_STORAGE_ACCOUNT_NAME`` for
Azure). Runs in a worker thread of the core process (blocking I/O).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from ..errors import Code, TritonError
from ..observability.progress import Progress
from .paths import check_model_name, safe_join

log = logging.getLogger("tritium.repository")

__all__ = ["is_remote", "RemoteRepository", "PACKAGES"]

#: the package that provides each URL scheme's fsspec file system
PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "az": "adlfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
}
_MARKER = ".tritium-downloaded"
#: bytes read from a remote file at a time (downloads report progress per chunk)
_CHUNK = 1 << 20


def is_remote(repository: str) -> bool:
    """True for a URL (``scheme://...``) other than ``file://``."""
    scheme, sep, _ = repository.partition("://")
    return bool(sep) and scheme not in ("", "file")


def _filesystem(scheme: str, **kwargs: Any) -> Any:
    try:
        import fsspec
    except ImportError:
        raise TritonError(
            Code.INVALID_ARG, "remote model repositories need the 'fsspec' package (pip install tritium[remote])"
        ) from None
    try:
        return fsspec.filesystem(scheme, **kwargs)
    except ImportError as exc:
        package = PACKAGES.get(scheme, str(exc))
        raise TritonError(
            Code.INVALID_ARG,
            f"model repository scheme '{scheme}://' needs the '{package}' package (pip install {package})",
        ) from None
    except ValueError as exc:
        raise TritonError(Code.INVALID_ARG, f"unsupported model repository scheme '{scheme}://': {exc}") from None


class RemoteRepository:
    """One remote repository and its local mirror.

    :param url: the repository URL (``s3://bucket/models``).
    :param cache_root: the server's cache folder; the mirror goes in
        ``<cache_root>/remote/<hash of the URL>``.
    """

    def __init__(self, url: str, cache_root: Path) -> None:
        self.url = url.rstrip("/")
        self.scheme, _, self.path = self.url.partition("://")
        self._options: dict[str, Any] = {}
        head, _, rest = self.path.partition("/")
        if self.scheme == "s3" and ":" in head and rest:
            # Triton's form for S3-compatible servers: s3://host:port/bucket/path
            self._options = {"client_kwargs": {"endpoint_url": f"http://{head}"}}
            self.path = rest
        self.local = cache_root / "remote" / hashlib.sha256(self.url.encode()).hexdigest()[:16]
        self._fs: Any = None

    @property
    def fs(self) -> Any:
        """The fsspec file system (created on first use).

        :raises TritonError: INVALID_ARG naming the package a scheme needs.
        """
        if self._fs is None:
            self._fs = _filesystem(self.scheme, **self._options)
        return self._fs

    def _entries(self, path: str) -> list[tuple[str, str]]:
        """``(name, type)`` of the entries of ``path`` (type ``directory`` or ``file``)."""
        self.fs.invalidate_cache(path)
        out = []
        for item in self.fs.ls(path, detail=True):
            name = str(item["name"]).rstrip("/").rsplit("/", 1)[-1]
            if name and not name.startswith("."):
                out.append((name, "directory" if item.get("type") == "directory" else "file"))
        return out

    def sync(self) -> Path:
        """Bring the mirror up to date; return its folder.

        :raises TritonError: INVALID_ARG when the repository cannot be listed.
        """
        try:
            models = [n for n, kind in self._entries(self.path) if kind == "directory"]
        except TritonError:
            raise
        except Exception as exc:
            raise TritonError(Code.INVALID_ARG, f"failed to poll model repository '{self.url}': {exc}") from None
        self.local.mkdir(parents=True, exist_ok=True)
        wanted = set()
        for name in models:
            try:
                check_model_name(name)
            except TritonError:
                log.error("ignoring remote model folder '%s': not a valid model name", name)
                continue
            wanted.add(name)
            try:
                self._sync_model(name)
            except Exception as exc:  # one broken model must not hide the others
                log.error("failed to download model '%s' from '%s': %s", name, self.url, exc)
        for local in self.local.iterdir():
            if local.name not in wanted:
                shutil.rmtree(local, ignore_errors=True)
        return self.local

    def _sync_model(self, name: str) -> None:
        remote = f"{self.path}/{name}"
        local = safe_join(self.local, name, what="model name")
        local.mkdir(exist_ok=True)
        present = set()
        for entry, kind in self._entries(remote):
            present.add(entry)
            target = safe_join(local, entry, what="remote file name")
            if kind == "file":
                data = self.fs.cat_file(f"{remote}/{entry}")
                if not target.is_file() or target.read_bytes() != data:
                    tmp = target.with_name(target.name + ".part")
                    tmp.write_bytes(data)
                    os.replace(tmp, target)
            elif not (target / _MARKER).exists():
                partial = target.with_name(target.name + ".partial")
                shutil.rmtree(partial, ignore_errors=True)
                shutil.rmtree(target, ignore_errors=True)
                folder = f"{remote}/{entry}"
                try:
                    total: int | None = int(self.fs.du(folder, total=True))
                except Exception:  # a file system without sizes: progress without a total
                    total = None
                progress = Progress(log, f"downloading '{name}/{entry}' from {self.url}", total)
                self._download_tree(folder, partial, progress)
                progress.close()
                (partial / _MARKER).touch()
                os.replace(partial, target)
        for old in local.iterdir():
            if old.name not in present:
                if old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    old.unlink(missing_ok=True)

    def _download_tree(self, remote: str, local: Path, progress: Progress) -> None:
        local.mkdir(parents=True)
        for entry, kind in self._entries(remote):
            target = safe_join(local, entry, what="remote file name")
            if kind == "file":
                self._get_file(f"{remote}/{entry}", target, progress)
            else:
                self._download_tree(f"{remote}/{entry}", target, progress)

    def _get_file(self, remote: str, target: Path, progress: Progress) -> None:
        """Copy one file in bounded chunks, counting its bytes."""
        with self.fs.open(remote, "rb", block_size=_CHUNK) as src, open(target, "wb") as dst:
            while chunk := src.read(_CHUNK):
                dst.write(chunk)
                progress.update(len(chunk))
