"""Which models an ensemble composes, in what order models load, and who depends on whom.

Ensembles (``platform: "ensemble"``) name their composing models in
``ensemble_scheduling.step[].model_name``. The repository manager loads
composing models before the ensembles that use them and, as Triton's
dependency graph does, unloads or re-checks an ensemble when one of its
composing models goes away or changes. The functions are pure (no I/O
beyond reading a config file); :class:`EnsembleDependencies`, which the
repository manager holds, applies those rules to the manager's models through
the calls :class:`DependencyHost` names. Runs on the core's
event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from ...proto import model_config_pb2 as mc
from ..errors import TritonError
from ..model_config import normalize
from ..model_config.parser import read_config_file
from .lifecycle import ModelEntry
from .repository import ModelSource

log = logging.getLogger("tritium.repository")

__all__ = [
    "DependencyHost",
    "EnsembleDependencies",
    "closure",
    "composing_of",
    "composing_of_source",
    "load_layers",
    "users",
]


def composing_of(config: mc.ModelConfig | None) -> frozenset[str]:
    """Names of the models an ensemble's config composes (empty for any other model)."""
    if config is None or config.platform != normalize.ENSEMBLE:
        return frozenset()
    return frozenset(step.model_name for step in config.ensemble_scheduling.step)


def composing_of_source(source: ModelSource) -> frozenset[str]:
    """:func:`composing_of` for a model folder's ``config.pbtxt`` (empty when it is missing or unreadable)."""
    try:
        config = read_config_file(source.config_path) if source.config_path.exists() else None
    except TritonError:
        return frozenset()
    return composing_of(config)


def load_layers(sources: Iterable[ModelSource]) -> list[list[ModelSource]]:
    """``sources`` in groups that can load together: each ensemble after the models it composes.

    A model composed by nothing in ``sources`` is in the first group; an
    ensemble of ensembles comes after those. Models in a cycle (a config
    error the ensemble checks report) end up together in the last group.
    """
    pending = list(sources)
    composing = {src.name: composing_of_source(src) for src in pending}
    layers = []
    while pending:
        names = {src.name for src in pending}
        ready = [src for src in pending if not (composing[src.name] & names)] or pending
        layers.append(ready)
        pending = [src for src in pending if src not in ready]
    return layers


def closure(names: Iterable[str], composing: Callable[[str], Iterable[str]]) -> set[str]:
    """``names`` and, transitively, every model they compose.

    :param composing: ``name -> the models it composes`` (empty for non-ensembles).
    """
    out: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in out:
            continue
        out.add(name)
        stack.extend(composing(name))
    return out


def users(name: str, composing: Mapping[str, Iterable[str]]) -> list[str]:
    """The ensembles (by name, sorted) whose steps use ``name`` directly."""
    return sorted(e for e, parts in composing.items() if name in parts)


class DependencyHost(Protocol):
    """What :class:`EnsembleDependencies` uses of the repository manager that holds it."""

    @property
    def models(self) -> dict[str, ModelEntry]:
        """The manager's models: name -> entry."""
        ...

    async def scan(self) -> tuple[dict[str, ModelSource], set[str]]:
        """The model folders of the repositories now, and the names found in more than one."""
        ...

    def read_config(self, source: ModelSource, override: str | None) -> mc.ModelConfig:
        """The model config of ``source`` (or ``override``), read and checked (raises TritonError)."""
        ...

    async def load_logged(self, source: ModelSource, override: str | None = None, explicit: bool = True) -> bool:
        """Load ``source``, failures recorded and logged instead of raised; whether it loaded."""
        ...

    def unload_entry(self, entry: ModelEntry) -> None:
        """Start unloading every version of ``entry`` (its requests drain in the background)."""
        ...


class EnsembleDependencies:
    """Triton's ensemble dependency rules over the models of ``host`` (the repository manager)."""

    def __init__(self, host: DependencyHost) -> None:
        self.host = host

    async def load_composing(self, source: ModelSource, override: str | None) -> None:
        """Load the composing models of ensemble ``source`` that do not serve yet (not explicitly, as Triton)."""
        try:
            config = await asyncio.to_thread(self.host.read_config, source, override)
        except TritonError:
            return  # the ensemble's own load reports it
        parts = composing_of(config)
        if not parts:
            return
        sources, _ = await self.host.scan()
        needed = closure(parts, lambda n: composing_of_source(sources[n]) if n in sources else ())
        missing = [
            sources[n]
            for n in sorted(needed - {source.name})
            if n in sources and not (n in self.host.models and self.host.models[n].serving)
        ]
        for layer in load_layers(missing):  # a failure shows in the ensemble's own check
            await asyncio.gather(*(self.host.load_logged(src, explicit=False) for src in layer))

    def unload_users(self, name: str) -> None:
        """Unload the ensembles that use ``name`` (gone or no longer fitting); they wait for it to load again."""
        for user in users(name, {n: e.composing for n, e in self.host.models.items() if e.serving}):
            entry = self.host.models[user]
            log.error(
                "Invalid argument: ensemble %s contains models that are not available or ambiguous: %s", user, name
            )
            entry.waiting = True
            self.host.unload_entry(entry)
            self.unload_users(user)

    def unload_parts(self, entry: ModelEntry) -> None:
        """``unload_dependents``: unload ``entry``'s composing models loaded only for ensembles now unloaded."""
        for part in sorted(entry.composing):
            composing = self.host.models.get(part)
            in_use = {p for e in self.host.models.values() if e.serving for p in e.composing}
            if composing is None or composing.explicit or not composing.serving or part in in_use:
                continue
            self.host.unload_entry(composing)
            self.unload_parts(composing)

    async def refresh_users(self, name: str, seen: set[str] | None = None) -> None:
        """After ``name`` (re)loaded: re-check the ensembles that use it, and load those waiting for it."""
        seen = set() if seen is None else seen
        seen.add(name)
        candidates = {n: e.composing for n, e in self.host.models.items() if e.serving or e.waiting}
        for user in users(name, candidates):
            entry = self.host.models[user]
            if user in seen or entry.source is None:
                continue
            seen.add(user)
            if await self.host.load_logged(entry.source, entry.override, explicit=entry.explicit):
                await self.refresh_users(user, seen)

    def ensemble_failed(
        self, entry: ModelEntry, source: ModelSource, override: str | None, mark: Any, exc: TritonError
    ) -> None:
        """An ensemble that does not fit its composing models: as Triton, it stops serving and waits for them."""
        entry.source, entry.override, entry.fingerprint, entry.waiting = source, override, mark, True
        reason = f"{exc.code.text}: {exc.message}"
        log.error("failed to load '%s': %s", entry.name, reason)
        if entry.serving:
            self.host.unload_entry(entry)
            self.unload_users(entry.name)
        elif not entry.versions:
            entry.reason = reason
