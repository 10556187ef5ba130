"""Checks of an ensemble's ``ensemble_scheduling``, with Triton's messages.

Two stages, as in Triton:

* :func:`check_scheduling` looks at the ensemble's own config only (run when
  the repository is read; a failure is a "Poll failed" of the model folder):
  every step names a model and maps inputs and outputs, each ensemble tensor
  is written by one step at most, every ensemble input is used, every
  ensemble output is written and connected back to the ensemble inputs
  (a tensor in a cycle is not connected), and no intermediate tensor is left unused.
* :func:`check_composing` runs once the composing models are loaded: they
  exist and are ready, each step maps only tensors its model has, data types
  agree along every tensor, and the ensemble's ``max_batch_size`` fits every
  batching composing model.

Runs on the core's event loop (pure functions, no I/O).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import Code, TritonError

__all__ = ["Step", "steps_of", "check_scheduling", "check_composing", "step_version"]


@dataclass(frozen=True, slots=True)
class Step:
    """One ``ensemble_scheduling.step`` entry.

    :ivar index: position in the config (0-based).
    :ivar model_name: the composing model.
    :ivar model_version: its version; -1 = the highest ready version.
    :ivar input_map: model input name -> ensemble tensor name.
    :ivar output_map: model output name -> ensemble tensor name.
    """

    index: int
    model_name: str
    model_version: int
    input_map: Mapping[str, str]
    output_map: Mapping[str, str]

    @property
    def label(self) -> str:
        """How messages name the step: ``step 1 (model 'm')``."""
        return f"step {self.index} (model '{self.model_name}')"


def step_version(step: Step) -> str:
    """The version string a lookup takes ("" = highest ready version)."""
    return "" if step.model_version < 0 else str(step.model_version)


def steps_of(config: Mapping[str, Any]) -> list[Step]:
    """The steps of a config in its JSON form."""
    out = []
    for i, s in enumerate((config.get("ensemble_scheduling") or {}).get("step", [])):
        out.append(
            Step(
                i,
                str(s.get("model_name", "")),
                int(s.get("model_version", -1)),
                dict(s.get("input_map") or {}),
                dict(s.get("output_map") or {}),
            )
        )
    return out


def _fail(message: str) -> TritonError:
    return TritonError(Code.INVALID_ARG, message)


def check_scheduling(config: Mapping[str, Any]) -> None:
    """Check an ensemble config on its own (no composing model needed).

    :param config: the ensemble's config in its JSON form.
    :raises TritonError: INVALID_ARG with Triton's message.
    """
    name = str(config.get("name", ""))
    steps = steps_of(config)
    if not steps:
        raise _fail(f"must specify at least one step in ensemble '{name}'")
    inputs = [str(i["name"]) for i in config.get("input", [])]
    outputs = [str(o["name"]) for o in config.get("output", [])]
    producer: dict[str, Step] = {}
    consumed: set[str] = set()
    for step in steps:
        if not step.model_name:
            raise _fail(f"must specify 'model_name' in step {step.index} of ensemble '{name}'")
        if not step.input_map:
            raise _fail(f"must specify 'input_map' in step {step.index} of ensemble '{name}'")
        if not step.output_map:
            raise _fail(f"must specify 'output_map' in step {step.index} of ensemble '{name}'")
        consumed.update(step.input_map.values())
        for tensor in step.output_map.values():
            if tensor in producer:
                raise _fail(
                    f"ensemble tensor '{tensor}' can appear in an output map only once for ensemble '{name}' "
                    f"step {step.index}"
                )
            if tensor in inputs:
                raise _fail(f"ensemble input '{tensor}' for ensemble '{name}' is written by step {step.index}")
            producer[tensor] = step
    for tensor in inputs:
        if tensor not in consumed:
            raise _fail(f"ensemble input '{tensor}' for ensemble {name}' is not used")  # sic: Triton's quotes
    for tensor in outputs:
        if tensor not in producer:
            raise _fail(f"ensemble output '{tensor}' for ensemble {name}' is not used")  # sic
    # which tensors the ensemble inputs can produce: a step runs once all of its inputs exist
    connected: set[str] = set(inputs)
    grew = True
    while grew:
        grew = False
        for step in steps:
            if set(step.input_map.values()) <= connected and not set(step.output_map.values()) <= connected:
                connected.update(step.output_map.values())
                grew = True
    visited: set[str] = set(inputs)
    for output in outputs:
        if output not in connected:
            leaf = _dangling(output, producer, connected, [])
            raise _fail(
                f"output '{output}' for ensemble '{name}' is not written: at least one of its depending tensors, "
                f"'{leaf}', is not connected"
            )
        _mark(output, producer, visited)
    for step in steps:
        for tensor in [*step.input_map.values(), *step.output_map.values()]:
            if tensor not in visited:
                raise _fail(f"ensemble tensor '{tensor}' is unused in ensemble '{name}'")


def _dangling(tensor: str, producer: dict[str, Step], connected: set[str], path: list[str]) -> str:
    """The tensor that keeps ``tensor`` from being written: one no step writes, or the last before a cycle."""
    step = producer.get(tensor)
    if step is None:
        return tensor
    path.append(tensor)
    for source in step.input_map.values():
        if source in connected:
            continue
        if source in path:
            return tensor
        return _dangling(source, producer, connected, path)
    return tensor


def _mark(tensor: str, producer: dict[str, Step], visited: set[str]) -> None:
    """Mark ``tensor`` and everything it is computed from as used."""
    stack = [tensor]
    while stack:
        t = stack.pop()
        if t in visited:
            continue
        visited.add(t)
        step = producer.get(t)
        if step is not None:
            stack.extend(step.input_map.values())


def check_composing(config: Mapping[str, Any], lookup: Callable[[str, str], Any]) -> bool:
    """Check an ensemble against its composing models; return whether it is decoupled.

    :param config: the ensemble's config in its JSON form.
    :param lookup: ``(name, version) -> model``; raises :class:`TritonError`
        for a model that is not loaded and ready.
    :returns: True when a composing model is decoupled (the ensemble then is too, as in Triton).
    :raises TritonError: INVALID_ARG with Triton's message.
    """
    name = str(config.get("name", ""))
    steps = steps_of(config)
    models: dict[int, Any] = {}
    missing: list[str] = []
    for step in steps:
        try:
            models[step.index] = lookup(step.model_name, step_version(step))
        except TritonError:
            if step.model_name not in missing:
                missing.append(step.model_name)
    if missing:
        raise _fail(f"ensemble {name} contains models that are not available or ambiguous: {', '.join(missing)}")
    # data type of each ensemble tensor, and who said so
    types: dict[str, tuple[str, str]] = {}
    for io in config.get("input", []):
        types[str(io["name"])] = (str(io["data_type"]), name)
    for io in config.get("output", []):
        types.setdefault(str(io["name"]), (str(io["data_type"]), name))
    max_batch = int(config.get("max_batch_size", 0))
    decoupled = False
    for step in steps:
        model = models[step.index]
        mconfig = model.config
        decoupled = decoupled or bool(getattr(model, "decoupled", False))
        model_inputs = {str(i["name"]): i for i in mconfig.get("input", [])}
        model_outputs = {str(o["name"]): o for o in mconfig.get("output", [])}
        model_batch = int(mconfig.get("max_batch_size", 0))
        if max_batch > 0 and model_batch < max_batch:
            raise _fail(
                f"ensemble {name} allows maximum batch size {max_batch}, but it contains model "
                f"{step.model_name} which only allows maximum batch size to be {model_batch}"
            )
        pairs = []
        for mapping, specs, wording in (
            (step.input_map, model_inputs, "is mapping to non-existing input"),
            (step.output_map, model_outputs, "is mapped from non-existing output"),
        ):
            for model_tensor, tensor in mapping.items():
                if model_tensor not in specs:
                    raise _fail(
                        f"in ensemble {name}, ensemble tensor {tensor} {wording} {model_tensor} "
                        f"in model {step.model_name}"
                    )
                pairs.append((tensor, specs[model_tensor]))
        for model_input, spec in model_inputs.items():
            if model_input not in step.input_map and not spec.get("optional", False):
                raise _fail(
                    f"in ensemble {name}, input {model_input} in model {step.model_name} "
                    "is not mapped to any ensemble tensors"
                )
        for tensor, spec in pairs:
            dtype = str(spec.get("data_type", ""))
            seen = types.setdefault(tensor, (dtype, step.model_name))
            if seen[0] != dtype:
                raise _fail(
                    f"in ensemble {name}, ensemble tensor {tensor}: inconsistent data type: {seen[0]} is inferred "
                    f"from model {seen[1]} while {dtype} is inferred from model {step.model_name}"
                )
    return decoupled
