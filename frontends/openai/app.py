"""The OpenAI-compatible endpoint's HTTP side: the aiohttp application, its routes, and start/stop.

Routes (transport only; the work is in :mod:`.serving`):

- ``GET /v1/models``, ``GET /v1/models/{model}``;
- ``POST /v1/completions``, ``POST /v1/chat/completions``: a JSON answer, or with
  ``"stream": true`` Server-Sent Events, one ``data: {chunk}`` per piece of text, ending with
  ``data: [DONE]`` (an error after the first chunk is sent as ``data: {"error": ...}`` first);
- ``GET /health/ready``: 200 while the server is ready, else 503.

Every error, the router's 404 and 405 and the body size limit's 413 included, has OpenAI's
``{"error": {"message", "type", "param", "code"}}`` body. Runs in the core process, on its
event loop.

Bodies are bounded as on the KServe HTTP endpoint: a declared ``Content-Length`` over
``max_request_bytes`` is 413 from the headers, before the body is read; a chunked body is read
with a running size check (413 once past the limit); a body that makes no progress for
``--http-body-timeout-secs`` is 408; a keep-alive connection idle for
``--http-idle-timeout-secs`` is closed (aiohttp's ``keepalive_timeout``). A refused request's
connection closes after its answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from aiohttp import HttpVersion11, web

from tritium.frontends.sse import event

from .protocol import OpenAIError, parse_chat, parse_completion, parse_json
from .serving import Serving

log = logging.getLogger("tritium.openai")

__all__ = ["OpenAIFrontend", "create_app", "SERVING"]

#: The endpoints' work (models, completions, chat completions).
SERVING = web.AppKey("serving", Serving)
_HANDLERS = web.AppKey("handlers", set)
#: the largest request body (bytes) and how long a body may make no progress (seconds)
_BODY_LIMITS = web.AppKey("body_limits", tuple)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, ensure_ascii=False).encode("utf-8"), status=status, content_type="application/json"
    )


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error in OpenAI's shape; counts the handlers in flight (for :meth:`OpenAIFrontend.stop`)."""
    task = asyncio.current_task()
    handlers = request.app[_HANDLERS]
    handlers.add(task)
    try:
        return await handler(request)
    except OpenAIError as exc:
        response = _json(exc.body(), exc.status)
        if exc.status in (408, 413):  # the body was not read to its end: the connection cannot go on
            response.force_close()
        return response
    except web.HTTPException as exc:
        if exc.status == 404:
            error = OpenAIError(404, f"Invalid URL ({request.method} {request.path})", code="unknown_url")
        elif exc.status == 405:
            error = OpenAIError(
                405, f"Method {request.method} is not allowed for {request.path}", code="method_not_allowed"
            )
        else:
            error = OpenAIError(exc.status, exc.reason or "HTTP error")
        return _json(error.body(), exc.status)
    except ConnectionError as exc:  # the client went away (mid-body or mid-answer): nobody to answer
        log.info("OpenAI endpoint: %s %s: client disconnected (%s)", request.method, request.path, exc)
        return _json(OpenAIError(400, "The client disconnected.").body(), 400)  # aiohttp drops it quietly
    except Exception:
        log.exception("OpenAI endpoint: %s %s failed", request.method, request.path)
        return _json(
            OpenAIError(500, "The server had an error while processing your request.", "server_error").body(), 500
        )
    finally:
        handlers.discard(task)


def _too_large(limit: int) -> OpenAIError:
    return OpenAIError(
        413, f"Request body too large: Maximum request body size {limit} exceeded.", code="request_too_large"
    )


async def read_body(request: web.Request, limit: int, stall_s: float) -> bytes:
    """The request body, at most ``limit`` bytes, each piece within ``stall_s`` seconds of the last.

    :raises OpenAIError: 413 for a declared length over ``limit`` (before a byte is read) or a
        (chunked) body that passes it; 408 when the body makes no progress for ``stall_s``.
    """
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(limit)
    body = bytearray()
    while True:
        try:
            async with asyncio.timeout(stall_s):
                chunk = await request.content.readany()
        except TimeoutError:
            raise OpenAIError(
                408,
                f"The request body made no progress for {stall_s:g} s (--http-body-timeout-secs).",
                code="request_timeout",
            ) from None
        if not chunk:
            return bytes(body)
        body += chunk
        if len(body) > limit:
            raise _too_large(limit)


async def _expect(request: web.Request) -> web.StreamResponse | None:
    """``Expect: 100-continue``: a declared length over the limit gets the 413 at once, instead of
    ``100 Continue`` and the 413 only after the client has sent its whole body (RFC 9110 10.1.1)."""
    limit, _ = request.app[_BODY_LIMITS]
    declared = request.content_length
    if declared is not None and declared > limit:
        response = _json(_too_large(limit).body(), 413)
        response.force_close()
        return response
    expect = request.headers.get("Expect", "")
    if request.version == HttpVersion11:  # as aiohttp's own handler, which this one replaces
        if expect.lower() != "100-continue":
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect}")
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the response itself has not started
    return None


async def _body(request: web.Request) -> dict[str, Any]:
    limit, stall_s = request.app[_BODY_LIMITS]
    return parse_json(await read_body(request, limit, stall_s))


async def _sse(request: web.Request, chunks: AsyncGenerator[dict[str, Any], None]) -> web.StreamResponse:
    """Send ``chunks`` as Server-Sent Events; stop early when the client goes away."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    try:
        try:
            async for chunk in chunks:
                await response.write(event(chunk, compact=False))
        except OpenAIError as exc:
            await response.write(event(exc.body(), compact=False))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except ConnectionResetError:
        log.debug("OpenAI endpoint: the client of %s left before the end of its stream", request.path)
    finally:
        await chunks.aclose()  # ends the inference request's stream (its responses are released)
    return response


async def list_models(request: web.Request) -> web.Response:
    return _json(request.app[SERVING].models())


async def get_model(request: web.Request) -> web.Response:
    return _json(request.app[SERVING].model(request.match_info["model"]))


async def _answer(
    request: web.Request, answer: dict[str, Any] | AsyncGenerator[dict[str, Any], None]
) -> web.StreamResponse:
    if isinstance(answer, dict):
        return _json(answer)
    return await _sse(request, answer)


async def completions(request: web.Request) -> web.StreamResponse:
    serving = request.app[SERVING]
    return await _answer(request, await serving.completion(parse_completion(await _body(request))))


async def chat_completions(request: web.Request) -> web.StreamResponse:
    serving = request.app[SERVING]
    return await _answer(request, await serving.chat(parse_chat(await _body(request))))


async def health_ready(request: web.Request) -> web.Response:
    if request.app[SERVING].server.ready:
        return web.Response(status=200)
    return _json(OpenAIError(503, "The server is not ready.", "server_error", code="not_ready").body(), 503)


def create_app(serving: Serving, max_request_bytes: int, body_timeout_s: float = 60.0) -> web.Application:
    """The application serving the OpenAI endpoints of ``serving``.

    :param max_request_bytes: the largest request body accepted (413 beyond).
    :param body_timeout_s: a request body may make no progress this long (408 beyond).
    """
    app = web.Application(client_max_size=max_request_bytes, middlewares=[_errors])
    app[SERVING] = serving
    app[_BODY_LIMITS] = (max_request_bytes, body_timeout_s)
    app[_HANDLERS] = set()
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/v1/models/{model}", get_model)
    app.router.add_post("/v1/completions", completions, expect_handler=_expect)
    app.router.add_post("/v1/chat/completions", chat_completions, expect_handler=_expect)
    app.router.add_get("/health/ready", health_ready)
    return app


class OpenAIFrontend:
    """The endpoint as a tritium frontend (see ``tritium.core.hookspecs.Frontend``).

    :param serving: the endpoints' work.
    :param address: the address to bind.
    :param port: the port to bind.
    :param max_request_bytes: the largest request body accepted.
    :param body_timeout_s: a request body may make no progress this long (``--http-body-timeout-secs``).
    :param idle_timeout_s: a keep-alive connection may wait this long for a request
        (``--http-idle-timeout-secs``).
    """

    name = "openai"

    def __init__(
        self,
        serving: Serving,
        address: str,
        port: int,
        max_request_bytes: int,
        body_timeout_s: float = 60.0,
        idle_timeout_s: float = 300.0,
    ) -> None:
        self.address, self.port = address, port
        self.app = create_app(serving, max_request_bytes, body_timeout_s)
        self._idle_timeout_s = idle_timeout_s
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None

    async def start(self) -> None:
        """Bind and serve (on the server's event loop, while the server starts).

        :raises OSError: when the port cannot be bound.
        """
        runner = web.AppRunner(self.app, access_log=None, keepalive_timeout=self._idle_timeout_s)
        await runner.setup()
        site = web.TCPSite(runner, self.address, self.port, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner, self._site = runner, site
        log.info("Started OpenAI-compatible endpoint at %s:%d", self.address, self.port)

    async def stop(self, grace: float) -> None:
        """Stop accepting connections, give requests in flight ``grace`` seconds, then close."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        if self._site is not None:
            await self._site.stop()
            self._site = None
        handlers = self.app[_HANDLERS].copy()
        if handlers:
            _, pending = await asyncio.wait(handlers, timeout=grace)
            if pending:
                log.warning("%d OpenAI requests still in flight after %.1f s", len(pending), grace)
        await runner.cleanup()
