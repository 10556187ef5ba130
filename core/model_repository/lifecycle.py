"""One model version's load: config path checks, instances, warmup; and what poll mode compares.

:func:`load_version` checks the backend against the server's composition
(``build.py``), starts a version's instances (through
:func:`~tritium.core.model_loading.load_model`), runs its ``model_warmup`` samples and
returns it ready to serve; the repository manager decides when it becomes
visible. Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from pathlib import Path
from typing import Any

from ...proto import model_config_pb2 as mc
from ..composition import check_backend
from ..errors import Code, TritonError
from ..memory.pool import TensorPool
from ..model import Model
from ..model_loading import load_model
from ..model_config import normalize
from ..model_config.parser import config_from_dict, config_to_dict
from ..model_instance import InstanceOptions
from ..progress import still_running
from ..options import ServerOptions
from ..warmup import run_warmup
from ..worker.environment import resolve_environment
from .paths import check_model_name, check_relative_file
from .repository import ModelSource, read_labels

log = logging.getLogger("tritium.repository")

__all__ = ["fingerprint", "check_config_paths", "load_version", "execute_timeout", "backend_settings"]


def fingerprint(path: Path) -> tuple[tuple[str, int, int], ...]:
    """What poll mode compares to see a model folder changed: every folder, and every file's path, size and mtime."""
    out = []
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


def check_config_paths(config: mc.ModelConfig, model_path: Path) -> None:
    """Refuse ``default_model_filename`` / ``runtime`` values that leave the model folder, and bad step names.

    :raises TritonError: INVALID_ARG naming the field.
    """
    check_relative_file(model_path, config.default_model_filename, "default_model_filename")
    check_relative_file(model_path, config.runtime, "runtime")
    for step in config.ensemble_scheduling.step:
        check_model_name(step.model_name, "ensemble step model_name")


async def load_version(
    name: str,
    version: int,
    source: ModelSource,
    config: mc.ModelConfig,
    gpus: Any,
    server_options: ServerOptions,
    instance_options: InstanceOptions,
    pool: TensorPool,
) -> Model:
    """Start one version's instances, run its warmup, and return it ready to serve.

    :raises TritonError: why the version cannot load (its instances are stopped).
    """
    log.info("loading: %s:%d", name, version)
    settings = {
        "backend": config.backend,
        "model_name": name,
        "version": version,
        "model_path": str(source.path),
        "backend_directory": server_options.backend_directory,
        "backend_config": backend_settings(server_options, config.backend),
        "runtime": config.runtime,
        "log_verbose": server_options.log_verbose,
    }

    def finish(completed: dict[str, Any], final: bool) -> dict[str, Any]:
        if not final:
            return completed
        checked = normalize.finalize(config_from_dict(completed, f"the configuration of model '{name}'"), name, gpus)
        return config_to_dict(checked)

    async with still_running(log, f"loading '{name}' version {version}"):
        config = normalize.instance_groups(config, gpus)
        environment = await asyncio.to_thread(
            resolve_environment, name, source.path, source.repository, config_to_dict(config)
        )
        options = dataclasses.replace(
            instance_options, execute_timeout_s=execute_timeout(config, settings["backend_config"])
        )
        if environment is not None:
            options = dataclasses.replace(options, python=environment.python, env=environment.env)
        check_backend(
            server_options.composition, name, config.backend, source.path, version,
            server_options.backend_directory, config.runtime,
        )
        model = await load_model(
            name,
            version,
            str(source.path),
            config_to_dict(config),
            settings,
            server_options.auto_complete,
            finish,
            lambda cfg: read_labels(source.path, cfg),
            pool,
            options,
        )
        if model.config.get("model_warmup"):
            try:
                await run_warmup(model, source.path)
            except BaseException:
                await model.unload()
                raise
    return model


def execute_timeout(config: mc.ModelConfig, backend_config: dict[str, str]) -> float:
    """Seconds a batch may execute before its worker is killed and restarted (0: no limit).

    The model config parameter ``execute_timeout_seconds`` wins over the backend setting
    ``--backend-config=<backend>,execute-timeout-seconds=N``.

    :raises TritonError: INVALID_ARG for a value that is not a non-negative number.
    """
    text = backend_config.get("execute-timeout-seconds", "0")
    if "execute_timeout_seconds" in config.parameters:
        text = config.parameters["execute_timeout_seconds"].string_value
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise TritonError(Code.INVALID_ARG, f"model '{config.name}': execute timeout '{text}' is not a number of seconds >= 0")
    return value


def backend_settings(options: ServerOptions, backend: str) -> dict[str, str]:
    """The backend configuration Triton gives a backend: defaults, then global, then its own settings."""
    settings = {
        "auto-complete-config": "true" if options.auto_complete else "false",
        "backend-directory": options.backend_directory,
        "default-max-batch-size": "4",
    }
    settings.update(options.backend_config.get("", {}))
    settings.update(options.backend_config.get(backend, {}))
    return settings


class ModelState:
    """Triton's model version states, as the repository index names them."""

    READY = "READY"
    UNAVAILABLE = "UNAVAILABLE"
    LOADING = "LOADING"
    UNLOADING = "UNLOADING"
