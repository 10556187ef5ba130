"""Shared fixtures: a factory of tritium-server subprocesses, stopped at the end of each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.server import ServerProcess


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """``start_server([repo], args=[...], wait=True)`` -> a running :class:`ServerProcess`."""
    servers: list[ServerProcess] = []

    def start(repositories: Sequence[str | Path], args: Sequence[str] = (), wait: bool = True) -> ServerProcess:
        server = ServerProcess(repositories, args, log_path=tmp_path / f"server-{len(servers)}.log")
        servers.append(server)
        return server.start(wait_ready=wait)

    yield start
    for server in servers:
        server.stop()
