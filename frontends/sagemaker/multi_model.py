"""SageMaker's multi-model endpoint (MME): models loaded, listed, invoked and unloaded by SageMaker.

The routes and answers of Triton's ``sagemaker_server.cc``, which SageMaker's
platform calls when an endpoint hosts many models (``boto3``'s
``invoke_endpoint(TargetModel=...)`` arrives as ``POST /models/<name>/invoke``):

- ``POST /models`` with ``{"model_name": "<name>", "url": "<folder>"}``: load the
  model in ``<folder>`` (SageMaker's ``/opt/ml/models/<hash>/model``) under the
  name in ``X-Amzn-SageMaker-Target-Model`` (default ``model_name``). The folder
  holds the model itself (its ``config.pbtxt`` at the top), one model folder, or an
  ensemble and its composing models (these load first, under their folders'
  names, and unload with it; a name already serving is 409, as tritium has no
  model namespacing).
  200 empty; 409 when ``<name>`` (or a model of the target's name) is loaded
  already; 400 ``{"error"}`` when the load fails (507 when the reason reads as
  running out of memory), and the failed model leaves nothing behind.
- ``GET /models``: ``{"models": [{"modelName", "modelUrl"}, ...]}`` of the ready ones.
- ``GET /models/<name>``: ``{"modelName", "modelUrl"}``; 404 empty when not loaded.
- ``POST /models/<name>/invoke``: as ``/invocations``, on the loaded model; every
  error is 400 (507 for out of memory), as Triton answers; 404 empty when not loaded.
- ``DELETE /models/<name>``: unload it (and the models it loaded); 200 empty;
  404 empty when not loaded.

The model control mode must be ``explicit`` (as Triton's SageMaker container
runs it). ``url`` must lie under ``multi_model_root`` (default ``/opt/ml/models``;
symlinks resolved): a request cannot make the server run code from anywhere
else. Runs on the core's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.api import Code, TritonError
from ..kserve_http import codec
from ..kserve_http.adapter import SAGEMAKER_BINARY, binary_content_type, delegate
from ..kserve_http.context import EndpointContext, error_response
from ..kserve_http.messages import HttpRequest, HttpResponse
from ..kserve_http.restricted import group_refusal
from ..kserve_http.router import CONTROL_BODY_BYTES, Router
from ..kserve_http.routes import infer

log = logging.getLogger("tritium.sagemaker")

__all__ = ["MultiModel", "Loaded", "DEFAULT_ROOT", "TARGET_HEADER", "out_of_memory"]

#: where SageMaker places the models of a multi-model endpoint
DEFAULT_ROOT = "/opt/ml/models"
TARGET_HEADER = "x-amzn-sagemaker-target-model"

# error texts that Triton's SageMaker endpoint answers with 507 (Insufficient Storage): the
# frameworks' ways of saying they ran out of memory
_OUT_OF_MEMORY = (
    "CUDA out of memory",
    "CUDA_OUT_OF_MEMORY",
    "Out of memory",
    "Out Of Memory",
    "out of memory",
    "MemoryError",
    "OutOfMemory",
    "OOM",
    "Dst tensor is not initialized",
    "Src tensor is not initialized",
    "CNMEM_STATUS_OUT_OF_MEMORY",
    "CUDNN_STATUS_NOT_INITIALIZED",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUBLAS_STATUS_NOT_INITIALIZED",
    "Failed to allocate memory",
    "failed to allocate memory",
    "No space left on device",
)

_EMPTY_OK = HttpResponse(200, b"", None)
_EMPTY_NOT_FOUND = HttpResponse(404, b"", None)
_TO_BINARY = binary_content_type(SAGEMAKER_BINARY)


_ENSEMBLE = re.compile(r'platform:\s*"ensemble"')  # how Triton's SageMaker endpoint tells an ensemble
#: a config.pbtxt is read this far to tell an ensemble
_CONFIG_BYTES = 1 << 20


def _is_ensemble(folder: Path) -> bool:
    try:
        with open(folder / "config.pbtxt", "rb") as f:
            text = f.read(_CONFIG_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    return _ENSEMBLE.search(text) is not None


def out_of_memory(message: str) -> bool:
    """Whether an error message reads as running out of memory (Triton's list of phrases)."""
    return any(phrase in message for phrase in _OUT_OF_MEMORY)


def _status_of(error: TritonError) -> int:
    return 507 if out_of_memory(error.message) else 400


def _mme_answer(response: HttpResponse) -> HttpResponse:
    """An invoke's answer: binary responses in SageMaker's form, every error 400 (507: out of memory)."""
    if response.status < 400 or response.status == 413:
        return _TO_BINARY(response)
    status = 400
    body = response.body
    if isinstance(body, bytes) and any(p.encode() in body for p in _OUT_OF_MEMORY):
        status = 507
    return HttpResponse(status, body, "application/json", response.headers, response.release)


@dataclass(frozen=True, slots=True)
class Loaded:
    """A model the multi-model endpoint loaded.

    :ivar target: the model's name in the server (``X-Amzn-SageMaker-Target-Model``).
    :ivar url: the URL shown for it (Triton's: the repository folder it registered).
    :ivar parts: an ensemble's composing models loaded with it from the same URL, in load order.
    """

    target: str
    url: str
    parts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Layout:
    """What a load URL holds: the model folder, the URL to show, the folders to load before it."""

    folder: Path
    shown: str
    parts: tuple[Path, ...] = ()


class MultiModel:
    """The models this SageMaker endpoint loaded: SageMaker's name -> :class:`Loaded`.

    :param server: the in-process API.
    :param root: the folder every ``url`` must lie under.
    :param restrictions: ``--http-restricted-api`` (group -> header, value).
    """

    def __init__(self, server: Any, root: str, restrictions: dict[str, tuple[str, str]]) -> None:
        self.server = server
        self.root = root
        self.restrictions = restrictions
        self.models: dict[str, Loaded] = {}
        self._busy: set[str] = set()

    def add_routes(self, router: Router) -> None:
        """Register the ``/models`` routes on ``router``."""
        for base in ("/models", "/models/"):
            router.add(base, "GET", self.list_models)
            router.add(base, "POST", self.load, max_body=CONTROL_BODY_BYTES)
        router.add("/models/{model}", "POST", self.load, max_body=CONTROL_BODY_BYTES)
        router.add("/models/{model}", "GET", self.get_model)
        router.add("/models/{model}", "DELETE", self.unload)
        router.add("/models/{model}/invoke", "POST", self.invoke, arena_body=True)

    def _refused(self, group: str, request: HttpRequest) -> HttpResponse | None:
        return group_refusal(self.restrictions, group, request.headers)

    # -- listing -----------------------------------------------------------------------------
    def list_models(self, ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
        """``GET /models``: the loaded models that are ready."""
        refused = self._refused("model-repository", request)
        if refused is not None:
            return refused
        models = [
            {"modelName": name, "modelUrl": loaded.url}
            for name, loaded in self.models.items()
            if ctx.server.model_ready(loaded.target)
        ]
        return HttpResponse(200, codec.dumps({"models": models}))

    def get_model(self, ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
        """``GET /models/<name>``: its name and URL; 404 empty when not loaded."""
        refused = self._refused("model-repository", request)
        if refused is not None:
            return refused
        name = request.params["model"]
        found = self.models.get(name)
        if found is None:
            return _EMPTY_NOT_FOUND
        return HttpResponse(200, codec.dumps({"modelName": name, "modelUrl": found.url}))

    # -- inference -------------------------------------------------------------------------
    def invoke(self, ctx: EndpointContext, request: HttpRequest) -> Any:
        """``POST /models/<name>/invoke``: inference on a loaded model (see the module's description)."""
        refused = self._refused("inference", request)
        if refused is not None:
            return refused
        found = self.models.get(request.params["model"])
        if found is None:
            return _EMPTY_NOT_FOUND
        target = request.headers.get(TARGET_HEADER) or found.target
        return delegate(ctx, request, infer, target, "", SAGEMAKER_BINARY, _mme_answer)

    # -- load and unload -------------------------------------------------------------------
    def _layout(self, url: str) -> _Layout:
        """What ``url`` holds (Triton's rules): a model (its ``config.pbtxt`` at the top), one model
        folder, or several of which one is an ensemble (loaded last; the others are its parts).

        :raises TritonError: INVALID_ARG for a URL outside the root, or without a model, or with
            several model folders and not exactly one ensemble among them.
        """
        root = os.path.realpath(self.root)
        real = os.path.realpath(url) if url else ""
        if not url or not os.path.isabs(url) or os.path.commonpath([root, real]) != root or real == root:
            raise TritonError(
                Code.INVALID_ARG,
                f"Invalid \"url\" '{url}': expected a folder under {self.root} (multi_model_root), "
                f"of the form {self.root}/<hash>/model[/<subdir>]",
            )
        folder = Path(real)
        if (folder / "config.pbtxt").is_file():
            return _Layout(folder, str(folder.parent))
        subfolders = (
            sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")) if folder.is_dir() else []
        )
        if len(subfolders) == 1:
            return _Layout(subfolders[0], str(folder))
        if not subfolders:
            raise TritonError(Code.INVALID_ARG, f"no model found at '{url}' (no config.pbtxt and no model folder)")
        ensembles = [p for p in subfolders if _is_ensemble(p)]
        if len(ensembles) != 1:
            raise TritonError(
                Code.INVALID_ARG,
                f"'{url}' holds {len(subfolders)} model folders and {len(ensembles)} ensembles: a multi-model URL "
                "holds one model, or one ensemble and its composing models",
            )
        parts = [p for p in subfolders if p != ensembles[0]]
        return _Layout(ensembles[0], str(folder), tuple(parts))

    async def load(self, ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
        """``POST /models``: load the model at ``url`` (see the module's description)."""
        refused = self._refused("model-repository", request)
        if refused is not None:
            return refused
        try:
            body = codec.loads(request.body) if request.body else {}
            if not isinstance(body, dict):
                raise TritonError(Code.INVALID_ARG, "the load request must be a JSON object")
            name, url = body.get("model_name", ""), body.get("url", "")
            if not isinstance(name, str) or not isinstance(url, str):
                raise TritonError(Code.INVALID_ARG, "'model_name' and 'url' must be strings")
            if not name:
                raise TritonError(Code.INVALID_ARG, "the load request names no 'model_name'")
            target = request.headers.get(TARGET_HEADER) or name
            if name in self.models or name in self._busy:
                return HttpResponse(409, codec.dumps({"error": f"model '{name}' is already loaded"}))
            if ctx.server.model_ready(target):  # a model of the repositories, or another name's target
                return HttpResponse(409, codec.dumps({"error": f"a model named '{target}' is already serving"}))
            layout = await asyncio.to_thread(self._layout, url)
        except TritonError as exc:
            return error_response(exc)
        serving = [p.name for p in layout.parts if ctx.server.model_ready(p.name)]
        if serving:  # tritium has no model namespacing: composing models share the server's names
            return HttpResponse(409, codec.dumps({"error": f"a model named '{serving[0]}' is already serving"}))
        log.info("Loading SageMaker TargetModel: %s", target)
        self._busy.add(name)
        loaded: list[str] = []
        try:
            for part in layout.parts:  # an ensemble's composing models first, under their folders' names
                loaded.append(part.name)
                await ctx.server.load_model(part.name, folder=part)
            loaded.append(target)
            await ctx.server.load_model(target, folder=layout.folder)
        except TritonError as exc:
            await self._forget(ctx, loaded)
            return HttpResponse(_status_of(exc), codec.dumps({"error": exc.message}))
        finally:
            self._busy.discard(name)
        self.models[name] = Loaded(target, layout.shown, tuple(p.name for p in layout.parts))
        return _EMPTY_OK

    @staticmethod
    async def _forget(ctx: EndpointContext, names: list[str]) -> None:
        """Unload ``names``, last first: after a failed load, so that it leaves no failed versions behind
        to hold readiness down (Triton unregisters the repository it registered), and on unload."""
        for name in reversed(names):
            try:
                await ctx.server.unload_model(name)
            except TritonError as exc:
                log.warning("SageMaker: could not unload '%s': %s", name, exc.message)

    async def unload(self, ctx: EndpointContext, request: HttpRequest) -> HttpResponse:
        """``DELETE /models/<name>``: unload it and the models loaded for it; 404 empty when not loaded."""
        refused = self._refused("model-repository", request)
        if refused is not None:
            return refused
        name = request.params["model"]
        found = self.models.get(name)
        if found is None or name in self._busy:
            return _EMPTY_NOT_FOUND
        target = request.headers.get(TARGET_HEADER) or found.target
        log.info("Unloading SageMaker TargetModel: %s", target)
        self._busy.add(name)
        try:
            await ctx.server.unload_model(target, unload_dependents=True)
            await self._forget(ctx, list(found.parts))
        except TritonError as exc:
            return HttpResponse(400, codec.dumps({"error": exc.message}))
        finally:
            self._busy.discard(name)
        self.models.pop(name, None)
        return _EMPTY_OK
