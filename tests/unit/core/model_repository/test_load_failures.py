"""ModelLookups.failures: what failed to load, and not what was unloaded on purpose."""

from __future__ import annotations

from tritium.core.model_repository.lifecycle import ModelEntry, ModelState, VersionStatus
from tritium.core.model_repository.lookups import ModelLookups


def test_failures_name_failed_models_and_versions_but_not_unloaded_ones() -> None:
    failed = VersionStatus.loading(2)
    failed.move(ModelState.UNAVAILABLE, "Invalid argument: boom")
    drained = VersionStatus.loading(1)
    drained.move(ModelState.READY)
    drained.move(ModelState.UNLOADING)
    drained.move(ModelState.UNAVAILABLE, "unloaded")
    models = {
        "a": ModelEntry("a", None, versions={1: VersionStatus.unloaded(1), 2: failed}),
        "b": ModelEntry("b", None, reason="failed to parse config.pbtxt"),
        "c": ModelEntry("c", None, versions={1: drained}),
    }
    assert ModelLookups(models).failures == ["a version 2: Invalid argument: boom", "b: failed to parse config.pbtxt"]


def test_no_failures_when_everything_loaded() -> None:
    ready = VersionStatus.loading(1)
    ready.move(ModelState.READY)
    assert ModelLookups({"a": ModelEntry("a", None, versions={1: ready})}).failures == []
