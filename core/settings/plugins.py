"""Finding and enabling endpoint plugins: ``plugins.toml`` plus the ``tritium.frontends`` entry points."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import tomllib
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pluggy

from ..errors import Code, TritonError
from ..hookspecs import PROJECT, Frontend, FrontendSpec

log = logging.getLogger("tritium.plugins")

__all__ = ["PluginSettings", "load_plugin_settings", "create_frontends", "default_plugins_file", "with_settings"]

_BUILTIN = {
    "http": "tritium.frontends.kserve_http",
    "grpc": "tritium.frontends.kserve_grpc",
    "metrics": "tritium.frontends.metrics",
}

PluginSettings = Mapping[str, Any]


def default_plugins_file() -> Path:
    """``plugins.toml`` of this installation.

    First found of: ``$TRITIUM_PLUGINS``; ``<sys.prefix>/share/tritium/plugins.toml``
    (the composition ``build.py`` installs into an image or ``--install-dir``
    environment); the ``plugins.toml`` shipped with the package.
    """
    override = os.environ.get("TRITIUM_PLUGINS")
    if override:
        return Path(override)
    composed = Path(sys.prefix) / "share" / "tritium" / "plugins.toml"
    if composed.is_file():
        return composed
    return Path(__file__).resolve().parent.parent / "plugins.toml"


def load_plugin_settings(path: Path | None = None) -> dict[str, Any]:
    """Read ``plugins.toml``; a missing file means the built-in defaults (http, grpc, metrics).

    :raises TritonError: INVALID_ARG for a file that is not valid TOML.
    """
    path = path or default_plugins_file()
    if not path.exists():
        return {"frontends": {name: {"enabled": True} for name in _BUILTIN}}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TritonError(Code.INVALID_ARG, f"failed to read {path}: {exc}") from exc


def with_settings(config: Mapping[str, Any], overrides: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``config`` (parsed ``plugins.toml``) with command-line settings laid over its frontend tables.

    :param overrides: frontend name -> settings (``ServerOptions.frontend_settings``); a
        frontend that ``plugins.toml`` does not name gets a table of its own.
    """
    merged = dict(config)
    frontends = {name: dict(table or {}) for name, table in (config.get("frontends") or {}).items()}
    for name, settings in overrides.items():
        frontends.setdefault(name, {}).update(settings)
    merged["frontends"] = frontends
    return merged


def _module_for(name: str, settings: Mapping[str, Any]) -> str:
    if "module" in settings:
        return str(settings["module"])
    for ep in entry_points(group="tritium.frontends"):
        if ep.name == name:
            return ep.value
    if name in _BUILTIN:
        return _BUILTIN[name]
    raise TritonError(
        Code.INVALID_ARG,
        f"frontend '{name}' is enabled in plugins.toml but no installed package provides it "
        "(no 'tritium.frontends' entry point of that name and no 'module' setting)",
    )


def create_frontends(server: Any, config: Mapping[str, Any], wanted: Mapping[str, bool]) -> list[Frontend]:
    """Create every frontend enabled in ``config`` and switched on by the flags in ``wanted``.

    :param config: the parsed ``plugins.toml``.
    :param wanted: ``{"http": options.http, ...}``; names absent default to True.
    :raises TritonError: INVALID_ARG when an enabled frontend cannot be found or created.
    """
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(FrontendSpec)
    enabled: list[tuple[str, Mapping[str, Any]]] = []
    for name, settings in (config.get("frontends") or {}).items():
        if not settings.get("enabled", True) or not wanted.get(name, True):
            continue
        module_name = _module_for(name, settings)
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise TritonError(Code.INVALID_ARG, f"cannot import frontend '{name}' ({module_name}): {exc}") from exc
        if not manager.is_registered(module):
            manager.register(module, name=module_name)
        enabled.append((name, settings))
    frontends: list[Frontend] = []
    for name, settings in enabled:
        results = manager.hook.tritium_frontend(name=name, server=server, settings=settings)
        if not results:
            raise TritonError(Code.INVALID_ARG, f"no installed plugin provides frontend '{name}'")
        frontends.append(results[0])
    return frontends
