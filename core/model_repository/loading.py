"""Loading a model: its config (file or override, checked), one version's instances and warmup, the cache.

:func:`read_model_config` reads and prepares a model's config;
:func:`check_config_paths` refuses paths that leave the model folder;
:func:`ensemble_config` checks an ensemble against its composing models;
:func:`load_version` checks the backend against the server's composition
(``build.py``), starts a version's instances (through
:func:`~tritium.core.model.launch.load_model`), runs its ``model_warmup``
samples and returns it ready to serve; :func:`behind_cache` puts it behind
the response cache. The repository manager decides when a version becomes
visible and moves its state (:mod:`.lifecycle`). Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...proto import model_config_pb2 as mc
from ..cache import CachedModel, ResponseCache, check_cacheable
from ..ensemble import check_composing, check_scheduling
from ..errors import Code, TritonError
from ..memory.pool import TensorPool
from ..model.devices import gpu_ids
from ..model.instance import InstanceOptions
from ..model.launch import load_model
from ..model.model import Model
from ..model.servable import Servable
from ..model.warmup import run_warmup
from ..model_config import normalize
from ..model_config.checks import check_batch_strategy
from ..model_config.parser import config_from_dict, config_to_dict, read_config_file
from ..model_config.unsupported import refuse_unsupported
from ..observability.progress import still_running
from ..settings.composition import check_backend
from ..settings.options import ServerOptions
from ..worker.environment import PARAMETER as ENVIRONMENT_PARAMETER
from ..worker.environment import resolve_environment
from ..worker.placement import isolation_policy
from ..worker.preload import frameworks_for
from .agents import run_repository_agents
from .paths import check_model_name, check_relative_file
from .repository import ModelSource, read_labels

log = logging.getLogger("tritium.repository")

__all__ = [
    "read_model_config",
    "OverrideTooDeep",
    "MAX_OVERRIDE_DEPTH",
    "check_config_paths",
    "ensemble_config",
    "load_version",
    "behind_cache",
    "client_places",
    "execute_timeout",
    "backend_settings",
]


def read_model_config(source: ModelSource, override: str | None, auto_complete: bool) -> mc.ModelConfig:
    """The model's config: the JSON ``override`` or ``config.pbtxt``, defaults filled, checked.

    :param auto_complete: whether the server auto-completes configs (``--disable-auto-complete-config``).
    :raises TritonError: INVALID_ARG for an override that is not a JSON object, a
        config that does not parse or normalize, a decoupled model enabling the
        response cache, or an ensemble's bad scheduling; a repository agent's error
        (:func:`~.agents.run_repository_agents`).
    """
    if override is not None:
        data = _parse_override(override)
        data.setdefault("name", source.name)
        raw: mc.ModelConfig | None = config_from_dict(data, "the configuration override")
    else:
        raw = read_config_file(source.config_path) if source.config_path.exists() else None
    config = normalize.prepare(raw, source.name, source.path, auto_complete, gpu_ids())
    run_repository_agents(config, Path(source.path))
    check_cacheable(
        {
            "name": config.name,
            "response_cache": {"enable": config.response_cache.enable},
            "model_transaction_policy": {"decoupled": config.model_transaction_policy.decoupled},
        }
    )
    if config.platform == normalize.ENSEMBLE:
        check_scheduling(config_to_dict(config))
    return config


#: the deepest nesting of objects and arrays a configuration override may have (``ModelConfig``'s
#: deepest fields, e.g. ``sequence_batching.control_input[].control[].int32_false_true``, are 7 deep)
MAX_OVERRIDE_DEPTH = 32


class OverrideTooDeep(TritonError):
    """A configuration override nested past :data:`MAX_OVERRIDE_DEPTH`: the load request is answered
    400 / INVALID_ARGUMENT naming the limit (Triton 2.51's parser recurses into it; other override
    errors keep Triton's 500 ``failed to poll from model repository``)."""


def _parse_override(text: str) -> dict[str, Any]:
    """A load request's JSON configuration override, parsed and its nesting bounded.

    :raises TritonError: INVALID_ARG for text that is not JSON, not an object, or
        nested more than :data:`MAX_OVERRIDE_DEPTH` levels deep (Python's parser
        recurses: a deeper document is refused before, or as, it exhausts the stack).
    """
    too_deep = OverrideTooDeep(
        Code.INVALID_ARG, f"the configuration override is nested more than {MAX_OVERRIDE_DEPTH} levels deep"
    )
    try:
        data = json.loads(text)
    except RecursionError:
        raise too_deep from None
    except ValueError as exc:
        raise TritonError(Code.INVALID_ARG, f"failed to parse the configuration override: {exc}") from None
    if not isinstance(data, dict):
        raise TritonError(Code.INVALID_ARG, "the configuration override must be a JSON object")
    level: list[Any] = [data]
    for _ in range(MAX_OVERRIDE_DEPTH):
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, (dict, list))
        ]
        if not level:
            return data
    raise too_deep


def ensemble_config(
    name: str, config: mc.ModelConfig, gpus: Any, lookup: Callable[[str, str], Servable]
) -> dict[str, Any]:
    """An ensemble's final config (JSON form), checked against the composing models ``lookup`` finds.

    ``model_transaction_policy.decoupled`` is set when a composing model is decoupled.

    :raises TritonError: INVALID_ARG with Triton's message.
    """
    copy = mc.ModelConfig()
    copy.CopyFrom(config)
    refuse_unsupported(copy)
    final = config_to_dict(normalize.finalize(copy, name, gpus))
    decoupled = check_composing(final, lookup)
    final.setdefault("model_transaction_policy", {})["decoupled"] = decoupled
    return final


def behind_cache(model: Servable, cache: ResponseCache | None) -> Servable:
    """``model`` behind the response cache when its config enables it and the server has one.

    :raises TritonError: INVALID_ARG for a decoupled model that enables the cache.
    """
    if not check_cacheable(model.config):
        return model
    if cache is None:
        log.warning(
            "model '%s' enables the response cache, but the server has none (--cache-config): not caching",
            model.name,
        )
        return model
    return CachedModel(model, cache)


def client_places(backend_directory: str, source: Any) -> dict[str, str]:
    """The server's folders a client-facing message names by role instead (``<backend-directory>``, ...)."""
    places = {str(backend_directory): "<backend-directory>"}
    path = getattr(source, "path", None)
    if path is not None:
        places[str(path)] = f"<model-repository>/{Path(path).name}"
    return places


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
    settings: dict[str, Any] = {
        "backend": config.backend,
        "model_name": name,
        "version": version,
        "model_path": str(source.path),
        "backend_directory": server_options.backend_directory,
        "backend_config": backend_settings(server_options, config.backend),
        "runtime": config.runtime,
        "log_verbose": server_options.log_verbose,
        "load_threads": server_options.model_load_threads,
    }

    def finish(completed: dict[str, Any], final: bool) -> dict[str, Any]:
        if not final:
            return completed
        if completed == sent:  # the backend left it as it was: no need to parse it back
            unchanged = mc.ModelConfig()
            unchanged.CopyFrom(config)
            checked = normalize.finalize(unchanged, name, gpus)
        else:
            checked = normalize.finalize(
                config_from_dict(completed, f"the configuration of model '{name}'"), name, gpus
            )
        return config_to_dict(checked)

    async with still_running(log, f"loading '{name}' version {version}"):
        config = normalize.instance_groups(config, gpus)
        check_batch_strategy(config, [Path(source.path) / str(version), Path(source.path)])
        refuse_unsupported(config)
        sent = config_to_dict(config)
        environment = None
        if ENVIRONMENT_PARAMETER in config.parameters:  # blocking: it may unpack an archive
            environment = await asyncio.to_thread(resolve_environment, name, source.path, source.repository, sent)
        timeout = execute_timeout(config, settings["backend_config"])
        options = dataclasses.replace(instance_options, execute_timeout_s=timeout)
        if environment is not None:
            options = dataclasses.replace(options, python=environment.python, env=environment.env)
        policy = isolation_policy(
            name,
            config.backend,
            sent.get("parameters") or {},
            server_options.backend_config.get(config.backend, {}).get("worker-isolation"),
            server_options.backend_config.get("", {}).get("worker-isolation"),
            timeout,
        )
        check_backend(
            server_options.composition,
            name,
            config.backend,
            source.path,
            version,
            server_options.backend_directory,
            config.runtime,
        )
        model = await load_model(
            name,
            version,
            str(source.path),
            sent,
            settings,
            server_options.auto_complete,
            finish,
            lambda cfg: read_labels(source.path, cfg),
            pool,
            options,
            policy,
            (options.python, tuple(sorted((options.env or {}).items()))),
            frameworks_for(config.backend, source.path, version, sent),
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
        raise TritonError(
            Code.INVALID_ARG, f"model '{config.name}': execute timeout '{text}' is not a number of seconds >= 0"
        )
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
