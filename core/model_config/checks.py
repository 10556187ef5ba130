"""Load-time checks of a model config that Triton 2.51 makes beyond the basic shape rules.

:func:`check_scheduling` follows the queue and batching parts of Triton's
``ValidateModelConfig`` (priority levels, queue policies, ``preserve_ordering``,
``oldest`` preferred sizes); :func:`check_batch_io` its ``ValidateBatchIO``
(batch inputs and outputs); :func:`check_instance_profiles` its rule that only
TensorRT models name optimization profiles; :func:`check_batch_strategy`
the custom batching strategy parameter. Messages are Triton's, each naming
the model; every failure is a :class:`~tritium.core.errors.TritonError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...proto import model_config_pb2 as mc
from ..errors import Code, TritonError

__all__ = ["check_scheduling", "check_instance_profiles", "check_batch_strategy"]

#: the parameter that names a custom batching strategy library (Triton's dynamic batcher)
BATCH_STRATEGY_PARAMETER = "TRITON_BATCH_STRATEGY_PATH"
#: the file Triton loads as a custom batching strategy when the parameter is absent
BATCH_STRATEGY_FILE = "batchstrategy.so"


def _invalid(message: str) -> TritonError:
    return TritonError(Code.INVALID_ARG, message)


def check_scheduling(config: mc.ModelConfig) -> None:
    """Triton's checks of ``dynamic_batching`` priorities and ordering, and of ``oldest`` preferred sizes.

    :raises TritonError: INVALID_ARG with Triton 2.51's message (checked against the
        real server): ``default priority level must be in range [1, N] for <m>``
        (unset or above ``priority_levels``), ``priority queue policy must have
        priority level in range [1, N] for <m>``, ``Only one priority level is
        allowed when 'preserve_ordering' is true for <m>``, ``Queue policy can not
        have DELAY as timeout action when 'preserve_ordering' is true for <m>``,
        ``sequence batching preferred batch size must be positive`` / ``must be <=
        max batch size for <m>``, ``sequence batching minimum slot utilization must be in
        range (0.0, 1.0] for <m>`` (below 0 or above 1; 0 itself passes, as in Triton).
    """
    name = config.name
    if config.HasField("dynamic_batching"):
        batching = config.dynamic_batching
        levels = batching.priority_levels
        if levels != 0:
            if batching.default_priority_level == 0 or batching.default_priority_level > levels:
                raise _invalid(f"default priority level must be in range [1, {levels}] for {name}")
            for level in batching.priority_queue_policy:
                if level == 0 or level > levels:
                    raise _invalid(f"priority queue policy must have priority level in range [1, {levels}] for {name}")
        if batching.preserve_ordering:
            if levels > 1:
                raise _invalid(f"Only one priority level is allowed when 'preserve_ordering' is true for {name}")
            policies = [batching.default_queue_policy, *batching.priority_queue_policy.values()]
            for policy in policies:
                if policy.default_timeout_microseconds != 0 and policy.timeout_action == mc.ModelQueuePolicy.DELAY:
                    raise _invalid(
                        f"Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for {name}"
                    )
    if config.HasField("sequence_batching") and config.sequence_batching.HasField("direct"):
        utilization = config.sequence_batching.direct.minimum_slot_utilization
        if utilization < 0.0 or utilization > 1.0:
            raise _invalid(f"sequence batching minimum slot utilization must be in range (0.0, 1.0] for {name}")
    if config.HasField("sequence_batching") and config.sequence_batching.HasField("oldest"):
        for size in config.sequence_batching.oldest.preferred_batch_size:
            if size <= 0:
                raise _invalid(f"sequence batching preferred batch size must be positive for {name}")
            if size > config.max_batch_size:
                raise _invalid(f"sequence batching preferred batch size must be <= max batch size for {name}")


def check_instance_profiles(config: mc.ModelConfig) -> None:
    """Triton's rule that only TensorRT models (``tensorrt_plan``) name optimization profiles.

    :raises TritonError: INVALID_ARG ``instance group <g> of model <m> and platform <p>
        specifies profile field which is only supported for TensorRT models`` (Triton
        2.51's words; it runs the platform into "specifies", tritium keeps a space).
    """
    if config.platform == "tensorrt_plan":
        return
    for group in config.instance_group:
        if group.profile:
            platform = f"{config.platform} " if config.platform else ""
            raise _invalid(
                f"instance group {group.name} of model {config.name} and platform {platform}specifies profile "
                "field which is only supported for TensorRT models"
            )


def check_batch_strategy(config: mc.ModelConfig, search_paths: Sequence[Path]) -> None:
    """Refuse a custom batching strategy (``TRITON_BATCH_STRATEGY_PATH`` or a ``batchstrategy.so``).

    Triton 2.51 loads such a library and calls its ``TRITONBACKEND_ModelBatch*``
    functions while it forms dynamic batches; tritium does not call them, so a model
    that would get one is refused rather than batched differently.

    :param search_paths: where Triton looks for ``batchstrategy.so`` when the parameter
        is absent (the version folder, then the model folder).
    :raises TritonError: INVALID_ARG (Triton's words) for the parameter with a sequence
        batcher; NOT_FOUND ``Batching library path not found: <path>`` (Triton's words,
        the path checked as given) when the named file does not exist; UNSUPPORTED
        naming the parameter or the file otherwise.
    """
    name = config.name
    if config.HasField("sequence_batching"):
        if BATCH_STRATEGY_PARAMETER in config.parameters:
            raise _invalid(
                f"{BATCH_STRATEGY_PARAMETER} cannot be specified with sequence batcher, using default batching strategy"
            )
        return
    if BATCH_STRATEGY_PARAMETER in config.parameters:
        path = config.parameters[BATCH_STRATEGY_PARAMETER].string_value
        if not Path(path).exists():
            raise TritonError(Code.NOT_FOUND, f"Batching library path not found: {path}")
        what = f"parameter '{BATCH_STRATEGY_PARAMETER}'"
    else:
        found = [p for p in search_paths if (p / BATCH_STRATEGY_FILE).exists()]
        if not found:
            return
        what = f"the custom batching strategy library '{BATCH_STRATEGY_FILE}' in its folder"
    raise TritonError(
        Code.UNSUPPORTED,
        f"model '{name}': {what} is not supported: tritium does not call custom batching strategies "
        "(TRITONBACKEND_ModelBatch* functions); remove it to use the built-in dynamic batcher",
    )
