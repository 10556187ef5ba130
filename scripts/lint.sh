#!/usr/bin/env bash
# Lint and type checks, run by scripts/test.sh before the tests (and so by .ci/run):
# ruff's rules and formatter over the whole checkout, mypy over the packages tritium ships.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")"  # absolute: mypy runs in another folder

"$PY" -m ruff check .
"$PY" -m ruff format --check .

# mypy needs the import names: the package-dir mapping (tritium.core is core/, ...) is laid out
# as a tree of links to the checkout, so mypy reports the checkout's own paths
TREE=$(mktemp -d)
trap 'rm -rf "$TREE"' EXIT
mkdir "$TREE/tritium"
for entry in tritium/*; do ln -s "$PWD/$entry" "$TREE/tritium/"; done
for package in core frontends backends proto integrations; do ln -s "$PWD/$package" "$TREE/tritium/$package"; done
(cd "$TREE" && "$PY" -m mypy --config-file "$OLDPWD/pyproject.toml" tritium/core tritium/frontends tritium/backends)
