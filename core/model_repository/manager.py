"""The model repository manager: which models and versions are loaded, and their states.

Model control modes ``none`` / ``poll`` / ``explicit`` (Triton's), the
model repository extension (index, load with a config override or uploaded
files, unload) and live reload. A model that fails to load does so alone,
with its reason logged and kept for the index, while the others serve. Lookups answer with Triton's messages:
``Request for unknown model: 'm' is not found``, ``... version 3 is not
found``, ``... has no available versions``, ``... version 1 is not at ready
state``. Runs on the core's event loop.

Ensembles follow Triton's dependency rules: they load after their composing
models and are checked against them; loading an ensemble (explicit mode)
loads its composing models too; unloading a composing model unloads the
ensembles that use it, and loading it again brings them back; reloading a
composing model re-checks its ensembles; ``unload_dependents`` on an
ensemble also unloads the composing models that were loaded only for it
(:mod:`.dependencies`). Every change of a version's state is a move of the
:mod:`.lifecycle` state machine; loading itself is :mod:`.loading`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ...proto import model_config_pb2 as mc
from ..cache import ResponseCache
from ..ensemble import EnsembleModel
from ..errors import Code, TritonError
from ..memory.pool import TensorPool
from ..model.devices import gpu_ids
from ..model.instance import InstanceOptions
from ..model.servable import Servable
from ..model_config import normalize
from ..scheduler.rate_limiter import RateLimiter
from ..settings.options import ServerOptions
from ..worker.supervisor import WorkerSupervisor
from .dependencies import EnsembleDependencies, closure, composing_of, composing_of_source, load_layers
from .lifecycle import NOT_LOADED, UNLOADED, ModelEntry, ModelState, VersionStatus
from .loading import (
    OverrideTooDeep,
    behind_cache,
    check_config_paths,
    client_places,
    ensemble_config,
    load_version,
    read_model_config,
)
from .lookups import ModelLookups
from .paths import check_model_name, redact_paths
from .remote import RemoteRepository, is_remote
from .repository import ModelSource, fingerprint, read_labels, scan, versions_to_load
from .uploads import ALLOW_FLAG, write_upload

log = logging.getLogger("tritium.repository")

__all__ = ["ModelEntry", "ModelRepositoryManager", "VersionStatus"]


def _record_refusal(entry: ModelEntry, source: ModelSource, mark: Any, reason: str, first: bool) -> None:
    """Record a load refused before any version loaded (a config that does not read or check, no
    version to load): poll mode retries only after the model folder changes again (``mark``, its
    fingerprint), and a model that was not serving shows ``reason`` with no versions. A serving
    model keeps serving its loaded versions, as in Triton."""
    entry.fingerprint = mark
    if first:
        entry.source, entry.reason, entry.versions = source, reason, {}


class ModelRepositoryManager:
    """Loads, reloads and unloads the models of the repositories; answers which model serves a request.

    Model control modes (``options.model_control_mode``): ``none`` loads
    every model at start-up and refuses load/unload requests; ``poll`` also
    follows the repository (added, removed and changed models) every
    ``repository_poll_s`` seconds; ``explicit`` loads only the start-up
    models (``--load-model``) and then what load requests ask for.

    A load of a model that serves already is a live reload: the new version
    instances start while the old ones serve, requests switch over once every
    new version is READY, and the old instances stop after their requests in
    flight finish. A failed reload leaves the old model serving.

    :param options: the server options.
    :param pool: the core's tensor pool.
    """

    def __init__(self, options: ServerOptions, pool: TensorPool) -> None:
        self.options = options
        self.pool = pool
        self.models: dict[str, ModelEntry] = {}
        #: which version serves a request, readiness, statistics (reads :attr:`models`)
        self.lookups = ModelLookups(self.models)
        #: the ensemble dependency rules, applied to :attr:`models` through this manager
        self.dependencies = EnsembleDependencies(self)
        self.instance_options = InstanceOptions(
            python=options.python,
            log_verbose=options.log_verbose,
            ping_interval_s=options.ping_interval_s,
            ping_timeout_s=options.ping_timeout_s,
            shutdown_timeout_s=options.exit_timeout_s,
            rate_limiter=RateLimiter(options.rate_limit_resources) if options.rate_limit == "execution_count" else None,
            workers=WorkerSupervisor(
                pool,
                options.python,
                options.backend_directory,
                reply_poll_us=options.reply_poll_us,
            ),
        )
        self.cache_dir = Path(options.model_cache_dir or Path(tempfile.gettempdir()) / f"tritium-cache-{os.getuid()}")
        self._remote = {
            url: RemoteRepository(url, self.cache_dir) for url in options.model_repositories if is_remote(url)
        }
        self._locks: dict[str, asyncio.Lock] = {}
        self._limit: asyncio.Semaphore | None = None
        self._retiring: set[asyncio.Task[None]] = set()
        self._poller: asyncio.Task[None] | None = None
        self._uploads: dict[str, Path] = {}
        #: the server's response cache (set before :meth:`start`; None without ``--cache-config``)
        self.cache: ResponseCache | None = None

    # -- the repository ---------------------------------------------------------------
    async def _roots(self) -> list[str]:
        """Local folders of the repositories (remote ones synced into the cache first)."""
        roots = []
        for url in self.options.model_repositories:
            remote = self._remote.get(url)
            roots.append(str(await asyncio.to_thread(remote.sync)) if remote is not None else url)
        return roots

    async def scan(self) -> tuple[dict[str, ModelSource], set[str]]:
        return await asyncio.to_thread(scan, await self._roots(), self.options.model_config_name)

    def _lock(self, name: str) -> asyncio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        return lock

    # -- start and stop -------------------------------------------------------------------
    async def start(self) -> None:
        """Load the start-up models for the control mode; in ``poll`` mode start polling.

        Failures are recorded (see :attr:`ModelLookups.failures`, in :attr:`lookups`), not raised.

        :raises TritonError: INVALID_ARG when a repository cannot be read.
        """
        sources, duplicates = await self.scan()
        for name in duplicates:
            self.models[name] = ModelEntry(name, None, reason="not unique across all model repositories")
        implicit: set[str] = set()
        if self.options.model_control_mode == "explicit" and self.options.startup_models != ["*"]:
            named = []
            for name in self.options.startup_models:
                if name in sources:
                    named.append(name)
                else:
                    self.models[name] = ModelEntry(name, None, reason="failed to poll from model repository")
                    log.error("failed to load '%s': model not found in any model repository", name)
            # an ensemble brings its composing models (as Triton: they load, not explicitly)
            wanted = closure(named, lambda n: composing_of_source(sources[n]) if n in sources else ())
            implicit = wanted - set(named)
            sources = {n: sources[n] for n in wanted if n in sources}
        for layer in load_layers(sources.values()):
            await asyncio.gather(*(self.load_logged(src, explicit=src.name not in implicit) for src in layer))
        if self.options.model_control_mode == "poll" and self.options.repository_poll_s > 0:
            self._poller = asyncio.ensure_future(self._poll_forever())

    async def load_logged(self, source: ModelSource, override: str | None = None, explicit: bool = True) -> bool:
        """:meth:`_load`, failures recorded and logged instead of raised; returns whether it loaded."""
        try:
            await self._load(source, override, explicit=explicit)
        except TritonError:
            return False  # recorded in the entry and logged
        return True

    async def unload_all(self) -> None:
        """Stop polling and unload every version (finalize backends, stop workers)."""
        if self._poller is not None:
            self._poller.cancel()
            self._poller = None
        models = [s.model for e in self.models.values() for s in e.versions.values() if s.model is not None]
        for entry in self.models.values():
            for status in entry.versions.values():
                if status.model is not None:
                    status.move(ModelState.UNLOADING)
        await asyncio.gather(*(m.unload() for m in models), *list(self._retiring), return_exceptions=True)
        for entry in self.models.values():
            for status in entry.versions.values():
                status.model = None
                status.move(ModelState.UNAVAILABLE, UNLOADED)
        for folder in self._uploads.values():
            shutil.rmtree(folder, ignore_errors=True)
        if self.instance_options.workers is not None:
            await self.instance_options.workers.close(self.options.exit_timeout_s)

    # -- the model repository extension ------------------------------------------------------
    def _check_control(self) -> None:
        if self.options.model_control_mode != "explicit":  # Triton's words, in modes none and poll alike
            raise TritonError(Code.UNAVAILABLE, "explicit model load / unload is not allowed if polling is enabled")

    async def load(
        self, name: str, config: str | None = None, files: dict[str, bytes] | None = None, folder: Path | None = None
    ) -> None:
        """``POST /v2/repository/models/<name>/load``: load, or reload, ``name``.

        :param config: a JSON model configuration that replaces ``config.pbtxt``.
        :param files: ``file:<path>`` contents (path relative to the model
            folder -> bytes): the model exists only in the request. Needs
            ``--model-load-allow-file-override`` and ``config``.
        :param folder: load the model folder ``folder`` (outside the repositories; its own name
            need not be ``name``) rather than the repositories' ``name``: what SageMaker's
            multi-model endpoint does (Triton registers the folder as a repository). The caller
            checks the path.
        :raises TritonError: UNAVAILABLE in modes ``none``/``poll``;
            INVALID_ARG for a bad name, a refused upload, or a model that
            failed to load (Triton's ``load failed for model ...``);
            INTERNAL ``failed to load 'm', failed to poll from model
            repository`` for a model that is not there or a config that
            does not parse.
        """
        self._check_control()
        check_model_name(name)
        if folder is not None:
            source = ModelSource(name, folder, folder.parent)
        elif files:
            if not self.options.allow_file_override:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"failed to load '{name}': loading model files sent in the request is disabled; "
                    f"start the server with {ALLOW_FLAG}=true to allow it",
                )
            if config is None:  # Triton's answer (its log says the config is missing)
                log.error("failed to load '%s': the model configuration must be provided with model files", name)
                raise TritonError(Code.INTERNAL, f"failed to load '{name}', failed to poll from model repository")
            folder = await asyncio.to_thread(write_upload, self.cache_dir / "uploads", name, files)
            source = ModelSource(name, folder, folder.parent, self.options.model_config_name)
        else:
            sources, _ = await self.scan()
            found = sources.get(name)
            if found is None:  # the client named a model that is not there: 400 (Triton 2.51 answers 500)
                raise TritonError(Code.INVALID_ARG, f"failed to load '{name}', failed to poll from model repository")
            source = found
        try:
            await self.dependencies.load_composing(source, config)
            await self._load(source, config, from_request=True)
        except TritonError:
            if files:
                shutil.rmtree(source.path, ignore_errors=True)
            raise
        if files:
            old = self._uploads.get(name)
            self._uploads[name] = source.path
            if old is not None and old != source.path:
                shutil.rmtree(old, ignore_errors=True)
        await self.dependencies.refresh_users(name)

    async def unload(self, name: str, unload_dependents: bool = False) -> None:
        """``POST /v2/repository/models/<name>/unload``: stop serving ``name``.

        Returns once the model no longer takes requests; its versions are
        UNLOADING until their requests in flight finish, then UNAVAILABLE
        ("unloaded"). Unloading a model that is not loaded succeeds, as in
        Triton. As in Triton, the ensembles that use the model are unloaded
        with it (they load again when it does), and ``unload_dependents`` on an
        ensemble also unloads its composing models that were loaded only for
        it (not asked for themselves, not used by another loaded ensemble).

        :raises TritonError: UNAVAILABLE in modes ``none``/``poll``, INVALID_ARG for a bad name.
        """
        self._check_control()
        check_model_name(name)
        async with self._lock(name):
            entry = self.models.get(name)
            if entry is None:
                return
            entry.waiting = False
            self.unload_entry(entry)
        self.dependencies.unload_users(name)
        if unload_dependents:
            self.dependencies.unload_parts(entry)

    def index(self, ready: bool = False) -> list[dict[str, str]]:
        """``POST /v2/repository/index``: every model of the repositories and its versions' states.

        Every model has a state and, unless READY, a reason. A model with no
        version to show is listed once without ``version``: ``LOADING`` while
        its config is read, else ``UNAVAILABLE`` with why (``not loaded``:
        never asked for in explicit mode; or its load error, e.g. no version
        folder). Triton 2.51 lists a never-loaded model by name only and
        leaves out one with no version folder (docs/compatibility.md).
        Models that exist only in a load request are not listed (as in Triton).

        :param ready: list only READY versions.
        """
        names: set[str] = set()
        try:
            roots = [str(self._remote[u].local) if u in self._remote else u for u in self.options.model_repositories]
            sources, duplicates = scan(roots, self.options.model_config_name)
            names = set(sources) | duplicates
        except TritonError:
            pass
        out: list[dict[str, str]] = []
        for name in sorted(names | {n for n, e in self.models.items() if e.source is None or n in names}):
            entry = self.models.get(name)
            versions = entry.versions if entry is not None else {}
            if not versions:
                if not ready:
                    out.append(self._unversioned(name, entry))
                continue
            for v in sorted(versions):
                status = versions[v]
                if ready and status.state != ModelState.READY:
                    continue
                item = {"name": name, "version": str(v), "state": status.state}
                if status.reason and status.state != ModelState.READY:
                    item["reason"] = status.reason
                out.append(item)
        return out

    def _unversioned(self, name: str, entry: ModelEntry | None) -> dict[str, str]:
        """The index entry of a model without versions to list: its state and why."""
        if entry is not None and entry.reason:
            return {"name": name, "state": ModelState.UNAVAILABLE, "reason": entry.reason}
        lock = self._locks.get(name)
        if lock is not None and lock.locked():
            return {"name": name, "state": ModelState.LOADING}
        return {"name": name, "state": ModelState.UNAVAILABLE, "reason": NOT_LOADED}

    # -- poll mode ---------------------------------------------------------------------------
    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(self.options.repository_poll_s)
            try:
                await self.poll()
            except TritonError as exc:
                log.error("failed to poll model repository: %s", exc.message)
            except Exception:  # a bug in one poll must not stop polling
                log.exception("failed to poll model repository")

    async def poll(self) -> None:
        """Load added models, unload removed ones, reload changed ones (poll mode)."""
        sources, duplicates = await self.scan()
        for name, entry in list(self.models.items()):
            failed = any(st.failed for st in entry.versions.values())
            if name not in sources and (entry.serving or failed):
                log.info("model '%s' was removed from the repository: unloading", name)
                async with self._lock(name):
                    self.unload_entry(entry)
                    entry.fingerprint = None  # put back as it was, it loads again
                self.dependencies.unload_users(name)
        changed = []
        for name, source in sources.items():
            known = self.models.get(name)
            mark = await asyncio.to_thread(fingerprint, source.path)
            if known is None or known.fingerprint != mark:
                changed.append(source)
        names = {src.name for src in changed}
        for layer in load_layers(changed):  # composing models first, then the ensembles using them
            for source in layer:
                log.info(
                    "model '%s' %s",
                    source.name,
                    "added: loading" if source.name not in self.models else "changed: reloading",
                )
                if await self.load_logged(source):
                    await self.dependencies.refresh_users(source.name, set(names))
        del duplicates

    # -- loading -------------------------------------------------------------------------
    async def _load(
        self, source: ModelSource, override: str | None = None, from_request: bool = False, explicit: bool = True
    ) -> None:
        """Load (or live-reload) every version of ``source`` the version policy selects.

        :param explicit: asked for itself (False: only as a composing model of an ensemble being loaded).
        :raises TritonError: why the model cannot load (the entry records it too).
        """
        name = source.name
        async with self._lock(name):
            entry = self.models.get(name)
            first = entry is None or not entry.serving
            if entry is None:
                entry = self.models[name] = ModelEntry(name, source)
            if explicit or first:
                entry.explicit = explicit
            previous = dict(entry.versions)
            mark = await asyncio.to_thread(fingerprint, source.path)
            gpus = gpu_ids()
            try:
                config = await asyncio.to_thread(self.read_config, source, override)
            except TritonError as exc:
                _record_refusal(entry, source, mark, exc.message, first)
                log.error("Poll failed for model directory '%s': %s", name, exc.message)
                if isinstance(exc, OverrideTooDeep):
                    raise TritonError(Code.INVALID_ARG, f"failed to load '{name}': {exc.message}") from None
                if from_request:
                    raise TritonError(
                        Code.INTERNAL, f"failed to load '{name}', failed to poll from model repository"
                    ) from exc
                raise
            try:
                check_config_paths(config, source.path)
            except TritonError as exc:
                _record_refusal(entry, source, mark, exc.message, first)
                log.error("failed to load '%s': %s", name, exc.message)
                raise TritonError(Code.INVALID_ARG, f"load failed for model '{name}': {exc.message}") from None
            ensemble = None
            if config.platform == normalize.ENSEMBLE:
                entry.composing = composing_of(config)
                try:  # against the composing models that serve now; a failure leaves no version, as Triton
                    ensemble = ensemble_config(name, config, gpus, self.lookups.get)
                except TritonError as exc:
                    self.dependencies.ensemble_failed(entry, source, override, mark, exc)
                    raise TritonError(Code.INVALID_ARG, f"load failed for model '{name}': {exc.message}\n") from None
            versions = versions_to_load(source, config)
            if not versions:
                reason = f"at least one version must be available under the version policy of model '{name}'"
                _record_refusal(entry, source, mark, reason, first)
                log.error("failed to load '%s': %s", name, reason)
                raise TritonError(Code.INVALID_ARG, f"load failed for model '{name}': {reason}\n")
            fresh = {v: VersionStatus.loading(v) for v in versions}
            if first:
                entry.source, entry.reason, entry.versions = source, "", fresh
            await asyncio.gather(
                *(self._load_version(name, source, fresh[v], config, gpus, ensemble) for v in versions)
            )
            failed = [s for s in fresh.values() if s.model is None]
            if failed:
                for status in fresh.values():  # all or nothing, as Triton
                    if status.model is not None:
                        self._retire(status.model, None)
                        status.model = None
                        status.move(ModelState.UNAVAILABLE, failed[0].reason)
                entry.fingerprint = mark
                if first:
                    entry.versions = fresh
                else:
                    log.error("failed to reload '%s'; the loaded versions keep serving", name)
                details = "".join(f"version {s.version} is at UNAVAILABLE state: {s.reason};" for s in failed)
                raise TritonError(Code.INVALID_ARG, f"load failed for model '{name}': {details}\n")
            # switch over: new versions serve from now on; the old ones drain and stop
            entry.source, entry.reason, entry.fingerprint = source, "", mark
            entry.override, entry.waiting = override, False
            merged = dict(fresh)
            for v, status in previous.items():
                if status.model is not None:
                    self._retire(status.model, None)
                if v not in merged:
                    merged[v] = VersionStatus.unloaded(v)
            entry.versions = merged

    def read_config(self, source: ModelSource, override: str | None) -> mc.ModelConfig:
        """The model's config: the JSON ``override`` or ``config.pbtxt`` (see :func:`~.loading.read_model_config`)."""
        return read_model_config(source, override, self.options.auto_complete)

    async def _load_version(
        self,
        name: str,
        source: ModelSource,
        status: VersionStatus,
        config: mc.ModelConfig,
        gpus: Any,
        ensemble: dict[str, Any] | None = None,
    ) -> None:
        """Load one version into ``status`` (READY, or UNAVAILABLE with the reason).

        :param ensemble: an ensemble's checked final config (None for other models).
        """
        if self._limit is None:
            self._limit = asyncio.Semaphore(max(1, self.options.model_load_threads))
        async with self._limit:
            try:
                if ensemble is not None:
                    log.info("loading: %s:%d", name, status.version)
                    labels = read_labels(source.path, ensemble)
                    model: Servable = EnsembleModel(
                        name, status.version, str(source.path), ensemble, self.lookups.get, labels
                    )
                else:
                    model = await self._load_retried(name, status.version, source, config, gpus)
                try:
                    status.model = behind_cache(model, self.cache)
                except TritonError:
                    await model.unload()
                    raise
            except TritonError as exc:
                # the server's folders by role (the options table names them): the log line reads
                # as the model table, the final error and the clients' answers do
                places = client_places(self.options.backend_directory, source)
                reason = redact_paths(f"{exc.code.text}: {exc.message}", places)
                log.error("failed to load '%s' version %d: %s", name, status.version, reason)
                status.move(ModelState.UNAVAILABLE, reason)
                return
            except Exception as exc:  # a bug must fail this model, not the server
                status.move(ModelState.UNAVAILABLE, f"Internal: {type(exc).__name__}: {exc}")
                log.exception("failed to load '%s' version %d: %s", name, status.version, status.reason)
                return
        status.move(ModelState.READY)
        log.info("successfully loaded '%s' version %d", name, status.version)

    async def _load_retried(
        self, name: str, version: int, source: ModelSource, config: mc.ModelConfig, gpus: Any
    ) -> Servable:
        """:func:`~.loading.load_version`, tried again up to ``--model-load-retry-count`` times when it
        fails (Triton's ``load_retry``: at once, each try a fresh start of the backend's model and instances).

        :raises TritonError: the last try's error.
        """
        retries = self.options.model_load_retries
        for attempt in range(retries + 1):
            try:
                return await load_version(
                    name, version, source, config, gpus, self.options, self.instance_options, self.pool
                )
            except TritonError as exc:
                if attempt == retries:
                    raise
                log.warning(
                    "failed to load '%s' version %d, trying again (try %d of %d failed): %s",
                    name,
                    version,
                    attempt + 1,
                    retries + 1,
                    exc.message,
                )
        raise AssertionError("unreachable")

    def unload_entry(self, entry: ModelEntry) -> None:
        """Take every loaded version of ``entry`` out of routing; each drains and stops (UNLOADING).

        Versions that had failed to load become "unloaded" too, so they no
        longer hold the server's readiness down.
        """
        for status in entry.versions.values():
            if status.model is not None:
                status.move(ModelState.UNLOADING)
                self._retire(status.model, status)
                status.model = None
            elif status.state != ModelState.UNLOADING:
                status.move(ModelState.UNAVAILABLE, UNLOADED)

    def _retire(self, model: Servable, status: VersionStatus | None) -> None:
        """Drain ``model`` (no new requests reach it) and unload it in the background."""

        async def retire() -> None:
            if not await model.drain(self.options.exit_timeout_s):
                log.warning(
                    "model %s: %d requests still in flight after %.0f s",
                    model.label,
                    model.active,
                    self.options.exit_timeout_s,
                )
            await model.unload()
            log.info("successfully unloaded '%s' version %d", model.name, model.version)
            if status is not None and status.state == ModelState.UNLOADING:
                status.move(ModelState.UNAVAILABLE, UNLOADED)

        task = asyncio.ensure_future(retire())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)
