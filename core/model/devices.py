"""Which GPUs this machine has, found without importing any framework (the core never does)."""

from __future__ import annotations

import os
from functools import lru_cache

__all__ = ["gpu_ids"]


@lru_cache(maxsize=1)
def gpu_ids() -> tuple[int, ...]:
    """Ids of the NVIDIA GPUs the driver exposes (empty on a machine without one).

    Reads ``/proc/driver/nvidia/gpus`` and honours ``CUDA_VISIBLE_DEVICES``
    when it lists plain indices.
    """
    try:
        count = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return ()
    ids = list(range(count))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        chosen = []
        for item in visible.split(","):
            item = item.strip()
            if item.isdigit() and int(item) < count:
                chosen.append(int(item))
        ids = list(range(len(chosen)))
    return tuple(ids)
