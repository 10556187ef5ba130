"""Load-time checks of a config's ``batch_input`` and ``batch_output`` (Triton's ValidateBatchIO).

Triton 2.51's messages (measured against the real server): the backend
library's parse of a batch input's data type first, then the core's
``ValidateBatchIO``, whose messages end with ``for <model>``. What the batch
inputs and outputs do at inference is in :mod:`tritium.core.backend.batch_io`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...proto import model_config_pb2 as mc
from ..errors import Code, TritonError

__all__ = ["validate_batch_io"]


def validate_batch_io(config: mc.ModelConfig) -> None:
    """Check each ``batch_input`` and ``batch_output`` of ``config`` as Triton does.

    * a batch input's ``data_type`` is TYPE_INT32 or TYPE_FP32;
    * each names exactly one ``source_input``, an input of the config;
    * a batch output's ``target_name``\\ s are outputs of the config, each named once.

    :raises TritonError: INVALID_ARG with Triton's message.
    """
    for batch_input in config.batch_input:
        if batch_input.data_type == mc.TYPE_INVALID:  # the backend library's check, made before the core's
            raise TritonError(Code.INVALID_ARG, "unexpected batch input data type 'TYPE_INVALID'")
    inputs = {io.name for io in config.input}
    outputs = {io.name for io in config.output}
    suffix = f" for {config.name}"
    for batch_input in config.batch_input:
        kind = mc.BatchInput.Kind.Name(batch_input.kind)
        if len(batch_input.source_input) != 1:
            raise TritonError(
                Code.INVALID_ARG,
                f"batch input kind '{kind}' expects 1 source input, got {len(batch_input.source_input)}{suffix}",
            )
        if batch_input.data_type not in (mc.TYPE_INT32, mc.TYPE_FP32):
            raise TritonError(Code.INVALID_ARG, f"batch input data type must be TYPE_INT32 or TYPE_FP32{suffix}")
        _check_sources(batch_input.source_input, inputs, suffix)
    for batch_output in config.batch_output:
        kind = mc.BatchOutput.Kind.Name(batch_output.kind)
        if len(batch_output.source_input) != 1:
            raise TritonError(
                Code.INVALID_ARG,
                f"batch output kind '{kind}' expects 1 source input, got {len(batch_output.source_input)}{suffix}",
            )
        _check_sources(batch_output.source_input, inputs, suffix)
        targets: set[str] = set()
        for target in batch_output.target_name:
            if target not in outputs:
                raise TritonError(Code.INVALID_ARG, f"unknown target output name '{target}'{suffix}")
            if target in targets:
                raise TritonError(Code.INVALID_ARG, f"target output name '{target}' can only be specified once{suffix}")
            targets.add(target)


def _check_sources(sources: Iterable[str], inputs: set[str], suffix: str) -> None:
    for source in sources:
        if source not in inputs:
            raise TritonError(Code.INVALID_ARG, f"unknown source input name '{source}'{suffix}")
