"""The OpenAI endpoints' work: models listed, prompts run on the server, answers in OpenAI's format.

Everything goes through the in-process API (``ServerAPI.repository_index``,
``model_config``, ``infer_stream``): no model logic here. A completion or chat completion is
one inference request per prompt; its responses (one, or one per piece of text from a
decoupled model) become the choices' text, finish reasons and token usage. A streamed answer
is an async iterator of chunk objects; its first response is awaited before the iterator is
handed back, so that a request the model refuses still gets an HTTP error status. Runs in the
core process, on the event loop.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from tritium.core.api import Code, ServerAPI, TritonError
from tritium.frontends.sse import primed

from .chat_template import DEFAULT_CHAT_TEMPLATE, TemplateError, render
from .convention import ConventionError, LLMModel, Step, TextDecoder
from .protocol import ChatRequest, CompletionRequest, OpenAIError, Sampling

__all__ = ["Serving", "openai_error"]

_STATUS = {
    Code.NOT_FOUND: (404, "invalid_request_error"),
    Code.INVALID_ARG: (400, "invalid_request_error"),
    Code.ALREADY_EXISTS: (400, "invalid_request_error"),
    Code.UNSUPPORTED: (400, "invalid_request_error"),
    Code.UNAVAILABLE: (503, "server_error"),
}


def openai_error(exc: TritonError) -> OpenAIError:
    """A server error in OpenAI's shape: 400 for a request the server or model refused,
    404 for something not found, 503 while unavailable, else 500."""
    status, kind = _STATUS.get(exc.code, (500, "server_error"))
    return OpenAIError(status, exc.message, kind, code=exc.code.name.lower())


class _Choices:
    """The choices of one prompt, built from the model's responses."""

    def __init__(self, model: str, n: int, base: int) -> None:
        self.model, self.n, self.base = model, n, base
        self.decoders = [TextDecoder() for _ in range(n)]
        self.texts = [""] * n
        self.finish: list[str | None] = [None] * n
        self.prompt_tokens: int | None = None
        self.completion_tokens = 0
        self.counted = False  # the model reported output token counts

    def update(self, step: Step) -> list[tuple[int, str, str | None]]:
        """Take one response in; return ``(choice index, new text, finish reason or None)`` per change."""
        if step.texts and len(step.texts) != self.n:
            raise OpenAIError(
                500,
                f"model '{self.model}' returned {len(step.texts)} text_output elements for n = {self.n}",
                "server_error",
            )
        if step.num_input_tokens is not None and self.prompt_tokens is None:
            self.prompt_tokens = step.num_input_tokens
        if step.num_output_tokens is not None:
            self.counted = True
            self.completion_tokens += sum(step.num_output_tokens)
        changes = []
        for i in range(self.n):
            reason = step.finish_reasons[i] if step.texts else None
            if reason is None and step.final:
                reason = "stop"
            delta = self.decoders[i].feed(step.texts[i] if step.texts else b"", final=reason is not None)
            if self.finish[i] is not None:
                continue  # text after a choice's end is not part of it
            self.texts[i] += delta
            self.finish[i] = reason
            if delta or reason is not None:
                changes.append((self.base + i, delta, reason))
        return changes


class _Usage:
    """Token counts over every prompt of a request; None unless the model reports them."""

    def __init__(self) -> None:
        self.prompt = 0
        self.completion = 0
        self.complete = True

    def add(self, choices: _Choices) -> None:
        if choices.prompt_tokens is None or not choices.counted:
            self.complete = False
            return
        self.prompt += choices.prompt_tokens
        self.completion += choices.completion_tokens

    def body(self) -> dict[str, int] | None:
        if not self.complete:
            return None
        return {
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
        }


async def _changes(
    items: AsyncGenerator[Any, None], usage: _Usage
) -> AsyncGenerator[tuple[int, str, str | None], None]:
    """The choice changes among ``items``; each prompt's finished choices are counted in ``usage``."""
    async with aclosing(items):
        async for item in items:
            if isinstance(item, _Choices):
                usage.add(item)
            else:
                yield item


class Serving:
    """The OpenAI endpoints of one server.

    :param server: the server (the in-process API).
    :param default_max_tokens: ``max_tokens`` when a request gives none (Triton's OpenAI
        frontend's ``--default-max-tokens``).
    :param chat_template: the chat template of models whose config has none.
    :param max_choices: the most choices (prompts × ``n``) one request may ask for.
    """

    def __init__(
        self,
        server: ServerAPI,
        default_max_tokens: int = 16,
        chat_template: str | None = None,
        max_choices: int = 128,
    ) -> None:
        self.server = server
        self.default_max_tokens = default_max_tokens
        self.chat_template = chat_template or DEFAULT_CHAT_TEMPLATE
        self.max_choices = max_choices
        self.created = int(time.time())

    # -- models ------------------------------------------------------------------------------------
    def _card(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": self.created, "owned_by": "tritium"}

    def llm(self, name: str) -> LLMModel:
        """The model ``name`` as the endpoint sees it.

        :raises OpenAIError: 404 for a model not loaded, 400 for one that does not follow the
            LLM model convention, 503 while it is unavailable.
        """
        try:
            config = self.server.model_config(name)
        except TritonError as exc:
            if exc.code == Code.NOT_FOUND:
                raise OpenAIError(
                    404, f"The model `{name}` does not exist.", param="model", code="model_not_found"
                ) from None
            raise openai_error(exc) from None
        try:
            return LLMModel.from_config(config)
        except ConventionError as exc:
            raise OpenAIError(
                400, f"The model `{name}` cannot serve completions: {exc}.", param="model", code="model_not_supported"
            ) from None

    def models(self) -> dict[str, Any]:
        """``GET /v1/models``: the ready models that follow the LLM model convention."""
        names = sorted({entry["name"] for entry in self.server.repository_index(ready=True)})
        data = []
        for name in names:
            try:
                self.llm(name)
            except OpenAIError:
                continue
            data.append(self._card(name))
        return {"object": "list", "data": data}

    def model(self, name: str) -> dict[str, Any]:
        """``GET /v1/models/{model}``.

        :raises OpenAIError: as :meth:`llm`, with 404 for a model that cannot serve completions.
        """
        try:
            self.llm(name)
        except OpenAIError as exc:
            if exc.status == 400:
                raise OpenAIError(404, exc.message, param="model", code="model_not_found") from None
            raise
        return self._card(name)

    # -- running prompts ------------------------------------------------------------------------------
    def _sampling(self, sampling: Sampling, prompts: int) -> dict[str, Any]:
        if prompts * sampling.n > self.max_choices:
            raise OpenAIError(
                400,
                f"Invalid 'n': {prompts} prompts × n = {sampling.n} asks for more than {self.max_choices} choices.",
                param="n",
                code="invalid_value",
            )
        return sampling.parameters(self.default_max_tokens)

    async def _steps(
        self, llm: LLMModel, prompt: str, sampling: dict[str, Any], stream: bool, request_id: str
    ) -> AsyncGenerator[Step, None]:
        request = llm.request(prompt, sampling, stream=stream, exclude_input=True, request_id=request_id)
        try:
            async with aclosing(self.server.infer_stream(request)) as responses:
                async for response in responses:
                    try:
                        if response.error is not None:
                            raise openai_error(response.error)
                        step = Step.read(response)
                    finally:
                        response.release()
                    yield step
        except TritonError as exc:
            raise openai_error(exc) from None

    async def _run(
        self, llm: LLMModel, prompts: list[str], sampling: dict[str, Any], stream: bool, request_id: str, echo: bool
    ) -> AsyncGenerator[tuple[int, str, str | None] | _Choices, None]:
        """Every change of every choice, then each prompt's finished :class:`_Choices`.

        Nothing is yielded before the model's first response for the first prompt (with
        ``echo``, the prompt comes right after it), so errors before any output raise at once.
        """
        n = int(sampling.get("n", 1))
        for number, prompt in enumerate(prompts):
            choices = _Choices(llm.name, n, number * n)
            pending_echo = echo
            async with aclosing(self._steps(llm, prompt, sampling, stream, request_id)) as steps:
                async for step in steps:
                    if pending_echo:
                        pending_echo = False
                        for i in range(n):
                            choices.texts[i] = prompt
                            yield (number * n + i, prompt, None)
                    for change in choices.update(step):
                        yield change
            yield choices

    # -- /v1/completions -----------------------------------------------------------------------------
    async def completion(self, req: CompletionRequest) -> dict[str, Any] | AsyncGenerator[dict[str, Any], None]:
        """``POST /v1/completions``: the answer, or (``stream``) an iterator of its chunks.

        :raises OpenAIError: for an unknown model, a model outside the convention, or a request
            the server or the model refused before answering.
        """
        llm = self.llm(req.model)
        sampling = self._sampling(req.sampling, len(req.prompts))
        request_id = f"cmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        changes = self._run(llm, req.prompts, sampling, req.stream, request_id, req.echo)
        head = {"id": request_id, "object": "text_completion", "created": created, "model": req.model}
        if req.stream:
            return self._completion_chunks(head, await primed(changes), req.include_usage)
        usage, choices = _Usage(), []
        async with aclosing(changes):
            async for item in changes:
                if isinstance(item, _Choices):
                    usage.add(item)
                    choices += [
                        {
                            "index": item.base + i,
                            "text": item.texts[i],
                            "logprobs": None,
                            "finish_reason": item.finish[i],
                        }
                        for i in range(item.n)
                    ]
        return {**head, "choices": choices, "usage": usage.body()}

    @staticmethod
    async def _completion_chunks(
        head: dict[str, Any], changes: AsyncGenerator[Any, None], include_usage: bool
    ) -> AsyncGenerator[dict[str, Any], None]:
        usage = _Usage()
        extra = {"usage": None} if include_usage else {}
        async with aclosing(_changes(changes, usage)) as found:
            async for index, text, reason in found:
                yield {
                    **head,
                    "choices": [{"index": index, "text": text, "logprobs": None, "finish_reason": reason}],
                    **extra,
                }
        if include_usage:
            yield {**head, "choices": [], "usage": usage.body()}

    # -- /v1/chat/completions -----------------------------------------------------------------------
    def _prompt(self, llm: LLMModel, req: ChatRequest) -> str:
        try:
            return render(llm.chat_template or self.chat_template, req.messages)
        except TemplateError as exc:
            if exc.broken:
                raise OpenAIError(500, f"model '{llm.name}': {exc}", "server_error") from None
            raise OpenAIError(400, str(exc), param="messages") from None

    async def chat(self, req: ChatRequest) -> dict[str, Any] | AsyncGenerator[dict[str, Any], None]:
        """``POST /v1/chat/completions``: the answer, or (``stream``) an iterator of its chunks.

        :raises OpenAIError: as :meth:`completion`, and 400 when the chat template refuses the messages.
        """
        llm = self.llm(req.model)
        sampling = self._sampling(req.sampling, 1)
        prompt = self._prompt(llm, req)
        request_id = f"chatcmpl-{uuid.uuid4().hex}"
        head = {"id": request_id, "object": "chat.completion", "created": int(time.time()), "model": req.model}
        changes = self._run(llm, [prompt], sampling, req.stream, request_id, echo=False)
        if req.stream:
            return self._chat_chunks(
                {**head, "object": "chat.completion.chunk"}, req.sampling.n, await primed(changes), req.include_usage
            )
        usage, choices = _Usage(), []
        async with aclosing(changes):
            async for item in changes:
                if isinstance(item, _Choices):
                    usage.add(item)
                    choices = [
                        {
                            "index": i,
                            "message": {"role": "assistant", "content": item.texts[i]},
                            "logprobs": None,
                            "finish_reason": item.finish[i],
                        }
                        for i in range(item.n)
                    ]
        return {**head, "choices": choices, "usage": usage.body()}

    @staticmethod
    async def _chat_chunks(
        head: dict[str, Any], n: int, changes: AsyncGenerator[Any, None], include_usage: bool
    ) -> AsyncGenerator[dict[str, Any], None]:
        extra = {"usage": None} if include_usage else {}

        def chunk(index: int, delta: dict[str, str], reason: str | None) -> dict[str, Any]:
            return {
                **head,
                "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": reason}],
                **extra,
            }

        for index in range(n):
            yield chunk(index, {"role": "assistant", "content": ""}, None)
        usage = _Usage()
        async with aclosing(_changes(changes, usage)) as found:
            async for index, text, reason in found:
                if text:
                    yield chunk(index, {"content": text}, None)
                if reason is not None:
                    yield chunk(index, {}, reason)
        if include_usage:
            yield {**head, "choices": [], "usage": usage.body()}
