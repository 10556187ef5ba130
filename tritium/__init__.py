"""tritium: a Triton-compatible inference server written in Python.

The import package's subpackages are the repository's top-level folders:
``tritium.core`` (core/), ``tritium.frontends`` (frontends/),
``tritium.backends`` (backends/), ``tritium.proto`` (proto/) and
``tritium.integrations`` (integrations/: the Ray Serve application).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
