"""Whether Triton's perf_analyzer can run here, for skipping the tests that drive it."""

from __future__ import annotations

__all__ = ["perf_analyzer_missing"]


def perf_analyzer_missing() -> str:
    """Why perf_analyzer cannot run here: ``tritium.perf``'s message naming what to install
    (``""`` when it can)."""
    from tritium.perf import PerfAnalyzerError, perf_analyzer_command

    try:
        perf_analyzer_command()
    except PerfAnalyzerError as exc:
        return str(exc)
    return ""
