"""Backend discovery and loading: Triton's ``libtriton_<name>`` search rules.

For model ``M`` (version ``V``) with backend ``B`` the library is looked for,
first match wins, in

1. ``<model repository>/M/V/``
2. ``<model repository>/M/``
3. ``<backend directory>/B/``

as ``libtriton_B.py`` (a module), ``libtriton_B/`` (a package) or
``libtriton_B.so`` (a shared library). The model config's ``runtime`` field
names another library file to look for in the same places. When none of them
has it, an installed distribution may provide it:

4. the entry point ``B`` of group ``tritium.backends`` (``pip install`` a
   package that declares ``[project.entry-points."tritium.backends"]
   B = "my_package"``): the package's folder is searched like the places
   above, and a package without such a file is itself the Python backend.

Runs in the worker process (the core never imports a backend).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import Code, TritonError
from ..model_repository.paths import safe_join
from .api import API_VERSION

__all__ = [
    "BackendLibrary",
    "find_backend_library",
    "load_backend_module",
    "REQUIRED_ENTRY_POINT",
    "ENTRY_POINT_GROUP",
]

REQUIRED_ENTRY_POINT = "TRITONBACKEND_ModelInstanceExecute"
#: the entry-point group through which installed distributions provide backends
ENTRY_POINT_GROUP = "tritium.backends"


@dataclass(frozen=True, slots=True)
class BackendLibrary:
    """A backend library found on disk.

    :ivar path: the file (``.py``/``.so``) or package folder.
    :ivar kind: ``"module"``, ``"package"`` or ``"shared_library"``.
    """

    path: Path
    kind: str

    @property
    def directory(self) -> Path:
        """The folder holding the library."""
        return self.path.parent


def _candidates(backend: str, runtime: str) -> list[str]:
    if runtime:
        return [runtime]
    stem = f"libtriton_{backend}"
    return [f"{stem}.py", stem, f"{stem}.so"]


def find_backend_library(
    backend: str,
    model_path: str | Path,
    version: int,
    backend_directory: str | Path,
    runtime: str = "",
) -> BackendLibrary:
    """Find the library of ``backend`` for a model, by Triton's search order.

    :param model_path: the model's folder in its repository.
    :param version: the version being loaded.
    :param backend_directory: the global backend directory.
    :param runtime: the config's ``runtime`` (a file name), "" for the default.
    :raises TritonError: INVALID_ARG for a backend name or runtime that is not
        a plain name; NOT_FOUND listing every path searched when nothing matches.
    """
    if not backend or "/" in backend or backend in (".", ".."):
        raise TritonError(Code.INVALID_ARG, f"invalid backend name '{backend}'")
    model_path = Path(model_path)
    places = [
        (model_path, str(version)),
        (model_path, None),
        (Path(backend_directory), backend),
    ]
    searched: list[str] = []
    for root, sub in places:
        base = safe_join(root, sub, what="version") if sub else root
        for name in _candidates(backend, runtime):
            path = safe_join(base, name, what="runtime") if base.exists() else base / name
            searched.append(str(path))
            found = _library_at(path)
            if found is not None:
                return found
    found = _from_entry_point(backend, runtime, searched)
    if found is not None:
        return found
    raise TritonError(
        Code.NOT_FOUND,
        f"unable to find backend library for backend '{backend}'"
        + (f" (runtime '{runtime}')" if runtime else "")
        + ", searched: "
        + ", ".join(searched),
    )


def _library_at(path: Path) -> BackendLibrary | None:
    """The backend library at ``path`` (a .so, a .py or a package folder), or None."""
    if path.name.endswith(".so") and path.is_file():
        return BackendLibrary(path, "shared_library")
    if path.name.endswith(".py") and path.is_file():
        return BackendLibrary(path, "module")
    if path.is_dir() and (path / "__init__.py").is_file():
        return BackendLibrary(path, "package")
    return None


def _from_entry_point(backend: str, runtime: str, searched: list[str]) -> BackendLibrary | None:
    """Place 4: the ``tritium.backends`` entry point named ``backend`` (see the module docstring)."""
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=backend):
        searched.append(f"entry point '{backend}' ({entry.value})")
        module = entry.value.split(":", 1)[0]
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        folder = origin.parent
        for name in _candidates(backend, runtime):
            found = _library_at(safe_join(folder, name, what="runtime"))
            if found is not None:
                return found
        if not runtime:
            if spec.submodule_search_locations is not None:
                return BackendLibrary(folder, "package")
            return BackendLibrary(origin, "module")
    return None


def load_backend_module(library: BackendLibrary, backend: str, module_name: str = "") -> Any:
    """Load a backend library and check its entry points.

    :param module_name: the name a Python library is imported under (default
        ``tritium_backend_<backend>``; a worker that hosts two libraries of one backend
        name gives the second another name).

    A Python module or package is imported; a shared library is opened by
    :class:`~tritium.core.backend.native.host.NativeBackend`, which presents
    the library's C entry points as the same Python functions.

    :raises TritonError: INVALID_ARG when a Python module cannot be imported,
        lacks ``TRITONBACKEND_ModelInstanceExecute`` or declares an
        incompatible ``TRITONBACKEND_API_VERSION``; for a shared library, what
        :class:`NativeBackend` raises (NOT_FOUND for a library that cannot be
        loaded or lacks the execute entry point, UNAVAILABLE without cffi or a
        C compiler).
    """
    if library.kind == "shared_library":
        from .native.host import NativeBackend  # cffi is imported only for native backends

        return NativeBackend(library.path, backend)
    module_name = module_name or f"tritium_backend_{backend}"
    if library.kind == "package":
        spec = importlib.util.spec_from_file_location(
            module_name, library.path / "__init__.py", submodule_search_locations=[str(library.path)]
        )
    else:
        spec = importlib.util.spec_from_file_location(module_name, library.path)
    if spec is None or spec.loader is None:
        raise TritonError(Code.INVALID_ARG, f"backend '{backend}': cannot import {library.path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except TritonError:
        raise
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise TritonError(
            Code.INVALID_ARG, f"backend '{backend}': failed to import {library.path}: {type(exc).__name__}: {exc}"
        ) from exc
    version = getattr(module, "TRITONBACKEND_API_VERSION", API_VERSION)
    if not isinstance(version, tuple) or not version or version[0] != API_VERSION[0]:
        raise TritonError(
            Code.INVALID_ARG,
            f"backend '{backend}': API version {version} is not compatible with tritium's {API_VERSION}",
        )
    if not callable(getattr(module, REQUIRED_ENTRY_POINT, None)):
        raise TritonError(
            Code.INVALID_ARG, f"backend '{backend}': {library.path} does not define {REQUIRED_ENTRY_POINT}"
        )
    return module
