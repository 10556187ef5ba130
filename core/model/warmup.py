"""Model warmup (``model_warmup`` in the model config): requests run before a model is READY.

Each warmup sample names its inputs with a datatype, dims and where the
data comes from: ``zero_data`` (zeros; empty strings for BYTES),
``random_data`` (uniform random values; for BYTES the same as zero data,
as in Triton) or ``input_data_file`` (raw little-endian bytes — BYTES as
4-byte length-prefixed elements — read from ``<model>/warmup/<file>``; the
name must stay inside that folder). A sample with ``batch_size`` B sends
B requests of shape ``[1] + dims`` to a batching model (as Triton) and one
of shape ``dims`` otherwise; it runs ``count`` times (0 = once), and as many
copies at once as the model has instances (the scheduler spreads them; Triton
warms each instance itself). A
failing sample fails the load with the reason. Runs on the core's event
loop, while the model version is LOADING.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import Code, TritonError
from ..inference.request import InferenceRequest, InferInput
from ..inference.tensor import serialize_bytes
from ..inference.types import by_config_name, element_count
from ..model_repository.paths import safe_join

log = logging.getLogger("tritium.model")

__all__ = ["warmup_requests", "run_warmup"]

WARMUP_FOLDER = "warmup"


def _input_bytes(model_path: Path, sample: str, name: str, spec: dict[str, Any], shape: list[int]) -> tuple[str, bytes]:
    dt = by_config_name(str(spec.get("data_type", "TYPE_INVALID")))
    if dt is None:
        raise TritonError(Code.INVALID_ARG, f"warmup setting '{sample}': input '{name}' has an invalid data type")
    count = element_count(shape)
    if "input_data_file" in spec:
        folder = model_path / WARMUP_FOLDER
        path = safe_join(folder, str(spec["input_data_file"]), what="input_data_file")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TritonError(Code.INTERNAL, f"failed to open text file for read {path}: {exc.strerror}") from None
        if not dt.is_bytes and len(data) < count * dt.itemsize:
            raise TritonError(
                Code.INVALID_ARG,
                f"warmup setting '{sample}': input '{name}': file '{spec['input_data_file']}' has "
                f"{len(data)} bytes, expected {count * dt.itemsize}",
            )
        return dt.name, data if dt.is_bytes else data[: count * dt.itemsize]
    if dt.is_bytes:
        return dt.name, serialize_bytes(np.array([b""] * count, dtype=object))
    if spec.get("random_data"):
        rng = np.random.default_rng()
        if dt.numpy.kind == "f":
            array = rng.random(count).astype(dt.numpy)
        elif dt.numpy.kind == "b":
            array = rng.integers(0, 2, count).astype(bool)
        else:
            array = rng.integers(0, 100, count).astype(dt.numpy)
        return dt.name, array.tobytes()
    return dt.name, bytes(count * dt.itemsize)


def warmup_requests(
    model_name: str, model_path: Path, config: dict[str, Any]
) -> list[tuple[str, int, list[InferenceRequest]]]:
    """``(sample name, repetitions, requests)`` for every ``model_warmup`` sample of ``config``.

    As in Triton, a sample with ``batch_size`` B is B requests of batch 1
    (sent together) for a batching model, one request for another.

    :raises TritonError: INVALID_ARG for a sample that cannot be built (bad
        datatype, missing or short data file, a file outside ``warmup/``).
    """
    batching = int(config.get("max_batch_size", 0)) > 0
    out = []
    for sample in config.get("model_warmup", []):
        name = str(sample.get("name", ""))
        batch = int(sample.get("batch_size", 0))
        if batching and batch < 1:
            raise TritonError(Code.INVALID_ARG, f"warmup setting '{name}': batch_size must be >= 1")
        requests = []
        for _ in range(batch if batching else 1):
            request = InferenceRequest(model_name, id=f"warmup:{name}")
            for input_name, spec in sorted((sample.get("inputs") or {}).items()):
                dims = [int(d) for d in spec.get("dims", [])]
                shape = ([1] if batching else []) + dims
                datatype, data = _input_bytes(model_path, name, input_name, spec, shape)
                request.inputs.append(InferInput(input_name, datatype, shape, data))
            requests.append(request)
        out.append((name, max(1, int(sample.get("count", 0))), requests))
    return out


async def run_warmup(model: Any, model_path: Path) -> None:
    """Run ``model``'s warmup samples (each ``count`` times, once per instance).

    :param model: a loaded :class:`~tritium.core.model.model.Model`, not yet READY.
    :raises TritonError: INVALID_ARG ``failed to run warmup sample '<name>': <reason>; `` (Triton's words).
    """
    samples = warmup_requests(model.name, model_path, model.config)
    copies = max(1, len(model.instances))
    for name, repetitions, requests in samples:
        log.info("model '%s' version %d: warmup sample '%s'", model.name, model.version, name)
        for _ in range(repetitions):
            runs = [_run(model, request) for _ in range(copies) for request in requests]
            results = await asyncio.gather(*runs, return_exceptions=True)
            for result in results:
                if isinstance(result, TritonError):
                    raise TritonError(Code.INVALID_ARG, f"failed to run warmup sample '{name}': {result.message}; ")
                if isinstance(result, BaseException):
                    raise result


async def _run(model: Any, request: InferenceRequest) -> None:
    """One warmup request; every response released; the first error raised."""
    if not model.decoupled:
        (await model.infer(request)).release()
        return
    error = None
    async for response in model.infer_stream(request):
        error = error or response.error
        response.release()
    if error is not None:
        raise error
