"""Chat messages rendered to a prompt with a Jinja chat template (Hugging Face's convention).

The template sees what Hugging Face's ``apply_chat_template`` gives it: ``messages`` (a list of
``{"role", "content"}``), ``add_generation_prompt`` (True), ``bos_token`` and ``eos_token`` (the
model config parameters of those names, else empty), and the helpers ``raise_exception`` and
``strftime_now``. It runs in Jinja's immutable sandbox (a template cannot reach Python
internals or change its inputs). Which template: the model config parameter
``chat_template``, else the endpoint's ``chat_template`` setting (a file), else
:data:`DEFAULT_CHAT_TEMPLATE` (ChatML). Runs in the core process, on the event loop; compiled
templates are cached.
"""

from __future__ import annotations

import datetime
import functools
from typing import Any

__all__ = ["DEFAULT_CHAT_TEMPLATE", "TemplateError", "render"]

#: ChatML, the format of many instruction-tuned models (``<|im_start|>role\ncontent<|im_end|>``).
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class TemplateError(Exception):
    """A template that does not compile (``broken``), or one that refused these messages."""

    def __init__(self, message: str, broken: bool) -> None:
        super().__init__(message)
        self.broken = broken


def _raise_exception(message: str) -> None:
    raise TemplateError(message, broken=False)


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


@functools.lru_cache(maxsize=32)
def _compile(template: str) -> Any:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(template)
    except jinja2.TemplateError as exc:
        raise TemplateError(f"the chat template does not compile: {exc}", broken=True) from None


def render(template: str, messages: list[dict[str, str]], **variables: Any) -> str:
    """The prompt for ``messages``.

    :param variables: more template variables (``bos_token``, ``eos_token``).
    :raises TemplateError: ``broken`` for a template that does not compile; not ``broken`` when
        the template refused the messages (``raise_exception``) or failed on them.
    """
    import jinja2

    compiled = _compile(template)
    try:
        return str(compiled.render(messages=messages, add_generation_prompt=True, **variables))
    except TemplateError:
        raise
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise TemplateError(f"the chat template failed on these messages: {exc}", broken=False) from None
