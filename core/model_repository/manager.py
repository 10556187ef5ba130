"""The model repository manager: which models and versions are loaded, and their states.

At start-up (model control mode ``none``) every model of every repository is
loaded; a model that fails does so alone, with its reason logged and kept for
the index, while the others serve. Lookups answer with Triton's messages:
``Request for unknown model: 'm' is not found``, ``... version 3 is not
found``, ``... has no available versions``, ``... version 1 is not at ready
state``. Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from ...proto import model_config_pb2 as mc
from ..devices import gpu_ids
from ..errors import Code, TritonError
from ..memory.pool import TensorPool
from ..model import Model, ModelState, load_model
from ..model_config import normalize
from ..model_config.parser import config_from_dict, config_to_dict, read_config_file
from ..model_instance import InstanceOptions
from ..options import ServerOptions
from ..scheduler.rate_limiter import RateLimiter
from ..worker.environment import resolve_environment
from .repository import ModelSource, read_labels, scan, versions_to_load

log = logging.getLogger("tritium.repository")

__all__ = ["ModelRepositoryManager", "VersionStatus", "ModelEntry"]


@dataclass(slots=True)
class VersionStatus:
    """State of one version: READY / LOADING / UNLOADING / UNAVAILABLE, and why."""

    version: int
    state: str = ModelState.LOADING
    reason: str = ""
    model: Model | None = None


@dataclass(slots=True)
class ModelEntry:
    """A model name known to the manager.

    :ivar versions: its versions (empty when the model failed before any
        version could load, e.g. a config that does not parse).
    :ivar reason: why the model as a whole is unavailable, if it is.
    """

    name: str
    source: ModelSource | None
    versions: dict[int, VersionStatus] = field(default_factory=dict)
    reason: str = ""


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


class ModelRepositoryManager:
    """Loads the models of the repositories and answers which model serves a request.

    :param options: the server options.
    :param pool: the core's tensor pool.
    """

    def __init__(self, options: ServerOptions, pool: TensorPool) -> None:
        self.options = options
        self.pool = pool
        self.models: dict[str, ModelEntry] = {}
        self.instance_options = InstanceOptions(
            python=options.python,
            log_verbose=options.log_verbose,
            ping_interval_s=options.ping_interval_s,
            ping_timeout_s=options.ping_timeout_s,
            shutdown_timeout_s=options.exit_timeout_s,
            rate_limiter=RateLimiter(options.rate_limit_resources) if options.rate_limit == "execution_count" else None,
        )

    # -- loading -------------------------------------------------------------------
    async def load_all(self) -> None:
        """Load every model of every repository (failures are recorded, not raised)."""
        sources, duplicates = scan(self.options.model_repositories)
        for name in duplicates:
            self.models[name] = ModelEntry(name, None, reason="not unique across all model repositories")
        limit = asyncio.Semaphore(max(1, self.options.model_load_threads))

        async def load(source: ModelSource) -> None:
            async with limit:
                await self._load_model(source)

        await asyncio.gather(*(load(src) for src in sources.values()))

    async def _load_model(self, source: ModelSource) -> None:
        entry = ModelEntry(source.name, source)
        self.models[source.name] = entry
        gpus = gpu_ids()
        try:
            raw = read_config_file(source.config_path) if source.config_path.exists() else None
            config = normalize.prepare(raw, source.name, source.path, self.options.auto_complete, gpus)
        except TritonError as exc:
            entry.reason = exc.message
            log.error("Poll failed for model directory '%s': %s", source.name, exc.message)
            return
        versions = versions_to_load(source, config)
        if not versions:
            entry.reason = (
                f"at least one version must be available under the version policy of model '{source.name}'"
            )
            log.error("failed to load '%s': %s", source.name, entry.reason)
            return
        for version in versions:
            entry.versions[version] = VersionStatus(version)
        await asyncio.gather(*(self._load_version(entry, config, v, gpus) for v in versions))

    async def _load_version(self, entry: ModelEntry, config: mc.ModelConfig, version: int, gpus: Any) -> None:
        assert entry.source is not None
        status = entry.versions[version]
        source = entry.source
        log.info("loading: %s:%d", entry.name, version)
        settings = {
            "backend": config.backend,
            "model_name": entry.name,
            "version": version,
            "model_path": str(source.path),
            "backend_directory": self.options.backend_directory,
            "backend_config": backend_settings(self.options, config.backend),
            "runtime": config.runtime,
            "log_verbose": self.options.log_verbose,
        }

        def finish(completed: dict[str, Any], final: bool) -> dict[str, Any]:
            if not final:
                return completed
            checked = normalize.finalize(
                config_from_dict(completed, f"the configuration of model '{entry.name}'"), entry.name, gpus
            )
            return config_to_dict(checked)

        try:
            config = normalize.instance_groups(config, gpus)
            environment = await asyncio.to_thread(
                resolve_environment, entry.name, source.path, source.repository, config_to_dict(config)
            )
            options = dataclasses.replace(
                self.instance_options, execute_timeout_s=execute_timeout(config, settings["backend_config"])
            )
            if environment is not None:
                options = dataclasses.replace(options, python=environment.python, env=environment.env)
            if config.platform == normalize.ENSEMBLE:
                raise TritonError(Code.UNSUPPORTED, "ensemble models are not supported yet")
            model = await load_model(
                entry.name,
                version,
                str(source.path),
                config_to_dict(config),
                settings,
                self.options.auto_complete,
                finish,
                lambda cfg: read_labels(source.path, cfg),
                self.pool,
                options,
            )
        except TritonError as exc:
            status.state = ModelState.UNAVAILABLE
            status.reason = f"{exc.code.text}: {exc.message}"
            log.error("failed to load '%s' version %d: %s", entry.name, version, status.reason)
            return
        except Exception as exc:  # a bug must fail this model, not the server
            status.state = ModelState.UNAVAILABLE
            status.reason = f"Internal: {type(exc).__name__}: {exc}"
            log.exception("failed to load '%s' version %d: %s", entry.name, version, status.reason)
            return
        status.model = model
        status.state = ModelState.READY
        log.info("successfully loaded '%s' version %d", entry.name, version)

    async def unload_all(self) -> None:
        """Unload every loaded version (finalize backends, stop workers)."""
        models = [s.model for e in self.models.values() for s in e.versions.values() if s.model is not None]
        for entry in self.models.values():
            for status in entry.versions.values():
                if status.model is not None:
                    status.state = ModelState.UNLOADING
        await asyncio.gather(*(m.unload() for m in models), return_exceptions=True)
        for entry in self.models.values():
            for status in entry.versions.values():
                status.model = None
                status.state = ModelState.UNAVAILABLE
                status.reason = "unloaded"

    # -- lookups ---------------------------------------------------------------------
    @property
    def failures(self) -> list[str]:
        """Descriptions of every model or version that failed to load."""
        out = []
        for entry in self.models.values():
            if entry.reason:
                out.append(f"{entry.name}: {entry.reason}")
            for status in entry.versions.values():
                if status.state == ModelState.UNAVAILABLE and status.reason:
                    out.append(f"{entry.name} version {status.version}: {status.reason}")
        return out

    def get(self, name: str, version: str = "") -> Model:
        """The model serving requests for ``name`` (and ``version``; "" = highest READY version).

        :raises TritonError: NOT_FOUND or UNAVAILABLE with Triton's messages.
        """
        entry = self.models.get(name)
        if entry is None or not entry.versions:
            raise TritonError(Code.NOT_FOUND, f"Request for unknown model: '{name}' is not found")
        if not version:
            for v in sorted(entry.versions, reverse=True):
                status = entry.versions[v]
                if status.state == ModelState.READY and status.model is not None:
                    return status.model
            raise TritonError(Code.NOT_FOUND, f"Request for unknown model: '{name}' has no available versions")
        try:
            number = int(version)
        except ValueError:
            number = None
        status = entry.versions.get(number) if number is not None else None
        if status is None:
            raise TritonError(Code.NOT_FOUND, f"Request for unknown model: '{name}' version {version} is not found")
        if status.state != ModelState.READY or status.model is None:
            raise TritonError(
                Code.UNAVAILABLE, f"Request for unknown model: '{name}' version {version} is not at ready state"
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
                if status.state != ModelState.READY or status.model is None or not status.model.ready:
                    return False
        return True

    def loaded_models(self) -> list[Model]:
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

