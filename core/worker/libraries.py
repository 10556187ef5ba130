"""The backend libraries loaded in one worker process: each once, initialized once.

A worker may host the models of many model versions; those whose backend library is the
same file share one loaded library and one :class:`~tritium.core.backend.api.Backend`, on
which ``TRITONBACKEND_Initialize`` runs once (before the first model's
``TRITONBACKEND_ModelInitialize``) and ``TRITONBACKEND_Finalize`` once, when the worker
exits — as Triton does for the backends it loads into its process. Libraries of one
backend name found in different places (a model's own ``libtriton_<name>.py`` beside the
global one) are different libraries, imported under different module names; so is a
Python library whose file changed since it was imported (a model reloaded with a new
``libtriton_<name>.py`` gets the new one; a shared library (``.so``) is opened once per
process: a changed one needs the model in a worker of its own, ``worker_isolation: model``).

The template process (:mod:`.template`) preloads libraries here before it forks workers,
so a forked worker finds them imported already. Worker side; thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..backend.api import Backend
from ..backend.loader import BackendLibrary, load_backend_module

__all__ = ["LoadedBackend", "BackendLibraries"]


class LoadedBackend:
    """One imported backend library and its :class:`Backend` (None until initialized).

    :ivar module: the library: a Python module, or a native host that presents the
        same ``TRITONBACKEND_*`` functions.
    :ivar library: where it was found.
    """

    def __init__(self, module: Any, library: BackendLibrary) -> None:
        self.module = module
        self.library = library
        self.backend: Backend | None = None
        self.lock = threading.Lock()

    def call(self, name: str, *args: Any) -> None:
        """Call the library's entry point ``name`` when it defines one."""
        fn = getattr(self.module, name, None)
        if fn is not None:
            fn(*args)


def _identity(library: BackendLibrary) -> str:
    """What tells libraries apart: the path, and for Python code the file's size and modification time."""
    if library.kind == "shared_library":
        return str(library.path)
    source = library.path / "__init__.py" if library.kind == "package" else library.path
    try:
        stat = source.stat()
    except OSError:
        return str(library.path)
    return f"{library.path}:{stat.st_size}:{stat.st_mtime_ns}"


class BackendLibraries:
    """The libraries this process has loaded, by path."""

    def __init__(self) -> None:
        self._loaded: dict[str, LoadedBackend] = {}
        self._names: set[str] = set()
        self._lock = threading.Lock()

    def _load(self, library: BackendLibrary, name: str) -> LoadedBackend:
        key = _identity(library)
        with self._lock:
            found = self._loaded.get(key)
            if found is not None:
                return found
            module_name = f"tritium_backend_{name}"
            n = 1
            while module_name in self._names:
                n += 1
                module_name = f"tritium_backend_{name}_{n}"
            module = load_backend_module(library, name, module_name)
            self._names.add(module_name)
            loaded = self._loaded[key] = LoadedBackend(module, library)
            return loaded

    def preload(self, library: BackendLibrary, name: str) -> None:
        """Import ``library`` without initializing it (the template process, before forking).

        :raises TritonError: as :func:`~tritium.core.backend.loader.load_backend_module`.
        """
        self._load(library, name)

    def initialized(self, library: BackendLibrary, name: str, config: Mapping[str, str]) -> LoadedBackend:
        """``library`` loaded, with ``TRITONBACKEND_Initialize`` run once (the first caller runs it).

        :param config: the backend's ``--backend-config`` settings.
        :raises TritonError: when it cannot be imported, or its initialize fails (the next
            caller tries again).
        """
        loaded = self._load(library, name)
        with loaded.lock:
            if loaded.backend is None:
                backend = Backend(name, str(library.directory), config)
                loaded.call("TRITONBACKEND_Initialize", backend)
                loaded.backend = backend
        return loaded

    def finalize_all(self) -> BaseException | None:
        """``TRITONBACKEND_Finalize`` of every initialized library; returns the first failure."""
        error: BaseException | None = None
        with self._lock:
            loaded = list(self._loaded.values())
        for item in loaded:
            if item.backend is None:
                continue
            try:
                item.call("TRITONBACKEND_Finalize", item.backend)
            except BaseException as exc:  # noqa: BLE001 - reported to the core, the others still finalize
                error = error or exc
            item.backend = None
        return error
