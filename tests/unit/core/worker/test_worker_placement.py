"""Placement rules (core/worker/placement.py) and the template's framework preloads (core/worker/preload.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritium.core.errors import Code, TritonError
from tritium.core.worker.placement import IsolationPolicy, isolation_policy
from tritium.core.worker.preload import frameworks_for


def _params(**values: str) -> dict[str, dict[str, str]]:
    return {key: {"string_value": value} for key, value in values.items()}


@pytest.mark.parametrize(
    ("backend", "parameters", "backend_setting", "global_setting", "timeout", "expected"),
    [
        ("onnxruntime", {}, None, None, 0.0, IsolationPolicy("shared")),
        ("onnxruntime", {}, None, None, 5.0, IsolationPolicy("model")),  # a timeout kills the worker
        ("onnxruntime", _params(worker_isolation="shared"), None, None, 5.0, IsolationPolicy("shared")),
        ("onnxruntime", {}, "instance", "model", 0.0, IsolationPolicy("instance")),  # the backend's wins
        ("onnxruntime", {}, None, "model", 0.0, IsolationPolicy("model")),
        ("onnxruntime", _params(worker_isolation="model"), "shared", None, 0.0, IsolationPolicy("model")),
        ("pytorch", _params(worker_group=" tenant "), None, None, 0.0, IsolationPolicy("shared", "tenant")),
        ("pytorch", _params(worker_group="g"), "model", None, 0.0, IsolationPolicy("shared", "g")),
        ("python", {}, None, None, 0.0, IsolationPolicy("instance")),
        ("python", {}, None, "shared", 0.0, IsolationPolicy("instance")),  # the global setting skips python
        ("python", _params(worker_isolation="instance"), None, None, 0.0, IsolationPolicy("instance")),
    ],
)
def test_isolation_policy(
    backend: str,
    parameters: dict[str, dict[str, str]],
    backend_setting: str | None,
    global_setting: str | None,
    timeout: float,
    expected: IsolationPolicy,
) -> None:
    assert isolation_policy("m", backend, parameters, backend_setting, global_setting, timeout) == expected


@pytest.mark.parametrize(
    ("backend", "parameters", "backend_setting", "message"),
    [
        (
            "onnxruntime",
            {},
            "sometimes",
            "model 'm': --backend-config=onnxruntime,worker-isolation is 'sometimes'; expected one of shared, model, "
            "instance",
        ),
        ("onnxruntime", _params(worker_group=""), None, "model 'm': model config parameter 'worker_group' is empty"),
        (
            "python",
            {},
            "shared",
            "model 'm': python models run in a worker process per instance, as in Triton (their code holds global "
            "state); worker isolation 'shared' (--backend-config=python,worker-isolation) is not supported for them",
        ),
        (
            "python",
            _params(worker_group="g"),
            None,
            "model 'm': python models run in a worker process per instance, as in Triton (their code holds global "
            "state); worker group 'g' is not supported for them",
        ),
    ],
)
def test_bad_isolation_settings(
    backend: str, parameters: dict[str, dict[str, str]], backend_setting: str | None, message: str
) -> None:
    with pytest.raises(TritonError) as info:
        isolation_policy("m", backend, parameters, backend_setting, None, 0.0)
    assert info.value.code == Code.INVALID_ARG and info.value.message == message


def test_placements_share_a_worker_only_where_the_mode_says() -> None:
    load_a, load_b = object(), object()
    env = ("/usr/bin/python3", ())
    shared_a = IsolationPolicy("shared").placements("onnxruntime", "a", "/r/a", ["a_0", "a_1"], env, load_a)
    shared_b = IsolationPolicy("shared").placements("onnxruntime", "b", "/r/b", ["b_0"], env, load_b)
    assert {p.key for p in shared_a + shared_b} == {shared_a[0].key} and shared_a[0].cwd == "/"
    other_env = IsolationPolicy("shared").placements("onnxruntime", "c", "/r/c", ["c_0"], ("/venv/python", ()), load_b)
    assert other_env[0].key != shared_a[0].key
    group = IsolationPolicy("shared", "g").placements("onnxruntime", "d", "/r/d", ["d_0"], env, load_b)
    assert group[0].key != shared_a[0].key and group[0].label == "onnxruntime worker group 'g'"
    model = IsolationPolicy("model").placements("onnxruntime", "a", "/r/a", ["a_0", "a_1"], env, load_a)
    assert (
        model[0].key
        == model[1].key
        != IsolationPolicy("model").placements("onnxruntime", "a", "/r/a", ["a_0"], env, load_b)[0].key
    )  # a reload is a new load: a new worker
    assert model[0].cwd == "/r/a" and model[0].shared
    alone = IsolationPolicy("instance").placements("python", "p", "/r/p", ["p_0", "p_1"], env, load_a)
    assert alone[0].key != alone[1].key and [p.label for p in alone] == ["p_0", "p_1"] and not alone[0].shared


def test_frameworks_the_template_preloads(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    assert frameworks_for("pytorch", tmp_path, 1, {}) == ("torch",)
    assert frameworks_for("onnxruntime", tmp_path, 1, {}) == ()
    assert frameworks_for("python", tmp_path, 1, {}) == ()  # no model.py: nothing to read
    (tmp_path / "1" / "model.py").write_text("import numpy as np\nfrom torch.nn import functional\n")
    assert frameworks_for("python", tmp_path, 1, {}) == ("torch",)
    (tmp_path / "1" / "other.py").write_text("def f():\n    import transformers\n")
    assert frameworks_for("python", tmp_path, 1, {"default_model_filename": "other.py"}) == ("torch",)
    (tmp_path / "1" / "model.py").write_text("import numpy\nfrom . import torch\n")  # a relative import is not it
    assert frameworks_for("python", tmp_path, 1, {}) == ()
    (tmp_path / "1" / "model.py").write_text("import torch\nthis is not python(\n")
    assert frameworks_for("python", tmp_path, 1, {}) == ()  # unreadable: nothing preloaded, nothing fails
