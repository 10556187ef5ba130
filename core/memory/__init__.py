"""Shared memory: arenas for tensor bytes between the core and workers."""
