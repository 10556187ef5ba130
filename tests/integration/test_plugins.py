"""Endpoint plugins: a third-party frontend enabled in plugins.toml, without touching tritium's code."""

from __future__ import annotations

import textwrap
import urllib.request

from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess, free_port

HELLO_FRONTEND = '''
"""A third-party endpoint: answers GET /hello with the names of the loaded models."""
from aiohttp import web
from tritium.core.hookspecs import hookimpl


class Hello:
    name = "hello"

    def __init__(self, server, port):
        self.server, self.port, self.runner = server, port, None

    async def handle(self, request):
        names = sorted(m.name for m in self.server.repository.lookups.loaded_models())
        return web.json_response({"models": names, "ready": self.server.ready})

    async def start(self):
        app = web.Application()
        app.router.add_get("/hello", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self, grace):
        await self.runner.cleanup()


@hookimpl
def tritium_frontend(name, server, settings):
    return Hello(server, int(settings["port"])) if name == "hello" else None
'''


def test_a_third_party_frontend_from_plugins_toml(tmp_path):
    plugin_dir = tmp_path / "plugins"
    plugin_dir.mkdir()
    (plugin_dir / "hello_frontend.py").write_text(HELLO_FRONTEND)
    port = free_port()
    plugins_toml = tmp_path / "plugins.toml"
    plugins_toml.write_text(
        textwrap.dedent(f"""
        [frontends.http]
        enabled = true
        [frontends.grpc]
        enabled = false
        [frontends.hello]
        module = "hello_frontend"
        port = {port}
    """)
    )
    repo = tmp_path / "repo"
    add_model(repo, "m", identity_config())
    env = {"TRITIUM_PLUGINS": str(plugins_toml), "PYTHONPATH": str(plugin_dir)}
    with ServerProcess([repo], ["--allow-metrics=false"], log_path=tmp_path / "s.log", env=env) as server:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/hello", timeout=10) as resp:
            assert resp.read() == b'{"models": ["m"], "ready": true}'
        assert "Started GRPCInferenceService" not in server.log()  # disabled in this plugins.toml


def test_an_enabled_frontend_that_no_package_provides_is_an_error(tmp_path):
    plugins_toml = tmp_path / "plugins.toml"
    plugins_toml.write_text("[frontends.nope]\nenabled = true\n")
    repo = tmp_path / "repo"
    add_model(repo, "m", identity_config())
    server = ServerProcess([repo], log_path=tmp_path / "s.log", env={"TRITIUM_PLUGINS": str(plugins_toml)})
    server.start(wait_ready=False)
    assert server.wait_exit(120) == 1
    assert "frontend 'nope' is enabled in plugins.toml but no installed package provides it" in server.log()
    server.stop()
