"""``tritium-analyzer``: search a model's configuration space with perf_analyzer and write a report.

    tritium-analyzer --model-repository=models --model add_sub --quick --output report/
    tritium-analyzer --model-repository=models --model efficientnet_lite0_onnx \\
        --latency-budget-ms 100 --min-throughput 20 --output report/

For each candidate configuration (instance count; for a batching model the
dynamic batcher, ``max_batch_size``, preferred batch sizes and queue delay)
it starts a ``tritium-server`` on a copy of the model, sweeps the client
concurrency with perf_analyzer (gRPC), and records throughput, latency and
the server's CPU per inference. ``--quick`` measures a handful of
candidates with short windows (CI); the default full search measures more
and longer. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ..core.errors import TritonError
from ..core.observability.progress import Progress
from ..perf import PerfAnalyzerError, perf_analyzer_command
from .report import Constraints, write_report
from .run import Result, measure_candidate
from .space import FULL, QUICK, Space, base_config, candidates

log = logging.getLogger("tritium.analyzer")

__all__ = ["main", "build_parser"]


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 0, got '{text}'")
    return values


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[no-untyped-def]
        self.exit(2, f"{self.prog}: error: {message}\nRun '{self.prog} --help' for the flags.\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = _Parser(prog="tritium-analyzer", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--model-repository", required=True, type=Path, metavar="PATH", help="the model repository")
    p.add_argument("--model", required=True, metavar="NAME", help="the model to search configurations for")
    p.add_argument(
        "--output",
        type=Path,
        default=Path("analyzer_report"),
        metavar="DIR",
        help="report folder (default: analyzer_report)",
    )
    p.add_argument("--quick", action="store_true", help="a few candidates, short measurements (CI)")
    p.add_argument("--latency-budget-ms", type=float, metavar="MS", help="p99 latency budget (constraint)")
    p.add_argument("--min-throughput", type=float, metavar="INFER_PER_S", help="minimum throughput (constraint)")
    p.add_argument("--instances", type=_ints, metavar="N,N", help="instance counts to try")
    p.add_argument(
        "--max-batch-sizes",
        type=_ints,
        metavar="N,N",
        help="max_batch_size values to try (batching models; at most the config's own)",
    )
    p.add_argument("--queue-delays-us", type=_ints, metavar="US,US", help="dynamic batcher queue delays to try")
    p.add_argument("--concurrency", type=_ints, metavar="N,N", help="client concurrencies to sweep")
    p.add_argument("--measurement-ms", type=int, metavar="MS", help="perf_analyzer measurement window")
    p.add_argument("--protocol", choices=["grpc", "http"], default="grpc", help="perf_analyzer's protocol")
    p.add_argument(
        "--perf-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra perf_analyzer flag, e.g. --perf-arg=--shape=INPUT0:4 (repeatable)",
    )
    p.add_argument(
        "--server-arg", action="append", default=[], metavar="ARG", help="an extra tritium-server flag (repeatable)"
    )
    return p


def _space(args: argparse.Namespace) -> Space:
    base = QUICK if args.quick else FULL
    return Space(
        instances=tuple(n for n in (args.instances or base.instances) if n > 0),
        max_batch_sizes=args.max_batch_sizes or base.max_batch_sizes,
        queue_delays_us=args.queue_delays_us or base.queue_delays_us,
        preferred=base.preferred,
        concurrency=tuple(n for n in (args.concurrency or base.concurrency) if n > 0),
        measurement_ms=args.measurement_ms or base.measurement_ms,
        halve_batch=base.halve_batch,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tritium-analyzer``. Exit status: 0 a configuration met the constraints,
    1 none did (the report says so), 2 bad arguments or nothing could be measured."""
    from ..core.observability.logging import configure_logging

    args = build_parser().parse_args(argv)
    configure_logging()
    repository = args.model_repository.resolve()
    if not (repository / args.model).is_dir():
        print(f"tritium-analyzer: error: model '{args.model}' is not in {repository}", file=sys.stderr)
        return 2
    try:
        perf_analyzer_command()
        config = base_config(repository / args.model)
    except PerfAnalyzerError as exc:
        print(f"tritium-analyzer: error: {exc}", file=sys.stderr)
        return 2
    except TritonError as exc:
        print(f"tritium-analyzer: error: {exc.message}", file=sys.stderr)
        return 2
    space = _space(args)
    found = candidates(config, space)
    constraints = Constraints(args.latency_budget_ms, args.min_throughput)
    mode = "quick" if args.quick else "full"
    perf_args = [
        "--measurement-interval",
        str(space.measurement_ms),
        "--stability-percentage",
        "10000",
        "--max-trials",
        "3",
        *args.perf_arg,
    ]
    log.info(
        "searching %d configurations of '%s' x concurrency %s (%s mode)",
        len(found),
        args.model,
        ",".join(map(str, space.concurrency)),
        mode,
    )
    progress = Progress(log, f"measuring '{args.model}'", len(found) * len(space.concurrency), unit="runs")
    results: list[Result] = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tritium-analyzer-") as work:
        for i, candidate in enumerate(found):
            try:
                result = measure_candidate(
                    repository,
                    args.model,
                    candidate,
                    Path(work) / f"{i:02d}_{candidate.slug}",
                    space.concurrency,
                    perf_args,
                    args.protocol,
                    args.server_arg,
                    on_point=lambda _p: progress.update(1),
                    run_timeout_s=space.run_timeout_s,
                )
            except PerfAnalyzerError as exc:
                print(f"tritium-analyzer: error: {exc}", file=sys.stderr)
                return 2
            if result.error:
                log.warning("%s: not measured: %s", candidate.label, result.error.splitlines()[0])
            results.append(result)
    progress.close()
    notes = [
        f"Measured in {time.monotonic() - start:.0f} s with perf_analyzer on the same machine as the server "
        "(its CPU is part of every number)."
    ]
    choice = write_report(args.output, args.model, mode, results, constraints, notes)
    if choice is None:
        print(f"tritium-analyzer: nothing could be measured; see {args.output / 'report.html'}", file=sys.stderr)
        return 2
    p = choice.point
    print(
        f"{'best' if choice.met else 'no configuration meets the constraints; fastest'}: "
        f"{choice.result.candidate.label} at concurrency {p.concurrency}: {p.throughput:,.1f} infer/s, "
        f"p99 {p.p99_us / 1000:.2f} ms"
    )
    print(f"report: {args.output / 'report.html'}; config: {args.output / 'best' / 'config.pbtxt'}")
    return 0 if choice.met else 1


if __name__ == "__main__":
    sys.exit(main())
