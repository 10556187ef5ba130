"""The tritium core: model repository, model config, backend loader, workers, schedulers, errors.

The in-process API every frontend (and any embedding application) uses is
:mod:`tritium.core.api`; its names can also be imported from here::

    from tritium.core import InferenceServer, ServerOptions, InferenceRequest, InferInput

    server = InferenceServer(ServerOptions(model_repositories=["models"]))
    await server.start(frontends=False)
    response = await server.infer(InferenceRequest("m", inputs=[InferInput.from_numpy("INPUT0", x)]))
    y = response.outputs[0].as_numpy().copy()
    response.release()
    await server.stop()

Here the names are imported on first use (from :mod:`tritium.core.api`), so
that worker processes (which import ``tritium.core.worker``) load none of the
server's machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .api import *  # noqa: F403  (the same names, typed, for mypy)


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return list(importlib.import_module(".api", __name__).__all__)
    if not name.startswith("_"):
        api = importlib.import_module(".api", __name__)
        if name in api.__all__:
            return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *importlib.import_module(".api", __name__).__all__])
