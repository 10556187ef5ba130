#!/usr/bin/env python3
"""Regenerate tritium's protobuf / gRPC Python modules from the .proto sources.

Usage (from the repository root, with the project's virtual environment)::

    python proto/codegen.py            # regenerate proto/*_pb2*.py and .pyi in place
    python proto/codegen.py --check    # exit 1, listing stale files, if proto/ is out of date

Run it after editing any ``proto/*.proto`` file and commit the generated files with the
sources (a unit test runs ``--check``). It uses ``grpc_tools.protoc`` (grpcio-tools),
so the protoc version is the one pinned by grpcio-tools; regenerating with a different
grpcio-tools version may change the output.

protoc generates sibling imports (``import model_config_pb2 as model__config__pb2``)
that only work when proto/ itself is on ``sys.path``. This script rewrites them to
package imports (``from tritium.proto import model_config_pb2 as model__config__pb2``)
and names the package module in the descriptor builder call, so generated classes get
``__module__ == "tritium.proto.<name>_pb2"`` (pickling and reprs work).

The output is deterministic: running the script twice gives byte-identical files.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PACKAGE = "tritium.proto"

# .proto sources, and those that declare a service (they also get a *_pb2_grpc.py).
SOURCES = ("model_config.proto", "grpc_service.proto", "health.proto")
SERVICE_SOURCES = ("grpc_service.proto", "health.proto")

HEADER = "# Regenerate with `python proto/codegen.py`; do not edit by hand.\n"


def _module_names() -> list[str]:
    return [Path(src).stem + "_pb2" for src in SOURCES]


def expected_files() -> list[str]:
    """Names (relative to proto/) of every file the generator produces."""
    names = []
    for src in SOURCES:
        stem = Path(src).stem
        names += [f"{stem}_pb2.py", f"{stem}_pb2.pyi"]
        if src in SERVICE_SOURCES:
            names.append(f"{stem}_pb2_grpc.py")
    return sorted(names)


def _run_protoc(out_dir: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"--proto_path={PROTO_DIR}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *SOURCES,
    ]
    # cwd=PROTO_DIR with relative source names keeps the descriptors' file names
    # ("model_config.proto", ...) identical to Triton's.
    proc = subprocess.run(cmd, cwd=PROTO_DIR, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"protoc failed ({proc.returncode}):\n{proc.stderr}")
    # grpc_tools writes a *_pb2_grpc.py for every source; drop the empty ones.
    for src in SOURCES:
        if src not in SERVICE_SOURCES:
            (out_dir / f"{Path(src).stem}_pb2_grpc.py").unlink(missing_ok=True)


def _postprocess(text: str, filename: str) -> str:
    modules = "|".join(re.escape(m) for m in _module_names())
    # `import foo_pb2 as alias` -> `from tritium.proto import foo_pb2 as alias`
    text = re.sub(
        rf"^import ({modules}) as (\w+)$",
        rf"from {PACKAGE} import \1 as \2",
        text,
        flags=re.MULTILINE,
    )
    # Module name given to the descriptor builder -> the real, dotted module name.
    text = re.sub(
        rf"(_builder\.BuildTopDescriptorsAndMessages\(DESCRIPTOR, )'({modules})'",
        rf"\1'{PACKAGE}.\2'",
        text,
    )
    bare = re.search(rf"^\s*(import|from) ({modules})\b", text, flags=re.MULTILINE)
    if bare:
        raise SystemExit(f"{filename}: unrewritten import: {bare.group(0).strip()}")
    lines = text.splitlines(keepends=True)
    # Keep protoc's own header lines first, then ours.
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        i += 1
    return "".join(lines[:i]) + HEADER + "".join(lines[i:])


def generate(out_dir: Path) -> None:
    """Generate every file of expected_files() into out_dir."""
    _run_protoc(out_dir)
    for name in expected_files():
        path = out_dir / name
        if not path.is_file():
            raise SystemExit(f"protoc did not produce {name}")
        text = path.read_text(encoding="utf-8")
        path.write_bytes(_postprocess(text, name).encode("utf-8"))


def _stray_files() -> list[str]:
    """Generated-looking files in proto/ that no current source produces."""
    wanted = set(expected_files())
    patterns = ("*_pb2.py", "*_pb2.pyi", "*_pb2_grpc.py")
    found = [p.name for pat in patterns for p in PROTO_DIR.glob(pat)]
    return sorted(set(found) - wanted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="regenerate into a temporary folder and exit 1 if any file in proto/ differs",
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tritium-codegen-") as tmp:
        tmp_dir = Path(tmp)
        generate(tmp_dir)
        stale = []
        for name in expected_files():
            new = (tmp_dir / name).read_bytes()
            target = PROTO_DIR / name
            old = target.read_bytes() if target.is_file() else None
            if new == old:
                continue
            stale.append(name if old is not None else f"{name} (missing)")
            if not args.check:
                target.write_bytes(new)
        strays = _stray_files()

    if args.check:
        problems = stale + [f"{name} (no .proto source produces it)" for name in strays]
        if problems:
            print(
                "proto/: generated files are stale; run `python proto/codegen.py`:",
                file=sys.stderr,
            )
            for name in problems:
                print(f"  {name}", file=sys.stderr)
            return 1
        print("proto/: generated files are up to date")
        return 0

    for name in stale:
        print(f"wrote proto/{name.split(' ')[0]}")
    for name in strays:
        print(
            f"warning: proto/{name} is not produced by any .proto source; delete it",
            file=sys.stderr,
        )
    if not stale:
        print("proto/: generated files already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
