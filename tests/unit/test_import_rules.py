"""Import rules of the package, read from the source with ``ast`` (nothing is imported).

* No import circles: every module stands above what it imports. Imports under
  ``TYPE_CHECKING`` and inside functions count too.
* Frontends use the server API only: a module under ``frontends/`` imports from
  the core only what ``tritium.core`` (``core/__init__.py``) exports.

The distribution maps packages to folders (pyproject's
``[tool.setuptools.package-dir]``: ``tritium.core`` is ``core/``, ...); the
python backend's modules import each other by their bare names (the backend
puts its folder on ``sys.path``), so a bare name is looked up among the
importing module's siblings first.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, Path]:
    """Every Python module of the distribution: dotted name -> file."""
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    package_dirs: dict[str, str] = settings["package-dir"]
    mapped = set(package_dirs.values())
    modules: dict[str, Path] = {}
    for package, folder in package_dirs.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if package == "tritium" and folder == "tritium" and parts and parts[0] in mapped:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    # compiled extensions (setup.py): leaves, they import nothing of the package
    for name in re.findall(r'^[A-Z_]+ = "(tritium\.[\w.]+)"', (ROOT / "setup.py").read_text(), re.M):
        modules.setdefault(name, Path())
    return modules


MODULES = _modules()


def _known(name: str) -> str | None:
    """The module of the package that importing ``name`` runs last (None: outside the package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The package's modules one import statement of ``module`` names."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            sibling = f"{package}.{alias.name}"
            names.append(sibling if sibling in MODULES else alias.name)
    else:
        if node.level:
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
        else:
            assert node.module is not None
            sibling = f"{package}.{node.module}"
            base = sibling if _known(sibling) not in (None, package) else node.module
        for alias in node.names:
            full = f"{base}.{alias.name}"
            names.append(full if full in MODULES else base)
    found = (_known(name) for name in names)
    return [target for target in found if target is not None and target != module]


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (anywhere in its file)."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        graph[module] = set()
        if path == Path():
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module].update(_targets(module, path, node))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # iterative Tarjan: (node, iterator over its successors)
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_graph_sees_the_package() -> None:
    """The walk finds the mapped folders and the python backend's bare-name imports."""
    graph = import_graph()
    assert "tritium.core.server" in graph and "tritium.frontends.kserve_http.app" in graph
    assert "tritium.core.memory.shm_region" in graph["tritium.core.server"]
    assert "tritium.backends.python.c_python_backend_utils" in graph["tritium.backends.python.libtriton_python"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles() -> None:
    """No module imports (directly or through others) a module that imports it."""
    graph = import_graph()
    found = cycles(graph)
    detail = [{m: sorted(graph[m] & set(c)) for m in c} for c in found]
    assert not found, f"import circles: {detail}"


def _api_exports() -> set[str]:
    """The names ``core/api.py`` lists in ``__all__`` (read from the source)."""
    tree = ast.parse((ROOT / "core" / "api.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return {ast.literal_eval(item) for item in node.value.elts}  # type: ignore[attr-defined]
    raise AssertionError("core/api.py has no __all__")


#: the plugin hook marker, which plugins outside the package import from its own module
#: (docs/endpoint_plugins.md; tests/unit/frontends/openai/test_openai_plugin_api.py pins the OpenAI plugin's use)
_PLUGIN_API = {"tritium.core.hookspecs"}
#: where the server API's names may be imported from: its module, or the package (which re-exports them)
_SERVER_API = {"tritium.core.api", "tritium.core"}


def server_api_breaches(prefixes: tuple[str, ...]) -> list[str]:
    """The imports of the modules under ``prefixes`` that reach the core other than through the
    server API (``tritium.core.api``'s names), or the plugin hook marker's module."""
    exports = _api_exports()
    wrong: list[str] = []
    for module, path in MODULES.items():
        if not (module.startswith(prefixes) or module in {p.rstrip(".") for p in prefixes}) or path == Path():
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(module, path, node):
                if target in _PLUGIN_API or not (target == "tritium.core" or target.startswith("tritium.core.")):
                    continue
                if target not in _SERVER_API or isinstance(node, ast.Import):
                    wrong.append(f"{module}:{node.lineno} imports {target}")
                else:
                    wrong += [
                        f"{module}:{node.lineno} imports {alias.name} (not in tritium.core.api.__all__)"
                        for alias in node.names
                        if alias.name not in exports
                    ]
    return wrong


def test_frontends_and_integrations_use_only_the_server_api() -> None:
    """A frontend or integration module imports from the core only the server API's names
    (``tritium.core.api``, re-exported by ``tritium.core``), and the plugin hook marker's module."""
    wrong = server_api_breaches(("tritium.frontends.", "tritium.integrations."))
    assert not wrong, "\n".join(wrong)


def test_the_rule_finds_a_breach(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A module that imports the server directly, or a name the API does not export, is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from ...core.server import InferenceServer\nfrom ...core import Model\nfrom ...core.api import ServerAPI\n"
    )
    monkeypatch.setitem(MODULES, "tritium.integrations.ray_serve.bad", bad)
    found = server_api_breaches(("tritium.integrations.",))
    assert found == [
        "tritium.integrations.ray_serve.bad:1 imports tritium.core.server",
        "tritium.integrations.ray_serve.bad:2 imports Model (not in tritium.core.api.__all__)",
    ]


def test_the_package_re_exports_the_server_api() -> None:
    """``tritium.core``'s names are the server API's, typed (mypy sees ``core/api.py``'s)."""
    import tritium.core
    import tritium.core.api

    for name in tritium.core.api.__all__:
        assert getattr(tritium.core, name) is getattr(tritium.core.api, name)
