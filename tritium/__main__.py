"""``python -m tritium``: the same as ``tritium-server``."""

from .cli import main

main()
