"""Defaults and validation of a model config, as Triton 2.51 applies them.

Two steps, as in Triton:

* :func:`prepare` runs before the backend sees the config: fills the name,
  ``backend``/``platform``/``default_model_filename`` (from each other or
  from the files in the first version folder), ``version_policy``, pinned
  memory defaults and instance groups, and validates what does not depend on
  auto-complete. With auto-complete disabled it validates inputs and outputs too.
* :func:`finalize` runs on the config the backend returns (auto-completed)
  and validates everything again, inputs and outputs included.

Messages are Triton's, and each names the model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ...proto import model_config_pb2 as mc
from ..errors import Code, TritonError
from . import checks
from .batch_io import validate_batch_io

__all__ = ["prepare", "finalize", "backend_of_platform", "DEFAULT_FILENAMES"]

# platform -> backend (Triton's GetBackendTypeFromPlatform)
_PLATFORM_BACKEND = {
    "tensorrt_plan": "tensorrt",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
}
# backend -> (platform it implies, default model file name)
DEFAULT_FILENAMES = {
    "tensorrt": ("tensorrt_plan", "model.plan"),
    "onnxruntime": ("onnxruntime_onnx", "model.onnx"),
    "pytorch": ("pytorch_libtorch", "model.pt"),
    "python": ("", "model.py"),
}
# the tensorflow backend's platforms -> default model file name (Triton's AutoCompleteBackendFields)
_TENSORFLOW_FILES = {"tensorflow_savedmodel": "model.savedmodel", "tensorflow_graphdef": "model.graphdef"}
# backends whose KIND_CPU groups default to two instances, as in Triton
_TWO_CPU_INSTANCES = {"onnxruntime", "tensorflow"}
ENSEMBLE = "ensemble"


def backend_of_platform(platform: str) -> str | None:
    """The backend a Triton ``platform`` maps to (None for unknown or ensemble)."""
    return _PLATFORM_BACKEND.get(platform)


def _first_version_files(model_path: Path) -> set[str]:
    try:
        versions = sorted(p.name for p in model_path.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return set()
    if not versions:
        return set()
    try:
        return {p.name for p in (model_path / versions[0]).iterdir()}
    except OSError:
        return set()


def _autofill_backend(config: mc.ModelConfig, model_name: str, model_path: Path) -> None:
    """Triton's AutoCompleteBackendFields for the backends tritium knows."""
    if not config.name:
        config.name = model_name
    if config.platform == ENSEMBLE:
        return
    files = _first_version_files(model_path)
    if not config.backend:
        implied = _PLATFORM_BACKEND.get(config.platform)
        if implied:
            config.backend = implied
        else:
            for backend, (_platform, filename) in DEFAULT_FILENAMES.items():
                if config.default_model_filename == filename or (
                    not config.platform and not config.default_model_filename and filename in files
                ):
                    config.backend = backend
                    break
    if not config.backend and not config.platform and config.default_model_filename in _TENSORFLOW_FILES.values():
        config.backend = "tensorflow"
    if not config.backend and not config.platform and not config.default_model_filename:
        for filename in _TENSORFLOW_FILES.values():
            if filename in files:
                config.backend = "tensorflow"
    if config.backend == "tensorflow":
        if not config.platform:
            for platform, filename in _TENSORFLOW_FILES.items():
                if filename in files or config.default_model_filename == filename:
                    config.platform = platform
                    break
        if not config.default_model_filename and config.platform in _TENSORFLOW_FILES:
            config.default_model_filename = _TENSORFLOW_FILES[config.platform]
        return
    if config.backend in DEFAULT_FILENAMES:
        platform, filename = DEFAULT_FILENAMES[config.backend]
        if platform and not config.platform:
            config.platform = platform
        if not config.default_model_filename and not (config.backend == "pytorch" and config.runtime == "model.py"):
            if config.backend == "pytorch" and filename not in files and "model.pt2" in files:
                filename = "model.pt2"  # a torch.export program (tritium's pytorch backend loads it)
            config.default_model_filename = filename
        return
    if not config.backend and not config.platform and not config.default_model_filename:
        if "." not in model_name:
            raise TritonError(
                Code.INVALID_ARG,
                f"Invalid model name: Could not determine backend for model '{model_name}' with no backend "
                "in model configuration. Expected model name of the form 'model.<backend_name>'.",
            )
        backend = model_name.split(".", 1)[1]
        config.backend = backend
        config.default_model_filename = f"model.{backend}"


def _normalize_defaults(config: mc.ModelConfig) -> None:
    """Triton's NormalizeModelConfig."""
    if not config.HasField("version_policy"):
        config.version_policy.latest.num_versions = 1
    if config.HasField("dynamic_batching") and not config.dynamic_batching.preferred_batch_size:
        if config.max_batch_size > 0:
            config.dynamic_batching.preferred_batch_size.append(config.max_batch_size)
    if config.HasField("sequence_batching"):
        seq = config.sequence_batching
        if seq.max_sequence_idle_microseconds == 0:
            seq.max_sequence_idle_microseconds = 1_000_000
        if seq.HasField("oldest") and not seq.oldest.preferred_batch_size and config.max_batch_size > 0:
            seq.oldest.preferred_batch_size.append(config.max_batch_size)
    if not config.HasField("ensemble_scheduling"):
        opt = config.optimization
        if not opt.HasField("input_pinned_memory"):
            opt.input_pinned_memory.enable = True
        if not opt.HasField("output_pinned_memory"):
            opt.output_pinned_memory.enable = True


def _normalize_instance_groups(config: mc.ModelConfig, gpus: Sequence[int]) -> None:
    """Triton's NormalizeInstanceGroup (no backend-preferred groups)."""
    if config.HasField("ensemble_scheduling"):
        return
    groups = config.instance_group
    if not groups:
        groups.add(name=config.name)
    for index, group in enumerate(groups):
        if not group.name:
            group.name = f"{config.name}_{index}"
        if group.kind == mc.ModelInstanceGroup.KIND_AUTO:
            if not gpus or any(g not in gpus for g in group.gpus):
                group.kind = mc.ModelInstanceGroup.KIND_CPU
            else:
                group.kind = mc.ModelInstanceGroup.KIND_GPU
        if group.count < 1:
            group.count = (
                2 if (group.kind == mc.ModelInstanceGroup.KIND_CPU and config.backend in _TWO_CPU_INSTANCES) else 1
            )
        if group.kind == mc.ModelInstanceGroup.KIND_GPU and not group.gpus:
            group.gpus.extend(gpus)


def _validate_instance_groups(config: mc.ModelConfig, gpus: Sequence[int]) -> None:
    """Triton's ValidateInstanceGroup."""
    if config.HasField("ensemble_scheduling"):
        return
    if not config.instance_group:
        raise TritonError(Code.INVALID_ARG, f"must specify one or more 'instance group's for {config.name}")
    for group in config.instance_group:
        where = f"instance group {group.name} of model {config.name}"
        if group.kind == mc.ModelInstanceGroup.KIND_MODEL:
            if group.gpus:
                raise TritonError(Code.INVALID_ARG, f"{where} has kind KIND_MODEL but specifies one or more GPUs")
        elif group.kind == mc.ModelInstanceGroup.KIND_GPU:
            if not group.gpus:
                if not gpus:
                    raise TritonError(Code.INVALID_ARG, f"{where} has kind KIND_GPU but no GPUs are available")
                raise TritonError(Code.INVALID_ARG, f"{where} has kind KIND_GPU but specifies no GPUs")
            for gid in group.gpus:
                if gid not in gpus:
                    raise TritonError(
                        Code.INVALID_ARG,
                        f"{where} specifies invalid or unsupported gpu id {gid}. GPUs available: "
                        + ", ".join(str(g) for g in gpus),
                    )
        elif group.kind == mc.ModelInstanceGroup.KIND_CPU:
            if group.gpus:
                raise TritonError(Code.INVALID_ARG, f"{where} has kind KIND_CPU but specifies one or more GPUs")
        if group.count < 1:
            raise TritonError(Code.INVALID_ARG, f"{where} must have count >= 1")
    checks.check_instance_profiles(config)


def _validate_model(config: mc.ModelConfig) -> None:
    """Triton's ValidateModelConfig (the parts tritium implements)."""
    if not config.name:
        raise TritonError(Code.INVALID_ARG, "model configuration must specify 'name'")
    if not config.backend:
        if config.platform != ENSEMBLE:
            raise TritonError(Code.INVALID_ARG, f"unexpected platform type '{config.platform}' for {config.name}")
    elif config.platform == ENSEMBLE:
        raise TritonError(
            Code.INVALID_ARG,
            f"Ensemble model '{config.name}' must have platform type '{config.platform}' and empty backend type",
        )
    known = config.backend in {b for b in _PLATFORM_BACKEND.values()}
    if known and _PLATFORM_BACKEND.get(config.platform) != config.backend:
        raise TritonError(
            Code.INVALID_ARG,
            f"unexpected 'platform' and 'backend' pair, got:{config.platform}, {config.backend}",
        )
    if config.max_batch_size < 0:
        raise TritonError(Code.INVALID_ARG, f"'max_batch_size' must be non-negative value for {config.name}")
    if config.HasField("dynamic_batching"):
        for size in config.dynamic_batching.preferred_batch_size:
            if size <= 0:
                raise TritonError(
                    Code.INVALID_ARG, f"dynamic batching preferred size must be positive for {config.name}"
                )
            if size > config.max_batch_size:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"dynamic batching preferred size must be <= max batch size for {config.name}",
                )
    if config.HasField("ensemble_scheduling") and config.platform != ENSEMBLE:
        raise TritonError(
            Code.INVALID_ARG,
            f"ensemble scheduling cannot be set for model '{config.name}' whose platform is not {ENSEMBLE}",
        )
    if config.platform == ENSEMBLE and not config.HasField("ensemble_scheduling"):
        raise TritonError(
            Code.INVALID_ARG,
            f"ensemble scheduling must be set for ensemble {config.name} whose platform is {ENSEMBLE}",
        )
    checks.check_scheduling(config)


def _element_chunks(dims: Iterable[int]) -> list[int]:
    chunks, current = [], 1
    for dim in dims:
        if dim == -1:
            chunks.append(current)
            current = 1
        else:
            current *= dim
    chunks.append(current)
    return chunks


def _validate_io(config: mc.ModelConfig) -> None:
    """Triton's ValidateModelIOConfig (shape rules, batch inputs and outputs), plus unique tensor names."""
    for kind, items in (("input", config.input), ("output", config.output)):
        seen: set[str] = set()
        for io in items:
            prefix = f"model {kind} "
            if not io.name:
                raise TritonError(Code.INVALID_ARG, f"{prefix}must specify 'name' for {config.name}")
            named = f"{prefix}'{io.name}' "
            if io.name in seen:
                raise TritonError(Code.INVALID_ARG, f"{named}is specified more than once for {config.name}")
            seen.add(io.name)
            if io.data_type == mc.TYPE_INVALID:
                raise TritonError(Code.INVALID_ARG, f"{named}must specify 'data_type' for {config.name}")
            if not io.dims:
                raise TritonError(Code.INVALID_ARG, f"{named}must specify 'dims' for {config.name}")
            if io.HasField("reshape") and not io.reshape.shape and config.max_batch_size == 0:
                raise TritonError(
                    Code.INVALID_ARG,
                    f"{named}cannot have empty reshape for non-batching model as scalar tensors are not "
                    f"supported for {config.name}",
                )
            for dim in io.dims:
                if dim < 1 and dim != -1:
                    raise TritonError(
                        Code.INVALID_ARG,
                        f"{named}dimension must be integer >= 1, or -1 to indicate a variable-size dimension "
                        f"for {config.name}",
                    )
            if io.HasField("reshape"):
                for dim in io.reshape.shape:
                    if dim < 1 and dim != -1:
                        raise TritonError(
                            Code.INVALID_ARG,
                            f"{named}reshape dimensions must be integer >= 1, or -1 to indicate a "
                            f"variable-size dimension for {config.name}",
                        )
                dims_chunks = _element_chunks(io.dims)
                reshape_chunks = _element_chunks(io.reshape.shape)
                empty_ok = not io.reshape.shape and dims_chunks == [1]
                if not empty_ok:
                    if len(dims_chunks) != len(reshape_chunks):
                        raise TritonError(
                            Code.INVALID_ARG,
                            f"{named}has different number of variable-size dimensions for dims and reshape "
                            f"for {config.name}",
                        )
                    if dims_chunks != reshape_chunks:
                        raise TritonError(
                            Code.INVALID_ARG, f"{named}has different size for dims and reshape for {config.name}"
                        )
            if kind == "input":
                fmt = io.format
                if fmt in (mc.ModelInput.FORMAT_NHWC, mc.ModelInput.FORMAT_NCHW) and len(io.dims) != 3:
                    raise TritonError(Code.INVALID_ARG, f"model input NHWC/NCHW require 3 dims for {config.name}")
            if io.is_shape_tensor and config.platform != "tensorrt_plan":
                raise TritonError(
                    Code.INVALID_ARG, f"shape tensors are only supported for TensorRT platform for {config.name}"
                )
    validate_batch_io(config)


def prepare(
    config: mc.ModelConfig | None,
    model_name: str,
    model_path: Path,
    auto_complete: bool,
    gpus: Sequence[int],
) -> mc.ModelConfig:
    """Fill defaults and validate a config before the backend's auto-complete (instance groups excepted).

    :param config: the parsed ``config.pbtxt``; None when the file is absent
        (allowed only with auto-complete).
    :param model_name: the model's folder name.
    :param model_path: the model's folder.
    :param auto_complete: whether the backend will complete the config.
    :param gpus: ids of the GPUs available.
    :raises TritonError: INVALID_ARG with Triton's message.
    """
    if config is None:
        if not auto_complete:
            raise TritonError(
                Code.INVALID_ARG,
                f"failed to load model '{model_name}': config.pbtxt is missing and auto-complete is disabled",
            )
        config = mc.ModelConfig()
    else:
        copy = mc.ModelConfig()
        copy.CopyFrom(config)
        config = copy
    _autofill_backend(config, model_name, model_path)
    _normalize_defaults(config)
    _validate_model(config)
    if not auto_complete:
        _validate_io(config)
    if config.name != model_name:
        raise TritonError(
            Code.INVALID_ARG,
            f"unexpected directory name '{model_name}' for model '{config.name}', directory name must equal model name",
        )
    return config


def instance_groups(config: mc.ModelConfig, gpus: Sequence[int]) -> mc.ModelConfig:
    """Fill in and check the instance groups (Triton does this when it creates the model's backend).

    :raises TritonError: INVALID_ARG with Triton's message (e.g. KIND_GPU without GPUs).
    """
    _normalize_instance_groups(config, gpus)
    _validate_instance_groups(config, gpus)
    return config


def finalize(config: mc.ModelConfig, model_name: str, gpus: Sequence[int]) -> mc.ModelConfig:
    """Validate the config a backend returned from its (auto-completing) model initialization.

    :raises TritonError: INVALID_ARG with Triton's message.
    """
    if config.name != model_name:
        raise TritonError(
            Code.INVALID_ARG,
            f"unexpected directory name '{model_name}' for model '{config.name}', directory name must equal model name",
        )
    _normalize_defaults(config)
    _validate_model(config)
    _validate_io(config)
    _normalize_instance_groups(config, gpus)
    _validate_instance_groups(config, gpus)
    return config
