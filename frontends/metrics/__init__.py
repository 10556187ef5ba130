"""The metrics endpoint: Prometheus text on ``--metrics-port`` (default 8002), path ``/metrics``.

Per-model counters under Triton's names, units and labels
(``nv_inference_request_success{model="m",version="1"}``, ...), computed at
scrape time from the same :class:`~tritium.core.observability.stats.ModelStats` objects the
statistics extension reports, so the two never disagree. Plus tritium's own
gauges of shared-memory arena use and instance restarts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ...core.api import hookimpl
from .collector import TritiumCollector, render
from .system import SystemSampler

if TYPE_CHECKING:  # pragma: no cover
    from ...core.api import ServerAPI

log = logging.getLogger("tritium.metrics")

__all__ = ["MetricsFrontend", "tritium_frontend"]


class MetricsFrontend:
    """aiohttp server answering ``GET /metrics``."""

    name = "metrics"

    def __init__(self, server: ServerAPI, address: str, port: int) -> None:
        self.server = server
        self.address = address
        self.port = port
        options = server.options
        self.system = SystemSampler(options.metrics_interval_ms, options.cpu_metrics, options.gpu_metrics)
        self.collector = TritiumCollector(server, self.system, server.metrics_config["counter_latencies"])
        self._runner: web.AppRunner | None = None

    async def _metrics(self, request: web.Request) -> web.Response:
        del request
        return web.Response(body=render(self.collector.collect()), content_type="text/plain", charset="utf-8")

    async def start(self) -> None:
        """Bind and serve."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/metrics/", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.address, self.port, reuse_address=True)
        await site.start()
        self.system.start()
        log.info("Started Metrics Service at %s:%d", self.address, self.port)

    async def stop(self, grace: float) -> None:
        """Stop serving."""
        del grace
        self.system.stop()
        if self._runner is not None:
            await self._runner.cleanup()


@hookimpl
def tritium_frontend(name: str, server: ServerAPI, settings: Mapping[str, Any]) -> MetricsFrontend | None:
    """Create the metrics frontend (plugin hook)."""
    del settings
    if name != "metrics":
        return None
    return MetricsFrontend(server, server.options.metrics_address, server.options.metrics_port)
