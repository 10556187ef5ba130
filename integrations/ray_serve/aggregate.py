"""One answer from many replicas: statistics summed, metrics labelled by replica.

Pure functions over plain data (what the replicas send back through the
coordinator), so they run anywhere and are tested without Ray.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.core import Metric

from ...frontends.metrics.collector import render

__all__ = ["merge_statistics", "metric_families", "render_metrics"]

#: one metric family as plain data: ``(name, help, type, [(sample name, labels, value), ...])``
Family = tuple[str, str, str, list[tuple[str, dict[str, str], float]]]


def _add(total: Any, part: Any, key: str = "") -> Any:
    """``total`` plus ``part``: numbers summed (``last_inference``: the latest), dicts key by key."""
    if isinstance(total, dict) and isinstance(part, dict):
        for k, v in part.items():
            total[k] = _add(total[k], v, k) if k in total else copy.deepcopy(v)
        return total
    if key == "batch_stats":
        return _add_batches(total, part)
    if key == "memory_usage":
        return total + part
    if key == "last_inference":
        return max(total, part)
    if isinstance(total, bool) or isinstance(part, bool) or isinstance(total, str):
        return total
    if isinstance(total, (int, float)) and isinstance(part, (int, float)):
        return total + part
    return total


def _add_batches(total: list[dict[str, Any]], part: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_size = {int(b["batch_size"]): b for b in total}
    for batch in part:
        size = int(batch["batch_size"])
        if size in by_size:
            _add(by_size[size], {k: v for k, v in batch.items() if k != "batch_size"})
        else:
            by_size[size] = copy.deepcopy(batch)
    return [by_size[size] for size in sorted(by_size)]


def merge_statistics(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Sum the statistics extension's answers (``{"model_stats": [...]}``) of several replicas.

    Entries are matched by model name and version; counts and nanoseconds add
    up, ``batch_stats`` add up per batch size, ``last_inference`` is the
    latest. The order is the first replica's, then models only later ones have.
    """
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for part in parts:
        for stat in part.get("model_stats", []):
            key = (stat["name"], str(stat["version"]))
            if key in merged:
                _add(merged[key], stat)
            else:
                merged[key] = copy.deepcopy(stat)
    return {"model_stats": list(merged.values())}


def metric_families(families: Iterable[Metric]) -> list[Family]:
    """prometheus-client metric families as plain picklable data."""
    return [(f.name, f.documentation, f.type, [(s.name, dict(s.labels), s.value) for s in f.samples]) for f in families]


def render_metrics(per_replica: Mapping[str, list[Family]]) -> bytes:
    """Prometheus text of every replica's families, each sample labelled ``replica="<id>"``.

    A family appears once (one ``# HELP``/``# TYPE``) with the samples of all
    replicas, as the text format requires. The label value is the replica's
    Serve id, the same value Serve's own metrics carry in their ``replica`` label.
    """
    families: dict[str, Metric] = {}
    for replica_id in sorted(per_replica):
        for name, documentation, kind, samples in per_replica[replica_id]:
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(name, documentation, kind)
            for sample_name, labels, value in samples:
                family.add_sample(sample_name, {**labels, "replica": replica_id}, value)
    return render(families.values())
