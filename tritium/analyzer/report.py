"""Choosing the best configuration under constraints, and the report: HTML, PNG plots, the best config.pbtxt.

Constraints follow Model Analyzer's: a p99 latency budget and a minimum
throughput. A measurement point (candidate, concurrency) meets them or not;
the best candidate is the one with the highest throughput at a point that
meets them (ties: lower p99, then fewer instances). The report folder:

- ``report.html``: the constraints, the best configuration, the plots, every measurement;
- ``throughput_vs_p99.png``: throughput against p99 latency, one line per candidate over its concurrencies;
- ``cpu_per_inference.png``: server and model-instance CPU per inference at each candidate's best point
  (both drawn by :mod:`.plots`);
- ``best/config.pbtxt``: the best candidate's config, an edit of the model's own file (see :mod:`.config_edit`);
- ``results.json``: every number.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ..perf import Measurement
from .plots import LABELS, cpu_plot, throughput_plot
from .run import Result

__all__ = ["Constraints", "Choice", "choose", "write_report"]


@dataclass(frozen=True, slots=True)
class Constraints:
    """:ivar p99_ms: p99 latency budget, milliseconds (None: none). :ivar min_throughput: inferences/s."""

    p99_ms: float | None = None
    min_throughput: float | None = None

    def met(self, point: Measurement) -> bool:
        """Whether ``point`` meets every constraint."""
        if self.p99_ms is not None and point.p99_us > self.p99_ms * 1000:
            return False
        return self.min_throughput is None or point.throughput >= self.min_throughput

    def describe(self) -> str:
        parts = []
        if self.p99_ms is not None:
            parts.append(f"p99 latency <= {self.p99_ms:g} ms")
        if self.min_throughput is not None:
            parts.append(f"throughput >= {self.min_throughput:g} infer/s")
        return ", ".join(parts) or "none"


@dataclass(slots=True)
class Choice:
    """The best result and its best point; ``met`` False when nothing met the constraints (then: the fastest)."""

    result: Result
    point: Measurement
    met: bool


def _best_point(result: Result, constraints: Constraints, only_met: bool) -> Measurement | None:
    points = [p for p in result.points if constraints.met(p) or not only_met]
    return max(points, key=lambda p: (p.throughput, -p.p99_us), default=None)


def choose(results: Sequence[Result], constraints: Constraints) -> Choice | None:
    """The best candidate under ``constraints`` (None when nothing was measured)."""
    for only_met in (True, False):
        scored = [(r, p) for r in results if (p := _best_point(r, constraints, only_met)) is not None]
        if scored:
            result, point = max(scored, key=lambda rp: (rp[1].throughput, -rp[1].p99_us, -rp[0].candidate.instances))
            return Choice(result, point, only_met)
    return None


def _plots(results: Sequence[Result], choice: Choice | None, constraints: Constraints, out: Path) -> list[str]:
    measured = [r for r in results if r.points]
    throughput_plot(
        measured,
        choice.result if choice is not None else None,
        constraints.p99_ms,
        constraints.min_throughput,
        out / "throughput_vs_p99.png",
    )
    rows = []
    for r in measured:
        point = _best_point(r, constraints, True) or _best_point(r, constraints, False)
        assert point is not None
        rows.append((r.candidate.label, point))
    cpu_plot(rows, out / "cpu_per_inference.png")
    return ["throughput_vs_p99.png", "cpu_per_inference.png"]


def _row(r: Result, p: Measurement, constraints: Constraints, best: bool) -> str:
    cells = [
        r.candidate.label,
        str(p.concurrency),
        f"{p.throughput:,.1f}",
        f"{p.p50_us / 1000:.2f}",
        f"{p.p99_us / 1000:.2f}",
        f"{p.server_cpu_us:,.0f}",
        f"{p.worker_cpu_us:,.0f}",
        f"{p.client_cpu_us:,.0f}",
        "yes" if constraints.met(p) else "no",
    ]
    style = ' style="font-weight:bold;background:#e8f4e8"' if best else ""
    return f"<tr{style}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"


def write_report(
    out: Path, model: str, mode: str, results: Sequence[Result], constraints: Constraints, notes: Sequence[str] = ()
) -> Choice | None:
    """Write the report folder ``out``; return the choice (None when nothing could be measured)."""
    out.mkdir(parents=True, exist_ok=True)
    choice = choose(results, constraints)
    plots = _plots(results, choice, constraints, out) if any(r.points for r in results) else []
    if choice is not None:
        (out / "best").mkdir(exist_ok=True)
        (out / "best" / "config.pbtxt").write_text(choice.result.config)
    (out / "results.json").write_text(
        json.dumps(
            {
                "model": model,
                "mode": mode,
                "constraints": asdict(constraints),
                "best": None
                if choice is None
                else {
                    "candidate": asdict(choice.result.candidate),
                    "concurrency": choice.point.concurrency,
                    "met": choice.met,
                },
                "results": [
                    {
                        "candidate": asdict(r.candidate),
                        "label": r.candidate.label,
                        "error": r.error,
                        "points": [asdict(p) for p in r.points],
                    }
                    for r in results
                ],
            },
            indent=2,
        )
    )
    if choice is None:
        verdict = "<p><b>Nothing could be measured.</b></p>"
    else:
        p = choice.point
        verdict = (
            f"<p>{'Best configuration' if choice.met else '<b>No configuration meets the constraints</b>; the fastest'}: "
            f"<b>{html.escape(choice.result.candidate.label)}</b> at concurrency {p.concurrency}: "
            f"{p.throughput:,.1f} infer/s, p99 {p.p99_us / 1000:.2f} ms, server CPU "
            f"{p.server_cpu_us + p.worker_cpu_us:,.0f} µs per inference.</p>"
            f"<h2>Its config.pbtxt</h2><pre>{html.escape(choice.result.config)}</pre>"
        )
    rows = [
        _row(r, p, constraints, choice is not None and r is choice.result and p is choice.point)
        for r in results
        for p in r.points
    ]
    failed = [
        f"<li>{html.escape(r.candidate.label)}: <pre>{html.escape(r.error)}</pre></li>" for r in results if r.error
    ]
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>tritium-analyzer: {html.escape(model)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}pre{{background:#f6f6f6;padding:8px}}</style></head>
<body><h1>tritium-analyzer: {html.escape(model)}</h1>
<p>Mode: {html.escape(mode)}. Constraints: {html.escape(constraints.describe())}.
{len(results)} configurations, {len(rows)} measurements (perf_analyzer, gRPC).</p>
{"".join(f"<p>{html.escape(n)}</p>" for n in notes)}
<p>Configuration names: {html.escape(LABELS)}.</p>
{verdict}
{"".join(f'<p><img src="{name}" alt="{name}"></p>' for name in plots)}
<h2>Every measurement</h2>
<table><tr><th>configuration</th><th>concurrency</th><th>infer/s</th><th>p50 ms</th><th>p99 ms</th>
<th>server µs/inf</th><th>instances µs/inf</th><th>client µs/inf</th><th>meets constraints</th></tr>
{"".join(rows)}</table>
{"<h2>Not measured</h2><ul>" + "".join(failed) + "</ul>" if failed else ""}
</body></html>
"""
    (out / "report.html").write_text(page)
    return choice
