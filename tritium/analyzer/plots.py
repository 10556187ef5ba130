"""The report's two plots (matplotlib, PNG): throughput against p99 latency, and CPU per inference.

Point labels (``c<concurrency>``) are placed so that none overlaps another:
a label that would sit on an earlier one moves up, with a thin line back to
its point, and a label already shown at the same spot (the same concurrency
of another configuration, measured alike) is not repeated.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..perf import Measurement
from .run import Result

__all__ = ["LABELS", "place_labels", "throughput_plot", "cpu_plot"]

#: what a configuration's label says (the report and docs/analyzer.md show it)
LABELS = (
    "i<N>: N model instances (instance_group count); dyn b<B>: the dynamic batcher on, max_batch_size B; "
    "pref<P>: preferred_batch_size P; <D>us: max_queue_delay_microseconds D; no 'dyn': the dynamic batcher off; "
    "c<N> (plot labels): N concurrent client requests (perf_analyzer's concurrency)"
)

_STEP_PT = 11.0  # how far (points) a label moves up to clear another
_MAX_STEPS = 12  # past that the label is left out (the point and the report's table remain)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def place_labels(ax: Any, points: Sequence[tuple[float, float, str]], fontsize: float = 8) -> list[Any]:
    """Annotate ``(x, y, text)`` points in data coordinates so that no two labels overlap.

    Call once the axes' limits and the figure's layout are final (the placement is in display space).
    :returns: the annotations drawn (a label repeated at the same spot is skipped, and so is one
        that found no free place within 12 steps up).
    """
    from matplotlib.text import Text

    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    placed: list[tuple[str, Any, tuple[float, float]]] = []
    out = []
    for x, y, text in points:
        anchor = tuple(ax.transData.transform((x, y)))
        for step in range(_MAX_STEPS + 1):
            label = ax.annotate(
                text,
                (x, y),
                fontsize=fontsize,
                textcoords="offset points",
                xytext=(4, 3 + step * _STEP_PT),
                arrowprops={"arrowstyle": "-", "linewidth": 0.5, "color": "0.5"} if step else None,
            )
            label.update_positions(renderer)
            box = Text.get_window_extent(label, renderer)  # the text alone, not the line to its point
            clash = [(t, b, a) for t, b, a in placed if box.overlaps(b)]
            if not clash:
                placed.append((text, box, anchor))
                out.append(label)
                break
            label.remove()
            same_spot = any(
                t == text and abs(a[0] - anchor[0]) < 10 and abs(a[1] - anchor[1]) < 10 for t, _, a in clash
            )
            if step == 0 and same_spot:
                break  # the label there already says it
    return out


def throughput_plot(
    results: Sequence[Result], best: Result | None, p99_ms: float | None, min_throughput: float | None, path: Path
) -> None:
    """Throughput (infer/s) against p99 latency (ms), one line per configuration over its concurrencies."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=100)
    labelled: list[tuple[float, float, str]] = []
    for r in results:
        xs, ys = [p.p99_us / 1000 for p in r.points], [p.throughput for p in r.points]
        is_best = r is best
        ax.plot(
            xs,
            ys,
            marker="o",
            linewidth=2.5 if is_best else 1.0,
            label=r.candidate.label + (" (best)" if is_best else ""),
        )
        labelled += [(x, y, f"c{p.concurrency}") for x, y, p in zip(xs, ys, r.points, strict=True)]
    if p99_ms is not None:
        ax.axvline(p99_ms, color="red", linestyle="--", linewidth=1, label="p99 budget")
    if min_throughput is not None:
        ax.axhline(min_throughput, color="gray", linestyle=":", linewidth=1, label="min throughput")
    ax.set_xlabel("p99 latency (ms)", fontsize=10)
    ax.set_ylabel("throughput (infer/s)", fontsize=10)
    ax.set_title("throughput against p99 latency (point labels: c<N> = N concurrent requests)", fontsize=11)
    ax.tick_params(labelsize=9)
    ax.grid(True, alpha=0.3)
    ax.margins(x=0.08, y=0.12)
    ax.legend(fontsize=8, loc="best", title="configuration (i<N> = N instances)", title_fontsize=8)
    fig.tight_layout()
    place_labels(ax, labelled)
    fig.savefig(path)
    plt.close(fig)


def cpu_plot(rows: Sequence[tuple[str, Measurement]], path: Path) -> None:
    """Horizontal bars: server-process and model-instance CPU per inference (µs) of each configuration
    at the point given with it (its best concurrency)."""
    plt = _pyplot()
    names = [f"{label} at c{point.concurrency}" for label, point in rows]
    core = [point.server_cpu_us for _, point in rows]
    workers = [point.worker_cpu_us for _, point in rows]
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.45 * len(rows)), dpi=100)
    ticks = range(len(rows))
    ax.barh(ticks, core, label="server (core) process")
    ax.barh(ticks, workers, left=core, label="model instances (workers)")
    ax.set_yticks(list(ticks), names, fontsize=9)
    ax.invert_yaxis()  # the first configuration on top, as in the table
    ax.set_xlabel("CPU time per inference (µs)", fontsize=10)
    ax.set_ylabel("configuration at its best concurrency", fontsize=10)
    ax.set_title("server CPU per inference", fontsize=11, loc="right")
    ax.tick_params(axis="x", labelsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=2, frameon=False)  # above the bars
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
