"""Inputs and outputs as KServe model metadata lists them (``GET /v2/models/<m>``).

Each tensor is ``{"name", "datatype", "shape"}``: the KServe datatype name of
the config's ``data_type`` and the config's ``dims``, with a leading ``-1``
(the batch dimension) when the model batches (``max_batch_size > 0``), as
Triton reports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .types import by_config_name

__all__ = ["tensor_metadata", "by_name_config"]


def by_name_config(config_name: str) -> str:
    """KServe datatype name of a model-config datatype name (``TYPE_FP32`` -> ``FP32``; unknown: ``INVALID``)."""
    dt = by_config_name(config_name)
    return dt.name if dt is not None else "INVALID"


def tensor_metadata(config: Mapping[str, Any], which: str) -> list[dict[str, Any]]:
    """The config's inputs or outputs (``which`` = ``"input"`` / ``"output"``) as model metadata lists them."""
    batch = [-1] if int(config.get("max_batch_size", 0)) > 0 else []
    out = []
    for item in config.get(which, []):
        dt = by_name_config(item["data_type"])
        out.append({"name": item["name"], "datatype": dt, "shape": batch + [int(d) for d in item.get("dims", [])]})
    return out
