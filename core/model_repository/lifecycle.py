"""The lifecycle of a model version as one state machine: Triton's states, the allowed moves, and why each happens.

A version's :class:`VersionStatus` starts ``UNKNOWN`` and changes state only
through :meth:`VersionStatus.move`, which refuses (with
:class:`TransitionRefused`) any move that :data:`TRANSITIONS` does not list.
Its ``reason`` is what ``POST /v2/repository/index`` reports for a version
that is not READY: the load error (``Invalid argument: ...``) or
:data:`UNLOADED` (``unloaded``). :class:`ModelEntry` is the repository's
record of one model name: its versions and why the model as a whole is
unavailable. The repository manager drives the moves; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..model.servable import Servable
    from .repository import ModelSource

__all__ = [
    "ModelState",
    "TRANSITIONS",
    "TransitionRefused",
    "VersionStatus",
    "ModelEntry",
    "UNLOADED",
    "NOT_LOADED",
]


class ModelState(StrEnum):
    """Triton's model version states; each member is the string the repository index reports."""

    UNKNOWN = "UNKNOWN"
    LOADING = "LOADING"
    READY = "READY"
    UNLOADING = "UNLOADING"
    UNAVAILABLE = "UNAVAILABLE"


#: the reason of a version unloaded on purpose (unload request, reload dropping it, shutdown);
#: strict readiness does not count such a version
UNLOADED = "unloaded"
#: the reason the index gives for a model never asked for (explicit mode)
NOT_LOADED = "not loaded"

_S = ModelState
#: every allowed move ``(from, to)``, and why it happens
TRANSITIONS: dict[tuple[ModelState, ModelState], str] = {
    (_S.UNKNOWN, _S.LOADING): "a load of the version started",
    (_S.UNKNOWN, _S.UNAVAILABLE): "a reload's version policy no longer selects the version (reason: unloaded)",
    (_S.LOADING, _S.READY): "its instances started and its warmup ran: it takes requests",
    (_S.LOADING, _S.UNAVAILABLE): "its load failed (reason: the error), or it was unloaded while loading",
    (_S.READY, _S.UNLOADING): "unloaded, replaced by a reload, or shut down: no new requests, in-flight ones drain",
    (_S.READY, _S.UNAVAILABLE): "another version of the same load failed (all or nothing, as Triton), or shut down",
    (_S.UNLOADING, _S.UNAVAILABLE): "its requests drained and its instances stopped (reason: unloaded)",
    (_S.UNAVAILABLE, _S.UNAVAILABLE): "a version that had failed to load was unloaded (reason: unloaded)",
}


class TransitionRefused(RuntimeError):
    """A move that :data:`TRANSITIONS` does not allow (a bug in the caller, not a client's error)."""


@dataclass(slots=True)
class VersionStatus:
    """One version's state, why it is in it, and the servable once loaded.

    :ivar version: the version number.
    :ivar state: its :class:`ModelState` (change it with :meth:`move` only).
    :ivar reason: why it is not READY (empty for LOADING, READY and UNLOADING).
    :ivar model: the loaded version while it serves (READY) or drains.
    """

    version: int
    state: ModelState = ModelState.UNKNOWN
    reason: str = ""
    model: Servable | None = None

    def move(self, to: ModelState, reason: str = "") -> None:
        """Go to state ``to`` with ``reason``.

        :raises TransitionRefused: for a move :data:`TRANSITIONS` does not list.
        """
        if (self.state, to) not in TRANSITIONS:
            raise TransitionRefused(f"version {self.version}: {self.state} -> {to} is not a lifecycle transition")
        self.state, self.reason = to, reason

    @classmethod
    def loading(cls, version: int) -> VersionStatus:
        """A version whose load starts now (LOADING)."""
        status = cls(version)
        status.move(ModelState.LOADING)
        return status

    @classmethod
    def unloaded(cls, version: int) -> VersionStatus:
        """A version a reload no longer selects (UNAVAILABLE, ``unloaded``)."""
        status = cls(version)
        status.move(ModelState.UNAVAILABLE, UNLOADED)
        return status

    @property
    def unloaded_on_purpose(self) -> bool:
        """UNLOADING, or UNAVAILABLE because it was unloaded (not because it failed)."""
        return self.state == ModelState.UNLOADING or (self.state == ModelState.UNAVAILABLE and self.reason == UNLOADED)

    @property
    def failed(self) -> bool:
        """UNAVAILABLE because its load failed (it holds no model)."""
        return self.model is None and self.state == ModelState.UNAVAILABLE and self.reason != UNLOADED


@dataclass(slots=True)
class ModelEntry:
    """A model name known to the repository manager.

    :ivar versions: its versions (empty when the model failed before any
        version could load, e.g. a config that does not parse).
    :ivar reason: why the model as a whole is unavailable, if it is.
    :ivar explicit: loaded because it was asked for (start-up list, load
        request, poll), not only as a composing model of an ensemble.
    :ivar composing: the models its config's ensemble steps use (empty for other models).
    :ivar waiting: an ensemble taken down because a composing model went away
        or no longer fits; it loads again when its composing models (re)load.
    :ivar override: the JSON config it was loaded with, if a load request gave one.
    """

    name: str
    source: ModelSource | None
    versions: dict[int, VersionStatus] = field(default_factory=dict)
    reason: str = ""
    fingerprint: tuple[tuple[str, int, int], ...] | None = None
    explicit: bool = True
    composing: frozenset[str] = frozenset()
    waiting: bool = False
    override: str | None = None

    @property
    def serving(self) -> bool:
        """True while some version of it takes requests."""
        return any(s.model is not None for s in self.versions.values())
