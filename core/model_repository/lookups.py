"""What the repository answers about its models: which version serves a request, readiness, statistics.

:class:`ModelLookups` is the read side of the
:class:`~.manager.ModelRepositoryManager` (which holds one over its models): lookups over
``self.models`` with Triton's messages (``Request for unknown model: 'm' is
not found``, ``... version 3 is not found``, ``... has no available
versions``, ``... version 1 is not at ready state``). Runs on the core's
event loop.
"""

from __future__ import annotations

from typing import Any

from ..errors import Code, TritonError, clip
from ..model.servable import Servable
from .lifecycle import ModelEntry, ModelState

__all__ = ["ModelLookups"]


class ModelLookups:
    """Lookups over the repository manager's model entries (``models``: name -> entry, shared, not copied)."""

    def __init__(self, models: dict[str, ModelEntry]) -> None:
        self.models = models

    @property
    def failures(self) -> list[str]:
        """Descriptions of every model or version that failed to load (a version unloaded on purpose,
        by an unload request, a reload or the server stopping, is not one)."""
        out = []
        for entry in self.models.values():
            if entry.reason:
                out.append(f"{entry.name}: {entry.reason}")
            for status in entry.versions.values():
                if status.state == ModelState.UNAVAILABLE and status.reason and not status.unloaded_on_purpose:
                    out.append(f"{entry.name} version {status.version}: {status.reason}")
        return out

    def get(self, name: str, version: str = "") -> Servable:
        """The model serving requests for ``name`` (and ``version``; "" = highest READY version).

        :raises TritonError: NOT_FOUND or UNAVAILABLE with Triton's messages.
        """
        entry = self.models.get(name)
        if entry is None or not entry.versions:
            raise TritonError(Code.NOT_FOUND, f"Request for unknown model: '{clip(name)}' is not found")
        if not version:
            for v in sorted(entry.versions, reverse=True):
                candidate = entry.versions[v]
                if candidate.state == ModelState.READY and candidate.model is not None:
                    return candidate.model
            raise TritonError(Code.NOT_FOUND, f"Request for unknown model: '{clip(name)}' has no available versions")
        try:
            number = int(version)
        except ValueError:
            number = None
        status = entry.versions.get(number) if number is not None else None
        if status is None:
            raise TritonError(
                Code.NOT_FOUND, f"Request for unknown model: '{clip(name)}' version {version} is not found"
            )
        if status.state != ModelState.READY or status.model is None:
            raise TritonError(
                Code.UNAVAILABLE, f"Request for unknown model: '{clip(name)}' version {version} is not at ready state"
            )
        return status.model

    def versions(self, name: str) -> list[int]:
        """READY versions of ``name``, ascending."""
        entry = self.models.get(name)
        if entry is None:
            return []
        return sorted(v for v, s in entry.versions.items() if s.state == ModelState.READY)

    def is_ready(self, name: str, version: str = "") -> bool:
        """True when ``name`` (``version``) is loaded and every instance is available."""
        try:
            return self.get(name, version).ready
        except TritonError:
            return False

    @property
    def all_ready(self) -> bool:
        """True when every loaded model version is READY (strict readiness).

        As in Triton, a model whose folder could not even be read as a model
        (e.g. its config does not parse) is not counted: it never became a
        model; a version that failed to load is.
        """
        for entry in self.models.values():
            for status in entry.versions.values():
                if status.unloaded_on_purpose:
                    continue
                if status.state != ModelState.READY or status.model is None or not status.model.ready:
                    return False
        return True

    def loaded_models(self) -> list[Servable]:
        """Every READY model version, by name then version."""
        out = []
        for name in sorted(self.models):
            for v in sorted(self.models[name].versions):
                status = self.models[name].versions[v]
                if status.state == ModelState.READY and status.model is not None:
                    out.append(status.model)
        return out

    def statistics(self, name: str = "", version: str = "") -> list[dict[str, Any]]:
        """``model_stats`` entries of the statistics extension.

        :raises TritonError: INVALID_ARG ("requested model 'm' is not available",
            "requested model version is not available for model 'm'"), as Triton.
        """
        if not name:
            return [m.stats.to_dict() for m in self.loaded_models()]
        entry = self.models.get(name)
        ready = [m for m in self.loaded_models() if m.name == name]
        if entry is None or not ready:
            raise TritonError(Code.INVALID_ARG, f"requested model '{name}' is not available")
        if not version:
            return [m.stats.to_dict() for m in ready]
        chosen = [m for m in ready if str(m.version) == version]
        if not chosen:
            raise TritonError(Code.INVALID_ARG, f"requested model version is not available for model '{name}'")
        return [chosen[0].stats.to_dict()]
