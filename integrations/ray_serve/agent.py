"""A replica's side of the coordinator: it joins, polls for commands, and answers cluster-wide calls.

Runs inside each ``TritiumServer`` replica, on the replica's event loop (the
one its :class:`~tritium.core.api.ServerAPI` runs on). Two roles:

- **Member.** :meth:`ReplicaAgent.join` registers the replica with the
  :class:`~.coordinator.Coordinator` and replays the repository log (the
  model loads and unloads the other replicas have had); :meth:`run` then
  polls for commands and answers each from the local server: ``ready``,
  ``model_ready``, ``statistics``, ``metrics``, ``repository`` (a load or
  unload, applied in the order the coordinator sends them).
- **Cluster view.** The request handlers ask it for answers that cover every
  replica: :meth:`ready`, :meth:`model_ready`, :meth:`statistics` (it is the
  endpoints' :class:`~tritium.frontends.base.ClusterView`), :meth:`metrics`,
  :meth:`load_model`, :meth:`unload_model` (through :class:`~.replica_api.ReplicaServer`).

Errors travel between replicas as ``[code, message]``
(:meth:`~tritium.core.errors.TritonError.to_wire`), never as pickled exceptions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ...core.api import Code, TritonError
from ...frontends.metrics.collector import TritiumCollector
from .aggregate import merge_statistics, metric_families, render_metrics
from .coordinator import GONE, TIMEOUT, Reply

log = logging.getLogger("tritium.ray_serve")

__all__ = ["ReplicaAgent"]

_RETRY_S = (0.2, 0.5, 1.0, 2.0)  # back-off between failed calls to the coordinator


class ReplicaAgent:
    """The coordinator's member in one replica.

    :param server: the replica's started :class:`~tritium.core.api.ServerAPI`.
    :param coordinator: a handle on the coordinator: an object whose methods
        ``join``/``leave``/``poll``/``reply``/``call_all``/``repository`` each have a
        ``.remote(...)`` returning an awaitable (a Serve deployment handle).
    :param replica_id: this replica's Serve id.
    :param actor: this replica's Ray actor handle (the coordinator probes it), or None.
    :param settings: the application's :class:`~.args.Settings`.
    """

    def __init__(self, server: Any, coordinator: Any, replica_id: str, actor: Any, settings: Any) -> None:
        self.server = server
        self.coordinator = coordinator
        self.replica_id = replica_id
        self.actor = actor
        self.settings = settings
        self.generation = 0
        self.log: list[dict[str, Any]] = []
        self._repository_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False

    # -- membership ------------------------------------------------------------------------------
    async def _call(self, method: str, *args: Any, timeout_s: float) -> Any:
        return await asyncio.wait_for(getattr(self.coordinator, method).remote(*args), timeout_s)

    async def join(self) -> None:
        """Join the coordinator and apply the repository operations this replica has not had.

        :raises TritonError: UNAVAILABLE when the coordinator cannot be reached
            within the query timeout (the replica then fails to start, and Serve retries it).
        """
        try:
            generation, missing = await self._call(
                "join",
                self.replica_id,
                self.actor,
                self.generation,
                self.log,
                timeout_s=self.settings.query_timeout_s,
            )
        except (TimeoutError, Exception) as exc:
            raise TritonError(Code.UNAVAILABLE, f"cannot join the tritium coordinator: {exc!r}") from None
        for operation in missing:
            result = await self._repository(operation)
            if result[0] != "ok":
                log.warning("replaying %s of model '%s': %s", operation["action"], operation["name"], result[1])
        self.generation = max(self.generation, generation)

    def start(self) -> None:
        """Start polling the coordinator for commands (on the running loop)."""
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> None:
        """Poll for commands until :meth:`stop`; join again when the coordinator forgot this replica."""
        failures = 0
        while not self._stopping:
            try:
                commands = await self._call(
                    "poll", self.replica_id, self.settings.poll_s, timeout_s=self.settings.poll_s + 30.0
                )
                if commands is None:  # a new coordinator, or this replica was taken for gone
                    await self.join()
                    continue
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the coordinator is restarting: try again, backing off
                delay = _RETRY_S[min(failures, len(_RETRY_S) - 1)]
                failures += 1
                if failures in (1, 10) or failures % 100 == 0:
                    log.warning("polling the tritium coordinator failed (%d times): %r", failures, exc)
                await asyncio.sleep(delay)
                continue
            for call_id, method, payload in commands:
                task = asyncio.get_running_loop().create_task(self._answer(call_id, method, payload))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    @property
    def healthy(self) -> bool:
        """The polling loop is running (Serve's health check restarts the replica otherwise)."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Leave the coordinator and stop polling (a replica that stops calls this first)."""
        self._stopping = True
        try:
            await self._call("leave", self.replica_id, timeout_s=5.0)
        except Exception as exc:
            log.warning("leaving the tritium coordinator failed: %r", exc)
        for task in [self._task, *self._tasks]:
            if task is not None and not task.done():
                task.cancel()

    async def _answer(self, call_id: int, method: str, payload: Any) -> None:
        result = await self._run(method, payload)
        try:
            await self._call("reply", call_id, self.replica_id, result, timeout_s=self.settings.query_timeout_s)
        except Exception as exc:
            log.warning("answering %s to the tritium coordinator failed: %r", method, exc)

    # -- the local answers ------------------------------------------------------------------------
    async def _run(self, method: str, payload: Any) -> Reply:
        """Answer one command from the local server."""
        server = self.server
        local: dict[str, Callable[[], Any]] = {
            "ready": lambda: server.ready,
            "model_ready": lambda: server.model_ready(*payload),
            "statistics": lambda: server.statistics(*payload),
            "metrics": lambda: metric_families(TritiumCollector(server).collect()),
        }
        if method == "repository":
            return await self._repository(payload)
        if method not in local:
            return ("error", TritonError(Code.UNSUPPORTED, f"unknown replica command '{method}'").to_wire())
        return _reply(local[method])

    async def _repository(self, operation: dict[str, Any]) -> Reply:
        """Apply one logged load or unload (in log order) and keep it in this replica's copy of the log."""
        async with self._repository_lock:
            try:
                if operation["action"] == "load":
                    await self.server.load_model(operation["name"], operation.get("config"), operation.get("files"))
                else:
                    await self.server.unload_model(operation["name"], operation.get("unload_dependents", False))
                result: Reply = ("ok", None)
            except TritonError as exc:
                result = ("error", exc.to_wire())
            except Exception as exc:
                log.exception("%s of model '%s' failed", operation["action"], operation["name"])
                result = ("error", [int(Code.INTERNAL), f"{type(exc).__name__}: {exc}"])
            self.log = [op for op in self.log if op["name"] != operation["name"]] + [operation]
            self.generation = max(self.generation, int(operation["generation"]))
            return result

    # -- cluster-wide answers ----------------------------------------------------------------------
    async def _everyone(self, method: str, payload: Any = None) -> dict[str, Reply]:
        timeout = self.settings.query_timeout_s
        try:
            return await self._call("call_all", method, payload, timeout, timeout_s=timeout + 10.0)
        except (TimeoutError, Exception) as exc:
            raise TritonError(
                Code.UNAVAILABLE, f"the other replicas cannot be reached (tritium coordinator: {exc!r})"
            ) from None

    async def _all_true(self, method: str, payload: Any = None) -> bool:
        try:
            replies = await self._everyone(method, payload)
        except TritonError as exc:
            log.warning("%s: %s", method, exc.message)
            return False
        answers = [r for r in replies.values() if r != GONE]
        return bool(answers) and all(r == ("ok", True) for r in answers)

    async def ready(self) -> bool:
        """KServe ``server ready`` over the cluster: every live replica is ready (and there is one)."""
        return await self._all_true("ready")

    async def model_ready(self, name: str, version: str = "") -> bool:
        """KServe ``model ready`` over the cluster: every live replica has the model ready."""
        return await self._all_true("model_ready", (name, version))

    async def statistics(self, name: str = "", version: str = "") -> dict[str, Any]:
        """The statistics extension summed over every live replica.

        :raises TritonError: the replicas' error when none has the model (Triton's
            INVALID_ARG for a model not loaded); UNAVAILABLE when a replica did not answer.
        """
        replies = await self._everyone("statistics", (name, version))
        _raise_silent(replies, "statistics")
        parts = [value for status, value in replies.values() if status == "ok"]
        if not parts:
            _raise_first_error(replies)
            raise TritonError(Code.UNAVAILABLE, "no replica is serving")
        return merge_statistics(parts)

    async def metrics(self) -> bytes:
        """Prometheus text of every live replica's ``nv_*`` and ``tritium_*`` metrics, labelled by replica."""
        replies = await self._everyone("metrics")
        _raise_silent(replies, "metrics")
        _raise_first_error(replies)
        return render_metrics({r: value for r, (status, value) in replies.items() if status == "ok"})

    async def load_model(self, name: str, config: str | None = None, files: dict[str, bytes] | None = None) -> None:
        """Load or reload ``name`` on every replica (Triton's model repository extension).

        Outside ``explicit`` model control mode only the local server answers (it
        refuses, with Triton's message), so nothing is logged or sent to the others.

        :raises TritonError: the first replica's error (Triton's codes and messages);
            UNAVAILABLE naming the replicas that did not answer in time.
        """
        operation: dict[str, Any] = {"action": "load", "name": name, "config": config, "files": files}
        await self._repository_everywhere(operation, lambda: self.server.load_model(name, config, files))

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        """Unload ``name`` on every replica (see :meth:`load_model`)."""
        operation: dict[str, Any] = {"action": "unload", "name": name, "unload_dependents": unload_dependents}
        await self._repository_everywhere(operation, lambda: self.server.unload_model(name, unload_dependents))

    async def _repository_everywhere(self, operation: dict[str, Any], local: Callable[[], Awaitable[None]]) -> None:
        if self.server.options.model_control_mode != "explicit":
            await local()  # refused by the core, with Triton's message
            return
        timeout = self.settings.repository_timeout_s
        try:
            replies = await self._call("repository", operation, timeout, timeout_s=timeout + 10.0)
        except (TimeoutError, Exception) as exc:
            raise TritonError(
                Code.UNAVAILABLE, f"the model repository operation did not reach the replicas: {exc!r}"
            ) from None
        _raise_first_error(replies)
        _raise_silent(replies, f"{operation['action']} of model '{operation['name']}'")


def _reply(answer: Callable[[], Any]) -> Reply:
    try:
        return ("ok", answer())
    except TritonError as exc:
        return ("error", exc.to_wire())
    except Exception as exc:  # a bug: INTERNAL, logged, the replica goes on
        log.exception("replica command failed")
        return ("error", [int(Code.INTERNAL), f"{type(exc).__name__}: {exc}"])


def _raise_first_error(replies: dict[str, Reply]) -> None:
    for replica_id in sorted(replies):
        status, value = replies[replica_id]
        if status == "error":
            raise TritonError.from_wire(value)


def _raise_silent(replies: dict[str, Reply], what: str) -> None:
    silent = sorted(r for r, reply in replies.items() if reply == TIMEOUT)
    if silent:
        raise TritonError(Code.UNAVAILABLE, f"{what}: replica(s) {', '.join(silent)} did not answer in time")
