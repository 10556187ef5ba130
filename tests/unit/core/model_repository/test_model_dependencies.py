"""Ensemble dependencies in the repository: composing models, load order, closure, users."""

from __future__ import annotations

from pathlib import Path

from tests.support.ensembles import add_ensemble, add_python, step
from tritium.core.model_repository.dependencies import (
    closure,
    composing_of_source,
    load_layers,
    users,
)
from tritium.core.model_repository.repository import scan


def repo(root: Path) -> dict:
    add_python(root, "a", "")
    add_python(root, "b", "")
    add_ensemble(
        root, "ens", [step("a", {"INPUT0": "IN"}, {"OUTPUT0": "m"}), step("b", {"INPUT0": "m"}, {"OUTPUT0": "OUT"})]
    )
    add_ensemble(root, "outer", [step("ens", {"IN": "IN"}, {"OUT": "OUT"})])
    (root / "broken").mkdir()
    (root / "broken" / "config.pbtxt").write_text("this is not a config")
    return scan([root])[0]


def test_composing_models_of_a_folder(tmp_path: Path) -> None:
    sources = repo(tmp_path)
    assert composing_of_source(sources["ens"]) == {"a", "b"}
    assert composing_of_source(sources["outer"]) == {"ens"}
    assert composing_of_source(sources["a"]) == frozenset()
    assert composing_of_source(sources["broken"]) == frozenset()


def test_ensembles_load_after_what_they_compose(tmp_path: Path) -> None:
    layers = load_layers(repo(tmp_path).values())
    assert [sorted(s.name for s in layer) for layer in layers] == [["a", "b", "broken"], ["ens"], ["outer"]]


def test_closure_and_users() -> None:
    parts = {"outer": {"ens"}, "ens": {"a", "b"}, "ens2": {"b", "c"}}
    assert closure(["outer"], lambda n: parts.get(n, ())) == {"outer", "ens", "a", "b"}
    assert closure(["x"], lambda n: parts.get(n, ())) == {"x"}
    assert users("b", parts) == ["ens", "ens2"]
    assert users("ens", parts) == ["outer"]
    assert users("zz", parts) == []
