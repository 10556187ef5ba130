"""Which models an ensemble composes, in what order models load, and who depends on whom.

Ensembles (``platform: "ensemble"``) name their composing models in
``ensemble_scheduling.step[].model_name``. The repository manager loads
composing models before the ensembles that use them and, as Triton's
dependency graph does, unloads or re-checks an ensemble when one of its
composing models goes away or changes. Pure functions; no I/O beyond
reading a config file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ...proto import model_config_pb2 as mc
from ..errors import TritonError
from ..model_config import normalize
from ..model_config.parser import read_config_file
from .repository import ModelSource

__all__ = ["closure", "composing_of", "composing_of_source", "load_layers", "users"]


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
