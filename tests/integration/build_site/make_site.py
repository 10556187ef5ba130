"""Regenerate this folder: a frozen "environment" for build.py's golden --dry-run tests.

``build.py --site-packages tests/integration/build_site`` pins the versions recorded
here (name, version, requirements and installed size of each distribution) instead
of the running environment's, so the golden plans do not change when the test
environment is upgraded. Run with the project's dev environment::

    python tests/integration/build_site/make_site.py
"""

from __future__ import annotations

import importlib.metadata as md
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

import build  # noqa: E402

PARTS = ["onnxruntime", "python", "identity", "pytorch"]


def main() -> None:
    pyproject = build._pyproject(ROOT)
    roots = [(r, "tritium") for r in pyproject["project"]["dependencies"]]
    roots += [(r, p) for p in PARTS for r in build._extra(pyproject, p, False)]
    pins, _ = build.resolve(roots)
    for old in HERE.glob("*.dist-info"):
        shutil.rmtree(old)
    for pin in pins:
        dist = md.distribution(pin.name)
        info = HERE / f"{pin.name}-{pin.version}.dist-info"
        info.mkdir()
        lines = ["Metadata-Version: 2.1", f"Name: {pin.name}", f"Version: {pin.version}"]
        lines += [f"Requires-Dist: {r}" for r in dist.requires or []]
        (info / "METADATA").write_text("\n".join(lines) + "\n")
        (info / "RECORD").write_text(f"{pin.name}/payload,,{pin.size}\n")


if __name__ == "__main__":
    main()
