"""Which worker process a model instance runs in: isolation modes and worker groups.

By default the instances of every model of a framework backend share one worker process
per backend (and Python environment): Triton, too, runs its C++ backends' instances as
threads of one process. Python models get a worker per instance, as in Triton, since their
code holds global state. A model may ask for otherwise, with its model-config parameters
(or a server's ``--backend-config=[<backend>,]worker-isolation=...`` for many models):

============================  ===============================================================
``worker_isolation``          where its instances run
============================  ===============================================================
``shared``                    the backend's shared worker (framework backends' default)
``model``                     one worker of its own for all its instances (the default of a
                              model with an execute timeout, since a timeout kills the worker)
``instance``                  a worker per instance (the python backend's default and only mode)
============================  ===============================================================

``worker_group: <name>`` puts a model in the named group's worker, shared by the models of
the same backend that name the same group (and nothing else). Core process.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import Code, TritonError

__all__ = ["Placement", "IsolationPolicy", "isolation_policy", "ISOLATION_MODES"]

#: the values of ``worker_isolation``
ISOLATION_MODES = ("shared", "model", "instance")
#: the backend that hosts user code with global state: a worker per instance, always
PYTHON_BACKEND = "python"

_unique = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Placement:
    """The worker a model instance runs in.

    :ivar key: instances with equal keys share one worker process.
    :ivar label: how logs and errors name that worker.
    :ivar shared: whether the worker may host more than one instance.
    :ivar cwd: its working directory.
    :ivar preload: frameworks the template process imports before forking it (:mod:`.preload`).
    """

    key: tuple[Any, ...]
    label: str
    shared: bool
    cwd: str | None
    preload: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class IsolationPolicy:
    """A model's isolation, from its config and the backend's settings (see the module docstring).

    :ivar mode: one of :data:`ISOLATION_MODES`.
    :ivar group: the worker group's name ("": the backend's shared worker).
    """

    mode: str
    group: str = ""

    def placements(
        self,
        backend: str,
        model: str,
        model_path: str,
        instance_names: list[str],
        environment: tuple[Any, ...],
        load: object,
        preload: tuple[str, ...] = (),
    ) -> list[Placement]:
        """One :class:`Placement` per instance of one load of a model (an isolated model's
        keys name the load: a reload never shares the old load's worker).

        :param environment: the interpreter and environment variables of the model's workers.
        :param load: the load of the model (an object of its own).
        :param preload: frameworks its workers should find imported (:mod:`.preload`).
        """
        if self.mode == "instance":
            return [
                Placement(("instance", load, next(_unique)), name, False, model_path, preload)
                for name in instance_names
            ]
        if self.mode == "model":
            key = ("model", load)
            return [Placement(key, f"model '{model}'", True, model_path, preload) for _ in instance_names]
        label = f"{backend} worker group '{self.group}'" if self.group else f"{backend} shared worker"
        placement = Placement(("shared", backend, self.group, environment), label, True, "/", preload)
        return [placement for _ in instance_names]


def _setting(parameters: Mapping[str, Any], key: str) -> str | None:
    """The ``string_value`` of config parameter ``key`` (None when absent)."""
    value = parameters.get(key)
    if value is None:
        return None
    return str(value.get("string_value", "") if isinstance(value, Mapping) else value)


def isolation_policy(
    model: str,
    backend: str,
    parameters: Mapping[str, Any],
    backend_setting: str | None,
    global_setting: str | None,
    execute_timeout_s: float,
) -> IsolationPolicy:
    """A model's :class:`IsolationPolicy`.

    :param parameters: the model config's ``parameters`` (JSON form: ``{key: {"string_value": ...}}``).
    :param backend_setting: ``--backend-config=<backend>,worker-isolation=...`` (None: not set).
    :param global_setting: ``--backend-config=worker-isolation=...`` (None: not set); it does
        not apply to python models, which always run a worker per instance.
    :param execute_timeout_s: the model's execute timeout (0: none).
    :raises TritonError: INVALID_ARG for an unknown mode, an empty group, a group with an
        isolated mode, or a python model asked to share a worker.
    """
    mode = _setting(parameters, "worker_isolation")
    group = _setting(parameters, "worker_group")
    source = "model config parameter 'worker_isolation'"
    if mode is None and backend_setting is not None:
        mode, source = backend_setting, f"--backend-config={backend},worker-isolation"
    if mode is None and global_setting is not None and backend != PYTHON_BACKEND:
        mode, source = global_setting, "--backend-config=worker-isolation"
    if mode is not None and mode not in ISOLATION_MODES:
        raise TritonError(
            Code.INVALID_ARG,
            f"model '{model}': {source} is '{mode}'; expected one of {', '.join(ISOLATION_MODES)}",
        )
    if group is not None:
        if not group.strip():
            raise TritonError(Code.INVALID_ARG, f"model '{model}': model config parameter 'worker_group' is empty")
        if mode not in (None, "shared") and source.startswith("model"):
            raise TritonError(
                Code.INVALID_ARG,
                f"model '{model}': 'worker_group' puts a model in a shared worker; it cannot be combined "
                f"with worker_isolation '{mode}'",
            )
        mode = "shared"
    if backend == PYTHON_BACKEND:
        if mode not in (None, "instance"):
            what = f"worker group '{group}'" if group is not None else f"worker isolation '{mode}' ({source})"
            raise TritonError(
                Code.INVALID_ARG,
                f"model '{model}': python models run in a worker process per instance, as in Triton "
                f"(their code holds global state); {what} is not supported for them",
            )
        return IsolationPolicy("instance")
    if mode is None:
        mode = "model" if execute_timeout_s > 0 else "shared"
    return IsolationPolicy(mode, group.strip() if group is not None and mode == "shared" else "")
