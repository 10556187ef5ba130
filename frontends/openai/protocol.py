"""The OpenAI wire format: request bodies checked into dataclasses, and OpenAI's error shape.

Checks follow OpenAI's API: a body that is not JSON, a missing required field, a value of the
wrong type or out of range, and a field this endpoint cannot honour are each a 400 whose
``{"error": {"message", "type", "param", "code"}}`` body names the field (``param``). Fields
that only describe the caller (``user``, ``metadata``, ``store``, ``service_tier``) are accepted
and ignored. Pure functions, no I/O: they run on the event loop, bounded by the body size limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "OpenAIError",
    "Sampling",
    "CompletionRequest",
    "ChatRequest",
    "parse_json",
    "parse_completion",
    "parse_chat",
]

_INT64 = (-(1 << 63), (1 << 63) - 1)


class OpenAIError(Exception):
    """An error answered in OpenAI's shape.

    :param status: the HTTP status.
    :param message: what went wrong, for a person.
    :param type: OpenAI's error type (``invalid_request_error``, ``server_error``, ...).
    :param param: the request field at fault, or None.
    :param code: a machine-readable code (``model_not_found``, ``invalid_type``, ...) or None.
    """

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def _bad(param: str, message: str, code: str = "invalid_value") -> OpenAIError:
    return OpenAIError(400, message, param=param, code=code)


@dataclass(slots=True)
class Sampling:
    """The request fields that become the model's sampling parameters (vLLM's names).

    Only the fields the client set are sent to the model (``max_tokens`` always is, from the
    endpoint's ``default_max_tokens`` when not given), so the model's own defaults apply.
    """

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    n: int = 1
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None

    def parameters(self, default_max_tokens: int) -> dict[str, Any]:
        """The sampling parameters as the model receives them (the JSON of ``sampling_parameters``)."""
        out: dict[str, Any] = {"max_tokens": self.max_tokens if self.max_tokens is not None else default_max_tokens}
        for name in ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.n != 1:
            out["n"] = self.n
        if self.stop:
            out["stop"] = list(self.stop)
        return out


@dataclass(slots=True)
class CompletionRequest:
    """``POST /v1/completions``: one or more prompts to continue."""

    model: str
    prompts: list[str]
    sampling: Sampling
    stream: bool = False
    include_usage: bool = False
    echo: bool = False


@dataclass(slots=True)
class ChatRequest:
    """``POST /v1/chat/completions``: a conversation to answer (messages as ``{"role", "content"}``)."""

    model: str
    messages: list[dict[str, str]]
    sampling: Sampling
    stream: bool = False
    include_usage: bool = False


def parse_json(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object.

    :raises OpenAIError: 400 for a body that is not JSON or not an object.
    """
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise OpenAIError(
            400,
            "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload, "
            "but what was sent was not valid JSON.",
        ) from None
    if not isinstance(body, dict):
        raise OpenAIError(400, "The request body must be a JSON object.")
    return body


# -- field checks -------------------------------------------------------------------------------
def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _wrong_type(name: str, expected: str, value: Any) -> OpenAIError:
    return _bad(
        name, f"Invalid type for '{name}': expected {expected}, but got {_kind(value)} instead.", "invalid_type"
    )


def _number(lo: float, hi: float, integer: bool = False) -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
            raise _wrong_type(name, "an integer" if integer else "a number", value)
        if value < lo:
            raise _bad(name, f"Invalid '{name}': expected a value >= {lo:g}, but got {value} instead.")
        if value > hi:
            raise _bad(name, f"Invalid '{name}': expected a value <= {hi:g}, but got {value} instead.")
        return int(value) if integer else float(value)

    return check


def _boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _wrong_type(name, "a boolean", value)
    return value


def _string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _wrong_type(name, "a string", value)
    return value


def _stop(name: str, value: Any) -> list[str]:
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise _wrong_type(name, "a string or an array of strings", value)
    if len(stops) > 4:
        raise _bad(name, f"Invalid '{name}': expected an array of at most 4 strings, but got {len(stops)}.")
    if any(not s for s in stops):
        raise _bad(name, f"Invalid '{name}': a stop sequence must not be empty.")
    return stops


def _ignored(name: str, value: Any) -> None:
    return None


def _object(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _wrong_type(name, "an object", value)
    return value


def _unsupported(what: str, allowed: Callable[[Any], bool] = lambda v: False) -> Callable[[str, Any], None]:
    """A field this endpoint cannot honour: a 400 unless its value asks for nothing."""

    def check(name: str, value: Any) -> None:
        if not allowed(value):
            raise _bad(name, f"'{name}' is not supported by this endpoint: {what}.", "unsupported_parameter")

    return check


_SAMPLING_FIELDS: dict[str, Callable[[str, Any], Any]] = {
    "max_tokens": _number(1, _INT64[1], integer=True),
    "temperature": _number(0, 2),
    "top_p": _number(0, 1),
    "n": _number(1, 128, integer=True),
    "stop": _stop,
    "seed": _number(*_INT64, integer=True),
    "presence_penalty": _number(-2, 2),
    "frequency_penalty": _number(-2, 2),
}
_COMMON: dict[str, Callable[[str, Any], Any]] = {
    **_SAMPLING_FIELDS,
    "model": _string,
    "stream": _boolean,
    "stream_options": _object,
    "user": _ignored,
    "metadata": _ignored,
    "store": _ignored,
    "service_tier": _ignored,
    "logit_bias": _unsupported("logit biases are not passed to models", lambda v: v == {}),
}
_COMPLETION = {
    **_COMMON,
    "prompt": _ignored,  # checked below
    "echo": _boolean,
    "logprobs": _unsupported("models report no log probabilities", lambda v: v == 0),
    "suffix": _unsupported("models have no suffix input", lambda v: v == ""),
    "best_of": _number(1, 128, integer=True),
}
_CHAT = {
    **_COMMON,
    "messages": _ignored,  # checked below
    "max_completion_tokens": _number(1, _INT64[1], integer=True),
    "logprobs": _unsupported("models report no log probabilities", lambda v: v is False),
    "top_logprobs": _unsupported("models report no log probabilities"),
    "tools": _unsupported("tool calls are not parsed from the model's text", lambda v: v == []),
    "tool_choice": _unsupported("tool calls are not parsed from the model's text", lambda v: v == "none"),
    "parallel_tool_calls": _boolean,
    "functions": _unsupported("function calls are not parsed from the model's text", lambda v: v == []),
    "function_call": _unsupported("function calls are not parsed from the model's text", lambda v: v == "none"),
    "response_format": _unsupported(
        "the model's output is plain text", lambda v: isinstance(v, dict) and v.get("type") == "text"
    ),
    "modalities": _unsupported("models answer in text only", lambda v: v == ["text"]),
    "audio": _unsupported("models answer in text only"),
    "prediction": _unsupported("predicted outputs are not passed to models"),
    "reasoning_effort": _unsupported("models have no reasoning effort setting"),
    "web_search_options": _unsupported("there is no web search"),
}


def _check(
    body: dict[str, Any], table: dict[str, Callable[[str, Any], Any]], required: tuple[str, ...]
) -> dict[str, Any]:
    for name in required:
        if body.get(name) is None:
            raise _bad(name, f"Missing required parameter: '{name}'.", "missing_required_parameter")
    values: dict[str, Any] = {}
    for name, value in body.items():
        check = table.get(name)
        if check is None:
            raise _bad(name, f"Unrecognized request argument supplied: {name}", "unknown_parameter")
        if value is not None:  # null means "not given", as in OpenAI's API
            values[name] = check(name, value)
    return values


def _sampling(values: dict[str, Any], max_tokens: int | None) -> Sampling:
    return Sampling(
        max_tokens=max_tokens,
        temperature=values.get("temperature"),
        top_p=values.get("top_p"),
        n=values.get("n", 1),
        stop=values.get("stop", []),
        seed=values.get("seed"),
        presence_penalty=values.get("presence_penalty"),
        frequency_penalty=values.get("frequency_penalty"),
    )


def _streaming(values: dict[str, Any]) -> tuple[bool, bool]:
    stream = values.get("stream", False)
    options = values.get("stream_options")
    if options is None:
        return stream, False
    if not stream:
        raise _bad("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
    include = options.get("include_usage", False)
    if not isinstance(include, bool):
        raise _wrong_type("stream_options.include_usage", "a boolean", include)
    return stream, include


def parse_completion(body: dict[str, Any]) -> CompletionRequest:
    """Check a ``/v1/completions`` body.

    :raises OpenAIError: 400 naming the field at fault.
    """
    values = _check(body, _COMPLETION, ("model", "prompt"))
    prompt = body["prompt"]
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts:
        raise _wrong_type("prompt", "a string or a non-empty array of strings", prompt)
    if not all(isinstance(p, str) for p in prompts):
        raise _bad(
            "prompt", "Invalid 'prompt': token ids are not supported; the models take text.", "unsupported_parameter"
        )
    sampling = _sampling(values, values.get("max_tokens"))
    best_of = values.get("best_of")
    if best_of is not None and best_of != sampling.n:
        raise _bad(
            "best_of",
            f"'best_of' = {best_of} is not supported by this endpoint: only best_of = n.",
            "unsupported_parameter",
        )
    stream, include_usage = _streaming(values)
    return CompletionRequest(values["model"], prompts, sampling, stream, include_usage, values.get("echo", False))


def _clip(text: str, limit: int = 200) -> str:
    """A client's string as an error echoes it: at most ``limit`` characters (and its length beyond)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


#: the message roles OpenAI's API knows, in the order its error message lists them
ROLES = ("system", "assistant", "user", "function", "tool", "developer")


def _message(index: int, message: Any) -> dict[str, str]:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise _wrong_type(where, "an object", message)
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise _bad(f"{where}.role", f"Missing required parameter: '{where}.role'.", "missing_required_parameter")
    if role not in ROLES:
        known = ", ".join(f"'{r}'" for r in ROLES[:-1])
        raise _bad(
            f"{where}.role", f"Invalid value: '{_clip(role)}'. Supported values are: {known}, and '{ROLES[-1]}'."
        )
    content = message.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise _bad(
                    f"{where}.content[{j}]",
                    f"Invalid '{where}.content[{j}]': only text content parts "
                    '({"type": "text", "text": ...}) are supported.',
                    "unsupported_parameter",
                )
            parts.append(part["text"])
        text = "".join(parts)
    else:
        raise _wrong_type(f"{where}.content", "a string or an array of content parts", content)
    out = {"role": role, "content": text}
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    return out


def parse_chat(body: dict[str, Any]) -> ChatRequest:
    """Check a ``/v1/chat/completions`` body.

    :raises OpenAIError: 400 naming the field at fault.
    """
    values = _check(body, _CHAT, ("model", "messages"))
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _wrong_type("messages", "an array", messages)
    if not messages:
        raise _bad("messages", "Invalid 'messages': empty array. Expected an array with minimum length 1.")
    checked = [_message(i, m) for i, m in enumerate(messages)]
    max_tokens = values.get("max_completion_tokens", values.get("max_tokens"))
    stream, include_usage = _streaming(values)
    return ChatRequest(values["model"], checked, _sampling(values, max_tokens), stream, include_usage)
