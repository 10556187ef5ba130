"""The OpenAI endpoint is an ordinary endpoint plugin: of tritium it uses only the public plugin API.

That API is what docs/endpoint_plugins.md lists: the hook specification (``tritium.core.hookspecs``),
the names ``tritium.core.api`` exports, and the calls of its ``ServerAPI``. Read from the
plugin's source (its imports and every attribute it takes from the server object), so that a
change reaching into the core's internals fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tritium.core as core
import tritium.core.api as api
import tritium.core.hookspecs as hookspecs
import tritium.frontends.sse as sse
from tritium.core.api import ServerAPI

ROOT = Path(__file__).resolve().parents[4]
PLUGIN = ROOT / "frontends" / "openai"
GUIDE = ROOT / "docs" / "endpoint_plugins.md"
PUBLIC = {
    "tritium.core": set(core.__all__),
    "tritium.core.api": set(api.__all__),
    "tritium.core.hookspecs": set(hookspecs.__all__),
    "tritium.frontends.sse": set(sse.__all__),  # the Server-Sent Events helpers endpoints share
}
#: the in-process calls the guide lists for plugins
SERVER_API = {
    "options",
    "live",
    "ready",
    "metadata",
    "model_ready",
    "model_metadata",
    "model_config",
    "repository_index",
    "statistics",
    "infer",
    "infer_stream",
    "load_model",
    "unload_model",
}


def _modules() -> dict[str, ast.Module]:
    return {path.name: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(PLUGIN.glob("*.py"))}


def test_the_plugin_imports_nothing_of_tritium_but_the_public_api() -> None:
    modules = _modules()
    used: dict[str, set[str]] = {}
    for filename, tree in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("tritium") or alias.name in PUBLIC, (filename, alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: only the plugin's own modules
                    assert node.level == 1 and f"{node.module}.py" in modules, (filename, node.module)
                elif (node.module or "").startswith("tritium"):
                    assert node.module in PUBLIC, (filename, node.module)
                    names = {alias.name for alias in node.names}
                    assert names <= PUBLIC[node.module], (filename, names - PUBLIC[node.module])
                    used.setdefault(node.module, set()).update(names)
    # what it does use: the hook marker and the in-process API's request, response and error types
    assert used == {
        "tritium.core.api": {
            "Code",
            "InferenceRequest",
            "InferenceResponse",
            "InferInput",
            "ServerAPI",
            "TritonError",
        },
        "tritium.core.hookspecs": {"hookimpl"},
        "tritium.frontends.sse": {"event", "primed"},
    }


def test_the_plugin_calls_only_the_documented_in_process_api() -> None:
    calls: set[str] = set()
    for tree in _modules().values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                owner = node.value
                if (isinstance(owner, ast.Name) and owner.id == "server") or (
                    isinstance(owner, ast.Attribute) and owner.attr == "server"
                ):
                    calls.add(node.attr)
    assert calls == {"model_config", "repository_index", "infer_stream", "ready", "options"}  # options: timeouts
    assert calls <= SERVER_API
    guide = GUIDE.read_text(encoding="utf-8")
    for name in sorted(SERVER_API):
        assert f"`server.{name}" in guide, f"docs/endpoint_plugins.md does not document server.{name}"
        assert callable(getattr(ServerAPI, name)) or isinstance(getattr(ServerAPI, name), property), name
