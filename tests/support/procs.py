"""Process helpers for tests: the worker processes a server started (its children, by PID)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["children_of", "shm_entries"]


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (read from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return sorted(out)


def shm_entries() -> set[str]:
    """Names in /dev/shm (POSIX shared memory and semaphores)."""
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()
