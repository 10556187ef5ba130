"""Process helpers for tests: the worker processes a server started (its descendants, by PID)."""

from __future__ import annotations

import os

from tritium.perf import children_of, descendants_of, worker_pids

__all__ = ["children_of", "descendants_of", "worker_pids", "shm_entries"]


def shm_entries(client_regions: bool = True) -> set[str]:
    """Names in /dev/shm (POSIX shared memory and semaphores), without the real Triton's.

    A real Triton running beside the tests (comparison runs) adds and removes its
    ``triton_python_backend_shm_region_*`` entries at any time; they are never tritium's.

    :param client_regions: include the regions test clients create (``tritium_test_*``);
        other test runs on the machine make and remove theirs at any time.
    """
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return set()
    return {
        n
        for n in names
        if not n.startswith("triton_python_backend_shm_region_")
        and (client_regions or not n.startswith("tritium_test_"))
    }
