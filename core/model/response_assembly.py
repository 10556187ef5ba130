"""A worker's RESPONSE frame turned into the output tensors of an :class:`~.response.InferenceResponse`.

:meth:`ResponseAssembly.tensors` is step 4 of a model's request path (see
:mod:`.model`): each output descriptor ``[name, datatype, shape, segment,
offset, nbytes, release]`` becomes an :class:`~.response.OutputTensor`
viewing the arena in place, after the config's output ``reshape`` (back to
the config's dims). An output the worker wrote into the client's system
shared-memory region is checked and named by its region; one asked into a
CUDA region is copied host→device once, here; implicit-state outputs go to
the sequence batcher's sink (and those the config does not list are not
returned); the classification extension is applied last. Runs on the core's
event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import Code, TritonError
from ..inference.request import InferenceRequest
from ..inference.response import OutputTensor
from ..inference.types import element_count
from ..memory.cuda import CudaRef
from ..memory.pool import TensorPool
from ..memory.shm_region import output_region_too_small
from .classification import classify_outputs

if TYPE_CHECKING:  # pragma: no cover
    from ..scheduler.base import Payload
    from .input_staging import PendingRequest
    from .reshape import Reshape

__all__ = ["ResponseAssembly"]


class ResponseAssembly:
    """Assembles the responses of one model version (built once per version).

    :param label: ``'m' version N``, for messages.
    :param pool: the core's tensor pool (whose segments the outputs lie in).
    :param output_reshape: the config's output ``reshape`` by output name (None: no output has one).
    :param state_outputs: the implicit-state outputs (sequence batcher).
    :param hidden_outputs: the state outputs the client does not see (not in the config's outputs).
    :param batched: whether the model batches (classification: K classes per batch element).
    :param labels: class labels per output name (``label_filename``).
    """

    __slots__ = ("label", "pool", "output_reshape", "state_outputs", "hidden_outputs", "batched", "labels")

    def __init__(
        self,
        label: str,
        pool: TensorPool,
        output_reshape: dict[str, Reshape] | None,
        state_outputs: set[str],
        hidden_outputs: set[str],
        batched: bool,
        labels: Mapping[str, Sequence[str]],
    ) -> None:
        self.label = label
        self.pool = pool
        self.output_reshape = output_reshape
        self.state_outputs = state_outputs
        self.hidden_outputs = hidden_outputs
        self.batched = batched
        self.labels = labels

    def tensors(
        self, payload: Payload, pending: PendingRequest, outputs: list[list[Any]], releases: list[list[int]]
    ) -> list[OutputTensor]:
        """The output tensors of one response of ``payload`` from the worker's ``outputs`` descriptors.

        :param pending: the payload's :class:`~.input_staging.PendingRequest` (its context).
        :param releases: gets ``[segment, release id]`` of every output the worker
            must be told to free once the response is released (also when this raises).
        :raises TritonError: INTERNAL for a malformed response (a shape that does not
            fit its reshape, a bad shared-memory output, a bad descriptor);
            INTERNAL (Triton's message) for a CUDA window too small; INVALID_ARG for
            classification of a BYTES output.
        """
        tensors: list[OutputTensor] = []
        try:
            shm_outputs = payload.wire.get("shm_outputs")
            resolve = self.pool.segments.resolve
            output_reshape = self.output_reshape
            for name, datatype, shape, seg_id, offset, nbytes, release in outputs:
                if release >= 0:
                    releases.append([seg_id, release])
                if output_reshape is not None and name in output_reshape:  # back to the config's dims
                    reshaped = output_reshape[name].apply(shape)
                    if element_count(reshaped) != element_count(shape):
                        raise TritonError(
                            Code.INTERNAL,
                            f"output '{name}' of model {self.label} has shape {list(shape)}, which does "
                            f"not fit its reshape to {reshaped}",
                        )
                    shape = reshaped
                if shm_outputs and name in shm_outputs:  # written into the client's region
                    region_id, region_offset, byte_size = shm_outputs[name]
                    if seg_id != region_id or offset != region_offset or not 0 <= nbytes <= byte_size:
                        raise TritonError(
                            Code.INTERNAL, f"malformed shared-memory output '{name}' from model {self.label}"
                        )
                    ref = next(o.shared_memory for o in pending.request.outputs if o.name == name)
                    tensor = OutputTensor(name, datatype, list(shape), b"", {})
                    tensor.shared_memory_region = ref.region.name if ref is not None else ""
                    tensors.append(tensor)
                    continue
                data = resolve(seg_id, offset, nbytes)
                if pending.on_state is not None and name in self.state_outputs:
                    pending.on_state(name, datatype, list(shape), bytes(data))
                if self.hidden_outputs and name in self.hidden_outputs:
                    continue
                cuda_ref = _cuda_output(pending.request, name) if pending.regions else None
                if cuda_ref is not None:  # asked into a CUDA region: one host→device copy
                    if nbytes > cuda_ref.byte_size:
                        raise output_region_too_small(name, cuda_ref.byte_size, nbytes)
                    cuda_ref.copy_from_host(name, data)
                    tensor = OutputTensor(name, datatype, list(shape), b"", {})
                    tensor.shared_memory_region = cuda_ref.region.name
                    tensors.append(tensor)
                    continue
                tensors.append(OutputTensor(name, datatype, shape, data, {}, (seg_id, offset, nbytes)))
            if pending.classification:
                tensors = classify_outputs(tensors, pending.classification, self.batched, self.labels)
        except (ValueError, TypeError) as exc:
            raise TritonError(Code.INTERNAL, f"malformed response from model {self.label}: {exc}") from None
        return tensors


def _cuda_output(request: InferenceRequest, name: str) -> CudaRef | None:
    """The CUDA-region window output ``name`` was asked into, if any."""
    for out in request.outputs:
        if out.name == name:
            return out.shared_memory if isinstance(out.shared_memory, CudaRef) else None
    return None
