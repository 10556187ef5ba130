"""The server's settings: options, network limits and TLS, the image's composition, endpoint plugins.

:mod:`.options` (``ServerOptions``: the command line), :mod:`.network` (timeouts, limits, TLS
files, the request-body budget), :mod:`.composition` (what ``build.py`` put in an image),
:mod:`.plugins` (``plugins.toml`` and the endpoint plugins it enables).
"""
