"""What this server was composed with: the ``[backends]`` table of ``plugins.toml``.

``build.py`` composes a server from chosen backends and endpoints and writes a
``plugins.toml`` that enables only the chosen endpoints (``[frontends.<name>]``)
and names the chosen backends::

    [backends]
    enabled = ["onnxruntime"]      # only these backends are part of this server
    directory = "backends"         # the global backend directory, relative to plugins.toml

A server without a ``[backends]`` table (a plain ``pip install``) is not
composed: every backend in its backend directory may serve. A composed server
refuses a model whose backend it was not composed with, naming the
composition, unless the model brings its own ``libtriton_<backend>`` library
(Triton's model-folder search places, which an image composition does not
change). Runs in the core process; reads files only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backend.loader import find_backend_library
from ..errors import Code, TritonError

__all__ = ["Composition", "check_backend", "describe", "read_composition"]


@dataclass(frozen=True, slots=True)
class Composition:
    """The parts a server was composed with.

    :ivar backends: the chosen backend names, ``None`` when the server is not composed.
    :ivar endpoints: the endpoint (frontend) names enabled in ``plugins.toml``.
    :ivar backend_directory: the composed global backend directory, ``None`` for the default.
    """

    backends: tuple[str, ...] | None
    endpoints: tuple[str, ...]
    backend_directory: Path | None = None


def read_composition(settings: Mapping[str, Any], base: Path) -> Composition:
    """The composition described by parsed ``plugins.toml`` settings.

    :param settings: the parsed file (see :func:`tritium.core.settings.plugins.load_plugin_settings`).
    :param base: the folder a relative ``[backends] directory`` is resolved against
        (the folder holding ``plugins.toml``).
    :raises TritonError: INVALID_ARG when ``[backends]`` is malformed.
    """
    endpoints = tuple(
        name for name, table in (settings.get("frontends") or {}).items() if (table or {}).get("enabled", True)
    )
    table = settings.get("backends")
    if table is None:
        return Composition(None, endpoints)
    enabled = table.get("enabled", [])
    if not isinstance(enabled, list) or not all(isinstance(n, str) for n in enabled):
        raise TritonError(Code.INVALID_ARG, "plugins.toml: [backends] enabled must be a list of backend names")
    directory = table.get("directory")
    if directory is not None and not isinstance(directory, str):
        raise TritonError(Code.INVALID_ARG, "plugins.toml: [backends] directory must be a path")
    return Composition(tuple(enabled), endpoints, (base / directory).resolve() if directory else None)


def describe(composition: Composition, backend_directory: str | Path) -> str:
    """Lines for ``tritium-server --version``: the backends and endpoints of this server."""
    if composition.backends is None:
        root = Path(backend_directory)
        found = sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob(f"libtriton_{p.name}*")))
        backends = ", ".join(found) + f" (every backend in {root})"
    else:
        backends = ", ".join(composition.backends) + " (composed by build.py)"
    return f"backends: {backends}\nendpoints: {', '.join(composition.endpoints) or 'none'}"


def check_backend(
    composition: Composition,
    model: str,
    backend: str,
    model_path: str | Path,
    version: int,
    backend_directory: str | Path,
    runtime: str = "",
) -> None:
    """Refuse a model whose backend this server was not composed with.

    A model that brings its own ``libtriton_<backend>`` (in its version or
    model folder) or whose library is present in the backend directory passes.

    :raises TritonError: INVALID_ARG naming the backend, the composition and how to add it.
    """
    if composition.backends is None or not backend or backend in composition.backends:
        return
    try:
        find_backend_library(backend, model_path, version, backend_directory, runtime)
        return
    except TritonError as exc:
        if exc.code != Code.NOT_FOUND:
            raise
    chosen = ", ".join(composition.backends) or "none"
    raise TritonError(
        Code.INVALID_ARG,
        f"model '{model}' uses backend '{backend}', which this server was not composed with "
        f"(backends: {chosen}; endpoints: {', '.join(composition.endpoints) or 'none'}); "
        f"compose a server that has it with: python build.py --backend {backend} ...",
    )
