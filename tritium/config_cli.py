"""``tritium-config``: where the native-backend SDK lives, for build commands.

``tritium-config --include`` prints the folder holding
``triton/core/tritonbackend.h`` and ``triton/core/tritonserver.h``, so a
backend builds with one line::

    gcc -shared -fPIC -O2 -I"$(tritium-config --include)" my_backend.c -o libtriton_my_backend.so

``--build-shim`` compiles tritium's side of the C API now (workers otherwise
build it on first use) and prints the module's path; run it after install
where workers must not compile (read-only home, no compiler at run time).
Also ``python -m tritium.config_cli``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Print what was asked for, one item per line; 0 on success, 1 when the shim cannot be built."""
    parser = argparse.ArgumentParser(prog="tritium-config", description=__doc__.split("\n\n")[0])
    parser.add_argument("--include", action="store_true", help="the C include folder (for -I)")
    parser.add_argument("--cflags", action="store_true", help="compiler flags: -I<include folder>")
    parser.add_argument("--backend-directory", action="store_true", help="the global backend directory")
    parser.add_argument("--build-shim", action="store_true", help="build the native-backend shim now")
    parser.add_argument("--version", action="store_true", help="tritium and backend API versions")
    args = parser.parse_args(argv)
    from .core.backend.native.build import INCLUDE_DIR

    if not any(vars(args).values()):
        parser.print_help()
        return 2
    if args.include:
        print(INCLUDE_DIR)
    if args.cflags:
        print(f"-I{INCLUDE_DIR}")
    if args.backend_directory:
        import tritium.backends

        print(tritium.backends.__path__[0])
    if args.version:
        from . import __version__

        print(f"tritium {__version__}, TRITONBACKEND API 1.19, TRITONSERVER API 1.34")
    if args.build_shim:
        from .core.backend.native.build import build_shim
        from .core.errors import TritonError

        try:
            print(build_shim())
        except TritonError as exc:
            print(f"tritium-config: {exc.message}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
