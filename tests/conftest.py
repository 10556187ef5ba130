"""Shared fixtures: a factory of tritium-server subprocesses, stopped at the end of each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.server import ServerProcess


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """``start_server([repo], args=[...], wait=True, env={...})`` -> a running :class:`ServerProcess`
    (``env``: variables set for it besides this process's)."""
    servers: list[ServerProcess] = []

    def start(
        repositories: Sequence[str | Path],
        args: Sequence[str] = (),
        wait: bool = True,
        env: dict[str, str] | None = None,
    ) -> ServerProcess:
        server = ServerProcess(repositories, args, log_path=tmp_path / f"server-{len(servers)}.log", env=env)
        servers.append(server)
        return server.start(wait_ready=wait)

    yield start
    for server in servers:
        server.stop()
