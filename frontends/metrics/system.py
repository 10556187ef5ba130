"""CPU and GPU metrics, sampled every ``--metrics-interval-ms`` (Triton's ``nv_cpu_*`` and ``nv_gpu_*``).

CPU: ``nv_cpu_utilization`` (0.0-1.0, the share of non-idle time of all cores over the
last interval, from ``/proc/stat``), ``nv_cpu_memory_total_bytes`` and
``nv_cpu_memory_used_bytes`` (``/proc/meminfo``: total minus available), as Triton
computes them. GPU, through NVML (``nvidia-ml-py``, the ``gpu-metrics`` extra), one
sample per GPU labelled ``gpu_uuid``: ``nv_gpu_utilization`` (0.0-1.0),
``nv_gpu_memory_total_bytes``, ``nv_gpu_memory_used_bytes``, ``nv_gpu_power_usage``
and ``nv_gpu_power_limit`` (watts) and ``nv_energy_consumption`` (joules since the
server started). Without NVML or a GPU the GPU families are absent and one line says
why. Sampling runs on the core's event loop (two small /proc reads and, with GPUs, a few
NVML calls per interval).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from prometheus_client.core import Metric

log = logging.getLogger("tritium.metrics")

__all__ = ["SystemSampler", "read_cpu_times", "read_memory"]


def read_cpu_times(path: str = "/proc/stat") -> tuple[int, int] | None:
    """``(busy, total)`` jiffies of all cores (None where /proc is not there)."""
    try:
        with open(path, "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != b"cpu":
        return None
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = values[3] + values[4]
    total = sum(values)
    return total - idle, total


def read_memory(path: str = "/proc/meminfo") -> tuple[int, int] | None:
    """``(total, used)`` bytes of RAM: used = MemTotal - MemAvailable (None where /proc is not there)."""
    info: dict[bytes, int] = {}
    try:
        with open(path, "rb") as f:
            for line in f:
                key, _, rest = line.partition(b":")
                if key in (b"MemTotal", b"MemAvailable"):
                    info[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if b"MemTotal" not in info or b"MemAvailable" not in info:
        return None
    return info[b"MemTotal"], info[b"MemTotal"] - info[b"MemAvailable"]


class _Gpus:
    """The GPUs NVML sees (raises at construction when there is none)."""

    def __init__(self) -> None:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        self.nvml = pynvml
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            pynvml.nvmlShutdown()
            raise RuntimeError("NVML reports no GPU")
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self.uuids = [self._text(pynvml.nvmlDeviceGetUUID(h)) for h in self.handles]
        self.start_energy = [self._energy(h) for h in self.handles]

    @staticmethod
    def _text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    def _energy(self, handle: Any) -> float | None:
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle)) / 1000.0  # mJ -> J
        except self.nvml.NVMLError:
            return None

    def sample(self) -> list[dict[str, float]]:
        out = []
        nvml = self.nvml
        for handle, start in zip(self.handles, self.start_energy):
            values: dict[str, float] = {}
            try:
                values["nv_gpu_utilization"] = nvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100.0
            except nvml.NVMLError:
                pass
            try:
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                values["nv_gpu_memory_total_bytes"] = float(memory.total)
                values["nv_gpu_memory_used_bytes"] = float(memory.used)
            except nvml.NVMLError:
                pass
            try:
                values["nv_gpu_power_usage"] = nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0  # mW -> W
                values["nv_gpu_power_limit"] = nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
            except nvml.NVMLError:
                pass
            energy = self._energy(handle)
            if energy is not None and start is not None:
                values["nv_energy_consumption"] = energy - start
            out.append(values)
        return out

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:  # shutting down: nothing to do about it
            pass


_GPU_HELP = {
    "nv_gpu_utilization": "GPU utilization rate [0.0 - 1.0)",
    "nv_gpu_memory_total_bytes": "GPU total memory, in bytes",
    "nv_gpu_memory_used_bytes": "GPU used memory, in bytes",
    "nv_gpu_power_usage": "GPU power usage in watts",
    "nv_gpu_power_limit": "GPU power management limit in watts",
    "nv_energy_consumption": "GPU energy consumption in joules since the Triton Server started",
}


class SystemSampler:
    """Samples CPU (and GPU) metrics every ``interval_ms``; :meth:`families` gives the last sample.

    :param interval_ms: ``--metrics-interval-ms``.
    :param cpu: ``--allow-cpu-metrics``.
    :param gpu: ``--allow-gpu-metrics``.
    """

    def __init__(self, interval_ms: int, cpu: bool = True, gpu: bool = True) -> None:
        self.interval_s = interval_ms / 1000.0
        self.cpu = cpu
        self._last_cpu = read_cpu_times() if cpu else None
        self.cpu_utilization = 0.0
        self.memory = read_memory() if cpu else None
        self.gpus: _Gpus | None = None
        self.gpu_values: list[dict[str, float]] = []
        if gpu:
            try:
                self.gpus = _Gpus()
                log.info("Collecting metrics for GPU %s", ", ".join(self.gpus.uuids))
            except Exception as exc:  # no nvidia-ml-py, no driver, no GPU: one line, no GPU metrics
                log.info("GPU metrics unavailable: %s", exc)
        if cpu:
            log.info("Collecting CPU metrics")
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        """Take one sample (on the event loop)."""
        if self.cpu:
            now = read_cpu_times()
            if now is not None and self._last_cpu is not None and now[1] > self._last_cpu[1]:
                busy = now[0] - self._last_cpu[0]
                self.cpu_utilization = min(1.0, max(0.0, busy / (now[1] - self._last_cpu[1])))
            self._last_cpu = now
            self.memory = read_memory()
        if self.gpus is not None:
            self.gpu_values = self.gpus.sample()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                self.sample()
            except Exception as exc:  # a sampling failure must not stop the metrics endpoint
                log.warning("sampling system metrics failed: %s", exc)

    def start(self) -> None:
        """Sample now and then every interval."""
        self.sample()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        """Stop sampling; release NVML."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self.gpus is not None:
            self.gpus.close()
            self.gpus = None

    def families(self) -> list[Metric]:
        """The last sample's metric families."""
        out: list[Metric] = []
        if self.cpu:
            utilization = Metric("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", "gauge")
            utilization.add_sample("nv_cpu_utilization", {}, self.cpu_utilization)
            out.append(utilization)
            if self.memory is not None:
                total = Metric("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", "gauge")
                total.add_sample(total.name, {}, self.memory[0])
                used = Metric("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", "gauge")
                used.add_sample(used.name, {}, self.memory[1])
                out += [total, used]
        if self.gpus is not None and self.gpu_values:
            for name, doc in _GPU_HELP.items():
                family = Metric(name, doc, "counter" if name == "nv_energy_consumption" else "gauge")
                for uuid, values in zip(self.gpus.uuids, self.gpu_values):
                    if name in values:
                        family.add_sample(name, {"gpu_uuid": uuid}, values[name])
                if family.samples:
                    out.append(family)
        return out
