"""What a model offers its batchers: gathering a batch's inputs, server-supplied inputs, null requests.

The dynamic batcher asks for a batch's inputs to be laid out contiguously in
the arena (:meth:`BatcherServices.gather`); the sequence batcher adds control
inputs and implicit state (:meth:`BatcherServices.add_input`), fills idle
slots with null requests and collects state outputs. A :class:`~.model.Model`
holds one :class:`BatcherServices` and hands it to its batcher; they run on the
core's event loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..inference.request import InferenceRequest, InferInput
from ..inference.tensor import join_bytes_elements
from ..memory.pool import SharedBlock, TensorPool
from ..scheduler.base import Payload
from .input_staging import InputStaging

__all__ = ["BatcherServices"]


class BatcherServices:
    """What one model version offers its batcher (the sequence batcher's ``SequenceHost``).

    :param name: the model's name; ``version``: its version; ``path``: its folder.
    :param config: its normalized config (JSON form).
    :param pool: the core's tensor pool.
    :param signature: its inputs and outputs, prepared for request checks.
    :param state_outputs: its implicit-state outputs (sequence batcher).
    :param staging: its input staging (null requests are staged as requests are).
    """

    def __init__(
        self,
        name: str,
        version: int,
        path: str,
        config: dict[str, Any],
        pool: TensorPool,
        signature: Any,
        state_outputs: set[str],
        staging: InputStaging,
    ) -> None:
        self.name = name
        self.version = version
        self.path = path
        self.config = config
        self.pool = pool
        self.signature = signature
        self.state_outputs = state_outputs
        self._staging = staging

    def gather(self, payloads: list[Payload]) -> None:
        """Lay each input of a batch out contiguously in the arena (one block per input).

        The EXECUTE frame then names, for every request, a slice of one block,
        so a backend gets the whole batch as one array without copying
        (:func:`tritium.core.backend.api.batch_input`). Inputs already adjacent
        stay where they are. Each request's own block is freed; the gathered
        block lives until the last request of the batch releases its response.

        :raises TritonError: when the arena cannot hold the gathered block.
        """
        if any(p.context.regions for p in payloads):
            return  # inputs read in place from a client's region stay there (the backend concatenates)
        first = payloads[0].wire["inputs"]
        for index in range(len(first)):
            items = [p.wire["inputs"][index] for p in payloads]
            if any(it[0] != items[0][0] for it in items):
                return  # inputs in different orders: leave the batch as it is
            if all(b[3] == a[3] and b[4] == a[4] + a[5] for a, b in zip(items, items[1:])):
                continue  # already contiguous
            total = sum(int(it[5]) for it in items)
            block = self.pool.allocate(total)
            shared = SharedBlock(self.pool, block, len(payloads))
            target = block.view
            pos = 0
            seg_id, base, _n = block.descriptor
            for payload, item in zip(payloads, items):
                nbytes = int(item[5])
                if nbytes:
                    target[pos : pos + nbytes] = self.pool.segments.resolve(item[3], item[4], nbytes)
                item[3], item[4] = seg_id, base + pos
                pos += nbytes
                pending = payload.context
                old = pending.blocks[index]
                pending.blocks[index] = shared
                if isinstance(old, SharedBlock):
                    old.release()
                else:
                    self.pool.free(old)

    def add_input(self, payload: Payload, name: str, datatype: str, shape: list[int], data: bytes) -> None:
        """Add an input the server supplies (a sequence control input or an implicit state) to a payload."""
        pending = payload.context
        block = self.pool.allocate(len(data))
        if data:
            block.view[:] = data
        pending.blocks.append(block)
        payload.wire["inputs"].append([name, datatype, list(shape), *block.descriptor])

    def drop_inputs(self, payload: Payload, count: int) -> None:
        """Remove the last ``count`` inputs :meth:`add_input` gave ``payload`` (and free their blocks),
        before a rescheduled request gets its control inputs and state again."""
        if count <= 0:
            return
        pending = payload.context
        del payload.wire["inputs"][-count:]
        blocks = pending.blocks[-count:]
        del pending.blocks[-count:]
        for block in blocks:
            self.pool.free(block)

    def null_payload(self, template: Payload) -> Payload:
        """A request whose inputs are zeros shaped like ``template``'s own inputs (a null request).

        The sequence batcher's direct strategy puts one in each idle slot below a
        busy one, so a request's index in the batch is its sequence's slot, as in
        Triton; its response is dropped.
        """
        names = set(self.signature.inputs)
        inputs = []
        for name, datatype, shape, _seg, _off, nbytes in template.wire["inputs"]:
            if name in names:
                count = int(np.prod(shape)) if shape else 1
                if datatype == "BYTES":
                    data = join_bytes_elements([b""] * count)  # empty strings
                else:
                    data = bytes(int(nbytes))  # zeros
                inputs.append(InferInput(name, datatype, list(shape), data))
        payload = self._staging.stage(InferenceRequest(self.name, str(self.version), "", inputs), False)
        pending = payload.context
        pending.null = True
        return payload

    def set_state_sink(self, payload: Payload, sink: Any) -> None:
        """Have ``sink(name, datatype, shape, data)`` called with the payload's implicit-state outputs.

        The backend is always told to produce the state outputs: the request's
        output list names them, and a request that named no outputs (the
        client wants all of them) names every config output too. A backend
        that computes "all outputs" from its config would otherwise never
        produce a state output that is not one, and each request of the
        sequence would start from the initial state again.
        """
        pending = payload.context
        pending.on_state = sink
        wanted = payload.wire["outputs"]
        if not wanted:
            wanted.extend(str(o["name"]) for o in self.config.get("output", []))
        wanted.extend(n for n in self.state_outputs if n not in wanted)
