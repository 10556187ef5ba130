"""The layout of model repositories: model folders, version folders, version policy, labels, fingerprints.

A model repository is a folder whose sub-folders are models; a model folder
holds ``config.pbtxt`` (optional with auto-complete) and numbered version
folders. Several repositories may be given; a model name found in more than
one is refused (Triton's "not unique across all model repositories").
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...proto import model_config_pb2 as mc
from ..errors import Code, TritonError
from .paths import safe_join

log = logging.getLogger("tritium.repository")

__all__ = ["ModelSource", "scan", "versions_to_load", "read_labels", "fingerprint", "CONFIG_FILENAME"]

CONFIG_FILENAME = "config.pbtxt"
#: where a model's alternative configs are (``--model-config-name``)
CONFIGS_FOLDER = "configs"
# folders inside a model folder that are not versions
_NOT_VERSIONS = {"warmup", "initial_state", "configs"}


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A model folder in a repository.

    :ivar name: the model name (the folder name).
    :ivar path: the folder.
    :ivar repository: the repository root it is in.
    :ivar config_name: ``--model-config-name`` ("": none).
    """

    name: str
    path: Path
    repository: Path
    config_name: str = ""

    @property
    def config_path(self) -> Path:
        """``<model>/configs/<config_name>.pbtxt`` where ``--model-config-name`` is set and that file
        exists, else ``<model>/config.pbtxt`` (Triton's ``GetModelConfigFullPath``)."""
        if self.config_name:
            custom = self.path / CONFIGS_FOLDER / f"{self.config_name}.pbtxt"
            if custom.is_file():
                return custom
        return self.path / CONFIG_FILENAME


def _not_a_model(name: str) -> bool:
    """Folders a model repository may hold that are no model: hidden ones, and Python's byte-code
    cache (a client script kept beside the models leaves one when it is imported)."""
    return name.startswith(".") or name == "__pycache__"


def scan(repositories: Iterable[str | Path], config_name: str = "") -> tuple[dict[str, ModelSource], set[str]]:
    """List the models of every repository (``config_name``: ``--model-config-name``).

    :returns: the models by name, and the names found in more than one
        repository (those are left out of the first result).
    :raises TritonError: INVALID_ARG when a repository folder cannot be read.
    """
    models: dict[str, ModelSource] = {}
    duplicates: set[str] = set()
    for root in repositories:
        root_path = Path(root).absolute()  # workers run in their model's folder
        try:
            entries = sorted(p for p in root_path.iterdir() if p.is_dir() and not _not_a_model(p.name))
        except OSError as exc:
            raise TritonError(Code.INVALID_ARG, f"failed to poll model repository '{root}': {exc}") from exc
        for entry in entries:
            if entry.name in models or entry.name in duplicates:
                duplicates.add(entry.name)
                models.pop(entry.name, None)
                log.error("failed to poll model '%s': not unique across all model repositories", entry.name)
                continue
            models[entry.name] = ModelSource(entry.name, entry, root_path, config_name)
    return models, duplicates


def versions_to_load(source: ModelSource, config: mc.ModelConfig) -> list[int]:
    """The versions the config's ``version_policy`` selects among the version folders present.

    Folders that are not integers, or have leading zeros, are ignored with a
    warning; a ``specific`` version with no folder is logged and skipped.
    """
    existing: set[int] = set()
    try:
        subdirs = sorted(p.name for p in source.path.iterdir() if p.is_dir())
    except OSError:
        subdirs = []
    for sub in subdirs:
        if sub in _NOT_VERSIONS or sub.startswith("."):
            continue
        if len(sub) > 1 and sub.startswith("0"):
            log.warning("ignore version directory '%s' which contains leading zeros in its directory name", sub)
            continue
        try:
            existing.add(int(sub))
        except ValueError:
            log.warning("ignore version directory '%s' which fails to convert to integral number", sub)
    policy = config.version_policy
    which = policy.WhichOneof("policy_choice")
    if which == "specific":
        chosen = []
        for version in policy.specific.versions:
            if version in existing:
                chosen.append(int(version))
            else:
                log.error(
                    "version %d is specified for model '%s', but the version directory is not present",
                    version,
                    source.name,
                )
        return sorted(set(chosen))
    if which == "all":
        return sorted(existing)
    count = policy.latest.num_versions if which == "latest" else 1
    return sorted(sorted(existing, reverse=True)[: max(0, count)])


def read_labels(model_path: Path, config: dict[str, Any]) -> dict[str, list[str]]:
    """Read the ``label_filename`` of every output (one label per line).

    :raises TritonError: INVALID_ARG for a label file outside the model
        folder or one that cannot be read.
    """
    labels: dict[str, list[str]] = {}
    for output in config.get("output", []):
        filename = output.get("label_filename") or ""
        if not filename:
            continue
        path = safe_join(model_path, filename, what="label_filename")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TritonError(
                Code.INVALID_ARG, f"failed to read label file '{filename}' of output '{output['name']}': {exc}"
            ) from None
        labels[output["name"]] = text.splitlines()
    return labels


def fingerprint(path: Path) -> tuple[tuple[str, int, int], ...]:
    """What poll mode compares to see a model folder changed: every folder, and every file's path, size and mtime."""
    out: list[tuple[str, int, int]] = []
    for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        out.extend((os.path.relpath(os.path.join(folder, d), path) + "/", 0, 0) for d in dirs)
        for name in sorted(files):
            full = os.path.join(folder, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            out.append((os.path.relpath(full, path), st.st_size, st.st_mtime_ns))
    return tuple(out)
