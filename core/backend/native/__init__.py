"""Native backends: ``libtriton_<name>.so`` written against Triton's backend C API.

- ``include/triton/core/*.h``: the C headers backends compile against
  (``tritium-config --include``);
- ``shim.c``: tritium's implementation of that API, compiled by cffi
  (:mod:`.build`) and imported into the worker with ``RTLD_GLOBAL``;
- :mod:`.host`: :class:`~.host.NativeBackend`, which presents a loaded library
  as the same ``TRITONBACKEND_*`` Python entry points as a Python backend, so
  the worker runs both kinds the same way.

Everything here runs in the worker process; the core never loads a backend.
See docs/native_backends.md.
"""
