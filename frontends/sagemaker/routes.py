"""The SageMaker endpoint's URLs: ``GET /ping``, ``POST /invocations`` and the multi-model ``/models`` routes.

Follows Triton's ``sagemaker_server.cc`` (2.51, with the later fixes that
apply ``--http-restricted-api``):

- ``GET /ping``: 200 when the server is ready (``SAGEMAKER_TRITON_PING_MODE=live``:
  when live), else 400; empty body.
- ``POST /invocations``: a KServe v2 inference request for the default model
  (``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME``), or for the model that
  ``X-Amzn-SageMaker-Target-Model`` names (tritium's: Triton ignores the header
  here), answered as ``POST /v2/models/<model>/infer`` is (same bodies, same
  error statuses). A binary
  request says the size of its JSON part in its ``Content-Type``
  (``application/vnd.sagemaker-triton.binary+json;json-header-size=<n>``), and a
  binary response does the same. ``SAGEMAKER_TRITON_INFERENCE_TYPE=generate``
  (or ``generate_stream``) makes it the generate extension instead.
- the multi-model routes (:mod:`.multi_model`).
- anything else: 400 with an empty body; a wrong method on a known URL: 405.

Runs on the core's event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable

from ..kserve_http.adapter import BAD_REQUEST, SAGEMAKER_BINARY, binary_content_type, delegate
from ..kserve_http.context import EndpointContext
from ..kserve_http.generate import generate, generate_stream
from ..kserve_http.messages import HttpRequest, HttpResponse
from ..kserve_http.restricted import group_refusal
from ..kserve_http.router import Handler, Router
from ..kserve_http.routes import health_live, health_ready, infer
from .multi_model import TARGET_HEADER, MultiModel

__all__ = ["SageMakerRoutes", "INFERENCE_TYPES", "PING_MODES", "UNSPECIFIED_MODEL"]

#: ``SAGEMAKER_TRITON_INFERENCE_TYPE``: the KServe handler ``/invocations`` is
INFERENCE_TYPES: dict[str, Handler] = {"infer": infer, "generate": generate, "generate_stream": generate_stream}
#: ``SAGEMAKER_TRITON_PING_MODE``: what ``/ping`` reports
PING_MODES = ("ready", "live")
#: the model ``/invocations`` names when no default model is set and the repository has several (Triton's)
UNSPECIFIED_MODEL = "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"

_TO_BINARY = binary_content_type(SAGEMAKER_BINARY)


class SageMakerRoutes:
    """The handlers of one SageMaker endpoint and its settings.

    :param default_model: the model ``/invocations`` serves.
    :param ping_mode: ``"ready"`` or ``"live"``.
    :param inference_type: a key of :data:`INFERENCE_TYPES`.
    :param restrictions: ``--http-restricted-api`` (group -> header, value).
    :param multi_model: the multi-model endpoint's registry of loaded models.
    """

    def __init__(
        self,
        default_model: str,
        ping_mode: str,
        inference_type: str,
        restrictions: dict[str, tuple[str, str]],
        multi_model: MultiModel,
    ) -> None:
        self.default_model = default_model
        self.ping_mode = ping_mode
        self.handler = INFERENCE_TYPES[inference_type]
        self.restrictions = restrictions
        self.multi_model = multi_model

    def ping(self, ctx: EndpointContext, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        """``GET /ping``: 200 when ready (or live, by ``ping_mode``), else 400; empty body."""
        refused = group_refusal(self.restrictions, "health", request.headers)
        if refused is not None:
            return refused
        return health_live(ctx, request) if self.ping_mode == "live" else health_ready(ctx, request)

    def invocations(self, ctx: EndpointContext, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse] | None:
        """``POST /invocations``: inference on the default model (see the module's description)."""
        refused = group_refusal(self.restrictions, "inference", request.headers)
        if refused is not None:
            return refused
        model = request.headers.get(TARGET_HEADER) or self.default_model
        return delegate(ctx, request, self.handler, model, "", SAGEMAKER_BINARY, _TO_BINARY)

    def router(self) -> Router:
        """The URL table: unknown URLs get Triton's empty 400."""
        router = Router(not_found=BAD_REQUEST)
        router.add("/invocations", "POST", self.invocations, arena_body=True)
        router.add("/ping", "GET", self.ping)
        self.multi_model.add_routes(router)
        return router
