"""An OpenAI-compatible endpoint: ``/v1/models``, ``/v1/completions``, ``/v1/chat/completions``.

An ordinary endpoint plugin, and the worked example of docs/endpoint_plugins.md: it uses only
the hook specification (:mod:`tritium.core.hookspecs`) and the in-process API that
``tritium.core`` exports, like a third-party plugin would. It serves the models that follow
the LLM model convention of Triton's vLLM and TensorRT-LLM backends (see :mod:`.convention`)
with the official ``openai`` clients, on its own port.

Off by default. Enable it in ``plugins.toml``::

    [frontends.openai]
    enabled = true
    port = 9000                  # default 9000 (Triton's OpenAI frontend's)
    address = "0.0.0.0"
    default_max_tokens = 16      # max_tokens when a request gives none
    chat_template = "chat.jinja" # for models whose config has no chat_template (default: ChatML)
    max_request_bytes = 16777216 # the largest request body
    max_choices = 128            # the most choices (prompts × n) in one request

or with ``tritium-server --openai-port 9000`` (and ``--openai-address``), which enable it
too. Needs ``jinja2`` (``pip install 'tritium[openai]'``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from tritium.core.api import Code, ServerAPI, TritonError
from tritium.core.hookspecs import hookimpl

from .app import OpenAIFrontend
from .serving import Serving

__all__ = ["OpenAIFrontend", "tritium_frontend", "DEFAULTS"]

#: The settings of ``[frontends.openai]`` and their defaults.
DEFAULTS: dict[str, Any] = {
    "enabled": False,
    "module": "",
    "port": 9000,
    "address": "0.0.0.0",
    "default_max_tokens": 16,
    "chat_template": "",
    "max_request_bytes": 16 << 20,
    "max_choices": 128,
}


def _setting(settings: Mapping[str, Any], key: str) -> Any:
    value = settings.get(key, DEFAULTS[key])
    default = DEFAULTS[key]
    if isinstance(default, int) and not isinstance(default, bool):
        low, high = (0, 65535) if key == "port" else (1, 1 << 62)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise TritonError(
                Code.INVALID_ARG,
                f"plugins.toml: [frontends.openai] {key} must be an integer from {low} to {high}, got {value!r}",
            )
    elif not isinstance(value, type(default)):
        raise TritonError(
            Code.INVALID_ARG,
            f"plugins.toml: [frontends.openai] {key} must be a {type(default).__name__}, got {value!r}",
        )
    return value


def _chat_template(path: str) -> str | None:
    if not path:
        return None
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise TritonError(Code.INVALID_ARG, f"plugins.toml: [frontends.openai] chat_template: {exc}") from None


@hookimpl
def tritium_frontend(name: str, server: ServerAPI, settings: Mapping[str, Any]) -> OpenAIFrontend | None:
    """Create the OpenAI endpoint (plugin hook; runs while the server starts).

    :raises TritonError: INVALID_ARG for an unknown or malformed setting, or when jinja2 is missing.
    """
    if name != "openai":
        return None
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise TritonError(
            Code.INVALID_ARG,
            f"plugins.toml: [frontends.openai] has unknown settings: "
            f"{', '.join(unknown)} (known: {', '.join(sorted(DEFAULTS))})",
        )
    values = {key: _setting(settings, key) for key in DEFAULTS}
    try:
        import jinja2  # noqa: F401  (chat templates)
    except ImportError:
        raise TritonError(
            Code.INVALID_ARG, "the openai endpoint needs jinja2 for chat templates: pip install 'tritium[openai]'"
        ) from None
    serving = Serving(
        server, values["default_max_tokens"], _chat_template(values["chat_template"]), values["max_choices"]
    )
    network = server.options.network  # the HTTP timeouts apply to this endpoint too
    return OpenAIFrontend(
        serving,
        values["address"],
        values["port"],
        values["max_request_bytes"],
        network.http_body_timeout_s,
        network.http_idle_timeout_s,
    )
