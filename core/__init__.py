"""The tritium core: model repository, model config, backend loader, workers, schedulers, errors.

The in-process API every frontend (and any embedding application) uses::

    from tritium.core import InferenceServer, ServerOptions, InferenceRequest, InferInput

    server = InferenceServer(ServerOptions(model_repositories=["models"]))
    await server.start(frontends=False)
    response = await server.infer(InferenceRequest("m", inputs=[InferInput.from_numpy("INPUT0", x)]))
    y = response.outputs[0].as_numpy().copy()
    response.release()
    await server.stop()
"""

from .errors import Code, TritonError
from .options import ServerOptions
from .request import InferenceRequest, InferInput, RequestedOutput
from .response import InferenceResponse, OutputTensor
from .server import InferenceServer

__all__ = [
    "Code",
    "TritonError",
    "ServerOptions",
    "InferenceRequest",
    "InferInput",
    "RequestedOutput",
    "InferenceResponse",
    "OutputTensor",
    "InferenceServer",
]
