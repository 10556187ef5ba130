"""The model instances a normalized config's ``instance_group`` list asks for, and which are passive.

Instances of a group are named ``<group name>_<k>``, k counting from 0 across the
group's GPUs (``count`` instances per GPU), as in Triton. A ``passive: true`` group's
instances are loaded and initialized but get no requests from the scheduler
(Triton's semantics: a backend may use them on its own). Pure functions, used by
the core and by workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["group_instances", "passive_instances"]


def group_instances(config: dict[str, Any]) -> list[tuple[str, str, int, dict[str, Any]]]:
    """``(instance name, kind, device id, its group)`` of every instance, in group order."""
    out: list[tuple[str, str, int, dict[str, Any]]] = []
    for group in config.get("instance_group", []):
        count = int(group.get("count", 1))
        kind = str(group.get("kind", "KIND_CPU"))
        devices: Sequence[int] = (group.get("gpus") or [0]) if kind == "KIND_GPU" else [0]
        k = 0
        for device in devices:
            for _ in range(count):
                out.append((f"{group['name']}_{k}", kind, int(device), group))
                k += 1
    return out


def passive_instances(config: dict[str, Any]) -> frozenset[str]:
    """Names of the instances of ``passive: true`` groups."""
    return frozenset(name for name, _kind, _device, group in group_instances(config) if group.get("passive"))
