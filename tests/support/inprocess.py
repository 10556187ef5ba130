"""A tritium server in this process (its event loop in a thread), for tests that inject a dependency."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from tests.support.server import free_port
from tritium.core import InferenceServer, ServerOptions

__all__ = ["InProcessServer"]


class InProcessServer:
    """A tritium server with HTTP and gRPC on loopback, its event loop in a thread.

    :param repo: the model repository.
    :param runtime: the CUDA runtime it uses (e.g. :class:`tests.support.fake_cuda.FakeCudaRuntime`).
    """

    def __init__(self, repo: Path, runtime: Any) -> None:
        self.http_port, self.grpc_port = free_port(), free_port()
        options = ServerOptions(
            model_repositories=[str(repo)],
            http_address="127.0.0.1",
            http_port=self.http_port,
            grpc_address="127.0.0.1",
            grpc_port=self.grpc_port,
            metrics=False,
        )
        self.server = InferenceServer(options, cuda_runtime=runtime)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(120)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()  # its self-pipe sockets
