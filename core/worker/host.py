"""What the worker's data-path helpers need from the worker that runs them.

:class:`WorkerHost` is the part of :class:`~tritium.core.worker.main.Worker`
that :mod:`.outputs` (output placement) and :mod:`.bls` (BLS calls from model
code) use: the channel to the core, the tables of mapped segments and regions,
and the output arena. Declared here, below all three, so that neither helper
imports the worker's main module (which imports both).

Worker side; any thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from ..memory.arena import SegmentTable
    from ..memory.region_map import RegionTable
    from .cancel_board import CancelBoard
    from .channel import BlockingChannel

__all__ = ["WorkerHost"]


class WorkerHost(Protocol):
    """The worker process's channel, mapped memory and output arena."""

    #: frames to and from the core
    channel: BlockingChannel
    #: arena segments mapped in this worker (the core's and its own)
    segments: SegmentTable
    #: client-registered shared-memory regions mapped in this worker
    regions: RegionTable
    #: the requests the core marked cancelled (None until the core's CANCEL_BOARD frame arrived)
    cancels: CancelBoard | None

    def allocate(self, nbytes: int) -> Any:
        """A block of ``nbytes`` bytes of this worker's output arena (any thread)."""

    def free_blocks(self, blocks: Any) -> None:
        """Give blocks back to this worker's arena (any thread)."""

    def enable_threaded(self) -> None:
        """Switch to threaded receiving for good (idempotent; any thread)."""
