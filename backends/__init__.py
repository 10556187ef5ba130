"""The global backend directory shipped with tritium: ``backends/<name>/libtriton_<name>.py``.

Backends are loaded by path (see :mod:`tritium.core.backend.loader`), inside
worker processes; this package exists so that the folder is installed.
"""
