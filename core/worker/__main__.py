"""``python -m tritium.core.worker``: host one model instance (see :mod:`.main`)."""

from .main import main

main()
