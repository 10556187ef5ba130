"""Starting a model version: its instances' names, their workers, and the model once READY.

:func:`load_model` places the first instance in its worker (which runs the backend's
model initialization, with auto-complete), normalizes the completed config,
builds the :class:`~.model.Model` and starts the other instances, each in the worker its
placement names (:mod:`.worker.placement`). Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import TritonError
from ..memory.pool import TensorPool
from ..scheduler.rate_limiter import demand_of_group
from ..worker.placement import IsolationPolicy
from .instance import InstanceOptions, ModelInstance
from .instance_groups import group_instances
from .model import Model

__all__ = ["load_model", "instance_names"]


def _rate_demands(config: dict[str, Any], limiter: Any) -> dict[str, Any]:
    """Instance name -> its group's rate-limiter demand (registered with ``limiter``), when the limiter is on."""
    if limiter is None:
        return {}
    out: dict[str, Any] = {}
    for group in config.get("instance_group", []):
        one = {**config, "instance_group": [group]}
        for name, _kind, device in instance_names(one):
            demand = demand_of_group(group, device)
            if demand is not None:
                limiter.register(demand)
                out[name] = demand
    return out


def instance_names(config: dict[str, Any]) -> list[tuple[str, str, int]]:
    """``(instance name, kind, device id)`` of every instance the groups of a normalized config ask for.

    Instances of a group are named ``<group name>_<k>``, k counting from 0
    across the group's GPUs (``count`` instances per GPU), as in Triton.
    """
    return [(name, kind, device) for name, kind, device, _group in group_instances(config)]


async def load_model(
    name: str,
    version: int,
    path: str,
    config: dict[str, Any],
    settings: dict[str, Any],
    auto_complete: bool,
    normalize: Any,
    read_labels: Any,
    pool: TensorPool,
    options: InstanceOptions,
    policy: IsolationPolicy,
    environment: tuple[Any, ...] = (),
    preload: tuple[str, ...] = (),
) -> Model:
    """Start the instances of one model version and return it READY.

    The first instance's worker runs the backend's model initialization
    with auto-complete (when enabled); the completed config is then
    normalized and validated (``normalize(config) -> config``), and every
    instance initialized with it.

    :param settings: INIT_MODEL settings (backend, model_path, backend_directory, ...).
    :param policy: where the instances run (:func:`~.worker.placement.isolation_policy`).
    :param environment: the interpreter and environment variables of its workers (workers
        are shared only by models of equal environments).
    :param preload: frameworks the template process imports before forking its workers.
    :raises TritonError: why the model cannot load (every started instance is stopped).
    """
    names = instance_names(normalize(config, final=False))
    first_name, first_kind, first_device = names[0] if names else (f"{name}_0", "KIND_CPU", 0)
    model: Model | None = None
    holder: dict[str, Model] = {}
    model_key = object()  # this load of the model: its instances in one worker share its initialization

    def placed(instance_names: list[str]) -> list[Any]:
        return policy.placements(str(settings["backend"]), name, path, instance_names, environment, model_key, preload)

    def on_ready(inst: ModelInstance) -> None:
        if "m" in holder:
            holder["m"].instance_ready(inst)

    def on_lost(inst: ModelInstance, how: str) -> None:
        if "m" in holder:
            holder["m"].instance_lost(inst, how)

    [first_placement] = placed([first_name])
    first = ModelInstance(
        first_name, first_kind, first_device, settings, pool, options, first_placement, model_key, on_ready, on_lost
    )
    started: list[ModelInstance] = [first]
    try:
        try:
            completed = await first.start_model(config, auto_complete)
        except TritonError:
            raise
        final = normalize(completed, final=True)
        labels = read_labels(final)
        model = Model(name, version, path, final, pool, labels)
        holder["m"] = model
        names = instance_names(final)
        first.name = names[0][0]
        first.kind, first.device_id = names[0][1], names[0][2]
        model.instances.append(first)
        placements = placed([n for n, _k, _d in names[1:]])
        others = [
            ModelInstance(n, k, d, settings, pool, options, where, model_key, on_ready, on_lost)
            for (n, k, d), where in zip(names[1:], placements)
        ]
        started.extend(others)
        model.instances.extend(others)
        demands = _rate_demands(final, options.rate_limiter)
        for inst in model.instances:
            inst.rate_demand = demands.get(inst.name)
        results = await asyncio.gather(
            first.start_instance(final), *(inst.start(final) for inst in others), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
    except BaseException:
        await asyncio.gather(*(inst.stop() for inst in started), return_exceptions=True)
        raise
    return model
