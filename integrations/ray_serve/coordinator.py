"""The coordinator: which replicas are live, calls to all of them, and the model repository's log.

One instance runs as the ``TritiumCoordinator`` deployment (one replica, no
CPU reserved) of each tritium application; every ``TritiumServer`` replica
talks to it through a Serve deployment handle. Serve routes each client
request to one replica, so whatever must reach every replica — readiness,
statistics, metrics, model load and unload — goes through here:

- A replica **joins** once its server has started and then **polls** in a
  loop (each poll waits up to ``poll_s`` for commands). A replica that has not
  polled for ``stale_s``, or whose actor Ray reports dead, is no longer a member.
- :meth:`Coordinator.call_all` puts a command in every member's inbox and
  waits (at most ``timeout_s``) for each member's :meth:`~Coordinator.reply`;
  a member that dies meanwhile is dropped from the answer rather than waited for.
- :meth:`Coordinator.repository` runs model loads and unloads one at a time,
  and records each in the repository **log** (the last operation per model),
  which a replica that joins later replays, so that a new replica (autoscaled,
  or replacing a lost one) serves the same models as the others.

All methods run on the coordinator replica's event loop, one coroutine per
call; nothing here blocks it. The state lives in memory: when the
coordinator replica is lost, Serve starts a new one, each replica joins it
again on its next poll and brings its copy of the log (the newest wins).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("tritium.ray_serve")

__all__ = ["Coordinator", "Reply", "GONE", "TIMEOUT"]

#: a reply: ``("ok", value)``, ``("error", [code, message])``, or one of the two below
Reply = tuple[str, Any]
#: the member left or died before it answered
GONE: Reply = ("gone", None)
#: the member did not answer within the call's timeout
TIMEOUT: Reply = ("timeout", None)

_PROBE_AFTER_S = 0.5  # a member silent this long during a call is probed for liveness
_PROBE_TIMEOUT_S = 2.0


@dataclass(slots=True)
class _Member:
    actor: Any  # the replica's Ray actor handle (liveness probes), or None
    inbox: asyncio.Queue[tuple[int, str, Any]] = field(default_factory=asyncio.Queue)
    last_seen: float = field(default_factory=time.monotonic)


class Coordinator:
    """The coordinator of one application's replicas (deployed as ``TritiumCoordinator``).

    :param settings: the application's :class:`~.args.Settings` (or a dict of them).
    """

    def __init__(self, settings: Any = None) -> None:
        settings = settings if settings is not None else {}
        get = settings.get if isinstance(settings, dict) else lambda key, default: getattr(settings, key, default)
        self.poll_s = float(get("poll_s", 1.0))
        self.stale_s = float(get("stale_s", 30.0))
        self._members: dict[str, _Member] = {}
        self._calls: dict[int, dict[str, asyncio.Future[Reply]]] = {}
        self._ids = itertools.count(1)
        self._generation = 0
        self._log: list[dict[str, Any]] = []
        self._repository_lock = asyncio.Lock()

    # -- membership ----------------------------------------------------------------------------
    async def join(
        self, replica_id: str, actor: Any = None, generation: int = 0, known_log: list[dict[str, Any]] | None = None
    ) -> tuple[int, list[dict[str, Any]]]:
        """Make ``replica_id`` a member; return the generation and the log entries it has not applied.

        :param generation: the newest repository operation the replica has applied (0: none).
        :param known_log: the replica's copy of the log; adopted when it is newer than
            this coordinator's (this coordinator was restarted and lost its own).
        """
        if generation > self._generation and known_log is not None:
            log.info("adopting the repository log of replica %s (generation %d)", replica_id, generation)
            self._generation, self._log = generation, list(known_log)
        self._members[replica_id] = _Member(actor)
        log.info("replica %s joined (%d members)", replica_id, len(self._members))
        return self._generation, [op for op in self._log if op["generation"] > generation]

    async def leave(self, replica_id: str) -> None:
        """Remove ``replica_id`` (a replica that stops calls this first); its pending calls answer GONE."""
        self._drop(replica_id, "left")

    def _drop(self, replica_id: str, why: str) -> None:
        if self._members.pop(replica_id, None) is None:
            return
        log.info("replica %s %s (%d members)", replica_id, why, len(self._members))
        for futures in self._calls.values():
            future = futures.get(replica_id)
            if future is not None and not future.done():
                future.set_result(GONE)

    def _sweep(self) -> None:
        now = time.monotonic()
        for replica_id, member in list(self._members.items()):
            if now - member.last_seen > self.stale_s:
                self._drop(replica_id, f"has not polled for {self.stale_s:g} s")

    async def members(self) -> list[str]:
        """The ids of the live members."""
        self._sweep()
        return sorted(self._members)

    async def poll(self, replica_id: str, wait_s: float | None = None) -> list[tuple[int, str, Any]] | None:
        """The commands waiting for ``replica_id`` (waiting up to ``wait_s`` for one); None: join first."""
        member = self._members.get(replica_id)
        if member is None:
            return None
        member.last_seen = time.monotonic()
        try:
            first = await asyncio.wait_for(member.inbox.get(), self.poll_s if wait_s is None else wait_s)
        except TimeoutError:
            return []
        finally:
            member.last_seen = time.monotonic()
        commands = [first]
        while not member.inbox.empty():
            commands.append(member.inbox.get_nowait())
        return commands

    async def reply(self, call_id: int, replica_id: str, result: Reply) -> None:
        """A member's answer to the command ``call_id`` of :meth:`call_all`."""
        member = self._members.get(replica_id)
        if member is not None:
            member.last_seen = time.monotonic()
        future = self._calls.get(call_id, {}).get(replica_id)
        if future is not None and not future.done():
            future.set_result(tuple(result))  # type: ignore[arg-type]

    # -- calls to every member -------------------------------------------------------------------
    async def call_all(self, method: str, payload: Any = None, timeout_s: float = 10.0) -> dict[str, Reply]:
        """Run ``method`` on every live member; return each member's reply by replica id.

        Members that leave or die before answering get :data:`GONE`; those still
        silent after ``timeout_s`` seconds get :data:`TIMEOUT`.
        """
        self._sweep()
        loop = asyncio.get_running_loop()
        call_id = next(self._ids)
        futures = {replica_id: loop.create_future() for replica_id in self._members}
        self._calls[call_id] = futures
        try:
            for replica_id in futures:
                self._members[replica_id].inbox.put_nowait((call_id, method, payload))
            deadline = loop.time() + timeout_s
            while True:
                pending = [f for f in futures.values() if not f.done()]
                remaining = deadline - loop.time()
                if not pending or remaining <= 0:
                    break
                await asyncio.wait(pending, timeout=min(_PROBE_AFTER_S, remaining))
                silent = [r for r, f in futures.items() if not f.done()]
                if silent and loop.time() < deadline:
                    await asyncio.gather(*(self._probe(r) for r in silent))
            return {r: (f.result() if f.done() else TIMEOUT) for r, f in futures.items()}
        finally:
            del self._calls[call_id]

    async def _probe(self, replica_id: str) -> None:
        """Drop ``replica_id`` if Ray says its actor is dead (a slow but live one stays)."""
        member = self._members.get(replica_id)
        if member is None or member.actor is None:
            return
        try:
            await asyncio.wait_for(_ready(member.actor), _PROBE_TIMEOUT_S)
        except TimeoutError:
            return
        except Exception as exc:  # RayActorError and its kin: the process is gone
            self._drop(replica_id, f"died ({type(exc).__name__})")

    # -- the model repository ------------------------------------------------------------------
    async def repository(self, operation: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Reply]:
        """Apply a model load or unload on every member, one operation at a time; log it first.

        :param operation: ``{"action": "load"|"unload", "name": ..., ...}`` (see
            :class:`~.agent.ReplicaAgent`); the log keeps the newest operation per model.
        """
        async with self._repository_lock:
            self._generation += 1
            entry = {**operation, "generation": self._generation}
            self._log = [op for op in self._log if op["name"] != entry["name"]] + [entry]
            return await self.call_all("repository", entry, timeout_s)

    async def repository_log(self) -> tuple[int, list[dict[str, Any]]]:
        """The generation and the log (for tests and diagnostics)."""
        return self._generation, list(self._log)


async def _ready(actor: Any) -> Any:
    return await actor.__ray_ready__.remote()
