"""Model config fields tritium does not implement: a model that sets one is refused at load, naming it.

Triton 2.51 accepts these fields (most are read only by its TensorRT backend or
on GPUs); tritium would ignore them, so it refuses them instead, with a message
naming the field, the model and what tritium does instead. A field counts as
set when it differs from its default. :data:`REFUSED` is the list the
compatibility table in ``docs/compatibility.md`` is checked against
(``tests/unit/core/model_config/test_config_field_table.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...proto import model_config_pb2 as mc
from ..errors import Code, TritonError

__all__ = ["REFUSED", "Refusal", "refuse_unsupported"]

#: backends of tritium that read ``optimization.graph``, ``execution_accelerators`` and ``model_operations``
_ACCELERATED = {"onnxruntime", "tensorflow"}


@dataclass(frozen=True)
class Refusal:
    """A field tritium refuses: its dotted path from ``ModelConfig``, when it counts as set, and why."""

    field: str
    is_set: Callable[[mc.ModelConfig], bool]
    instead: str


def _groups(predicate: Callable[[mc.ModelInstanceGroup], bool]) -> Callable[[mc.ModelConfig], bool]:
    return lambda c: any(predicate(g) for g in c.instance_group)


_TENSORRT_ONLY = "only Triton's TensorRT backend reads it and tritium's does not implement it"

REFUSED: tuple[Refusal, ...] = (
    Refusal("optimization.priority", lambda c: c.optimization.priority != 0, _TENSORRT_ONLY),
    Refusal("optimization.cuda.graphs", lambda c: c.optimization.cuda.graphs, f"CUDA graphs: {_TENSORRT_ONLY}"),
    Refusal(
        "optimization.cuda.busy_wait_events",
        lambda c: c.optimization.cuda.busy_wait_events,
        f"busy-wait events: {_TENSORRT_ONLY}",
    ),
    Refusal(
        "optimization.cuda.graph_spec",
        lambda c: len(c.optimization.cuda.graph_spec) > 0,
        f"CUDA graphs: {_TENSORRT_ONLY}",
    ),
    Refusal(
        "optimization.cuda.output_copy_stream",
        lambda c: c.optimization.cuda.output_copy_stream,
        f"a separate output copy stream: {_TENSORRT_ONLY}",
    ),
    Refusal(
        "optimization.gather_kernel_buffer_threshold",
        lambda c: c.optimization.gather_kernel_buffer_threshold != 0,
        f"the gather kernel: {_TENSORRT_ONLY}",
    ),
    Refusal("optimization.eager_batching", lambda c: c.optimization.eager_batching, _TENSORRT_ONLY),
    Refusal(
        "optimization.graph",
        lambda c: c.optimization.graph.level != 0 and c.backend not in _ACCELERATED,
        "only the onnxruntime and tensorflow backends read the graph optimization level",
    ),
    Refusal(
        "optimization.execution_accelerators",
        lambda c: c.optimization.HasField("execution_accelerators") and c.backend not in _ACCELERATED,
        "only the onnxruntime and tensorflow backends read execution accelerators",
    ),
    Refusal(
        "input.is_non_linear_format_io",
        lambda c: any(io.is_non_linear_format_io for io in c.input),
        f"non-linear tensor formats: {_TENSORRT_ONLY}",
    ),
    Refusal(
        "output.is_non_linear_format_io",
        lambda c: any(io.is_non_linear_format_io for io in c.output),
        f"non-linear tensor formats: {_TENSORRT_ONLY}",
    ),
    Refusal(
        "instance_group.secondary_devices",
        _groups(lambda g: len(g.secondary_devices) > 0),
        "secondary devices (NVDLA) are not supported; instances run on their group's kind and gpus",
    ),
    Refusal(
        "instance_group.host_policy",
        _groups(lambda g: bool(g.host_policy)),
        "tritium has no host policies (--host-policy); instances run wherever the worker process runs",
    ),
    Refusal(
        "cc_model_filenames",
        lambda c: len(c.cc_model_filenames) > 0,
        "a model file per compute capability is not supported; use default_model_filename",
    ),
    Refusal(
        "model_operations.op_library_filename",
        lambda c: len(c.model_operations.op_library_filename) > 0 and c.backend not in _ACCELERATED,
        "only the onnxruntime and tensorflow backends load custom operation libraries",
    ),
    Refusal(
        "sequence_batching.state.use_same_buffer_for_input_output",
        lambda c: any(s.use_same_buffer_for_input_output for s in c.sequence_batching.state),
        "the implicit state output is always a new buffer, carried to the next request",
    ),
    Refusal(
        "sequence_batching.state.use_growable_memory",
        lambda c: any(s.use_growable_memory for s in c.sequence_batching.state),
        "growable GPU state buffers are not supported; the state is carried in shared memory",
    ),
    Refusal(
        "ensemble_scheduling.step.model_namespace",
        lambda c: any(s.model_namespace for s in c.ensemble_scheduling.step),
        "model namespacing is not supported (--model-namespacing)",
    ),
)


def refuse_unsupported(config: mc.ModelConfig) -> None:
    """Refuse a config that sets a field of :data:`REFUSED`.

    :raises TritonError: UNSUPPORTED ``model '<m>': '<field>' is not supported: <why>``
        for the first such field.
    """
    for refusal in REFUSED:
        if refusal.is_set(config):
            raise TritonError(
                Code.UNSUPPORTED,
                f"model '{config.name}': '{refusal.field}' is not supported: {refusal.instead}",
            )
