"""``tritium-perf``: Triton's ``perf_analyzer`` with the libraries it links against found.

    tritium-perf -m add_sub -u 127.0.0.1:8000
    tritium-perf -m add_sub -u 127.0.0.1:8001 -i grpc --concurrency-range 1:4

Every argument goes to ``perf_analyzer`` unchanged. The binary ships inside
``tritonclient==2.51.0``'s wheel and links against ``libcudart.so.12`` even
on a CPU-only machine, which is not on the default library path:
``tritium-perf`` puts ``nvidia-cuda-runtime-cu12``'s ``lib/`` folder in
front of ``LD_LIBRARY_PATH`` and replaces itself with ``perf_analyzer``
(exec: its exit status, output and signals are perf_analyzer's). Finding the
binary and the libraries is :func:`tritium.perf.perf_analyzer_command`'s,
which ``tritium-analyzer`` uses too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .perf import PerfAnalyzerError, perf_analyzer_command

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tritium-perf``: exec ``perf_analyzer`` with ``argv`` (default ``sys.argv[1:]``).

    Does not return when perf_analyzer starts. Returns 2 (the message on stderr naming what to
    install) when the binary, ``libb64.so.0d`` or ``libcudart.so.12`` is missing, 127 when the
    binary cannot be executed.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        cmd, env = perf_analyzer_command()
    except PerfAnalyzerError as exc:
        print(f"tritium-perf: error: {exc}", file=sys.stderr)
        return 2
    try:
        os.execve(cmd[0], [*cmd, *args], env)
    except OSError as exc:
        print(f"tritium-perf: error: cannot run {cmd[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached: execve replaced this process


if __name__ == "__main__":
    sys.exit(main())
