"""The model convention of Triton's LLM backends (vLLM, TensorRT-LLM's ``generate``), read from a model config.

A model serves the OpenAI endpoint when its config has

- a BYTES (``TYPE_STRING``) input ``text_input``: the prompt, shape [1] ([1, 1] when the model batches);
- a BYTES output ``text_output``: one element per choice (``n``), the new text when streaming;

and optionally the inputs ``stream`` (BOOL), ``sampling_parameters`` (BYTES, a JSON object),
``exclude_input_in_output`` (BOOL) and ``return_finish_reason`` / ``return_num_input_tokens`` /
``return_num_output_tokens`` (BOOL), with the outputs ``finish_reason`` (BYTES),
``num_input_tokens`` and ``num_output_tokens`` (integers). ``stream``, ``exclude_input_in_output``
and the sampling parameters that are not inputs of the model travel as request parameters
instead (a list such as ``stop`` as a JSON string), which vLLM's backend reads when its
``sampling_parameters`` input is absent. A model config parameter ``chat_template`` holds the
model's chat template. Runs in the core process, on the event loop.
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tritium.core.api import InferenceRequest, InferenceResponse, InferInput

__all__ = ["ConventionError", "LLMModel", "Step", "TextDecoder"]

TEXT_INPUT = "text_input"
TEXT_OUTPUT = "text_output"
_BOOL_INPUTS = (
    "stream",
    "exclude_input_in_output",
    "return_finish_reason",
    "return_num_input_tokens",
    "return_num_output_tokens",
)
_KNOWN_INPUTS = {
    TEXT_INPUT: "TYPE_STRING",
    "sampling_parameters": "TYPE_STRING",
    **{name: "TYPE_BOOL" for name in _BOOL_INPUTS},
}
_INTEGER_TYPES = {f"TYPE_{k}{b}" for k in ("INT", "UINT") for b in (8, 16, 32, 64)}
_KNOWN_OUTPUTS = {
    TEXT_OUTPUT: {"TYPE_STRING"},
    "finish_reason": {"TYPE_STRING"},
    "num_input_tokens": _INTEGER_TYPES,
    "num_output_tokens": _INTEGER_TYPES,
}


class ConventionError(Exception):
    """The model's config does not follow the convention; the message says how."""


@dataclass(frozen=True, slots=True)
class LLMModel:
    """What the endpoint needs to know about one model that follows the convention.

    :ivar name: the model's name.
    :ivar inputs: the convention's inputs the model declares.
    :ivar outputs: the convention's outputs the model declares.
    :ivar batched: the model batches (``max_batch_size`` > 0): inputs get a batch dimension of 1.
    :ivar decoupled: the model may send several responses per request.
    :ivar chat_template: its ``chat_template`` config parameter, or None.
    """

    name: str
    inputs: frozenset[str]
    outputs: frozenset[str]
    batched: bool
    decoupled: bool
    chat_template: str | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> LLMModel:
        """Read a model config (its JSON form, as ``ServerAPI.model_config`` returns it).

        :raises ConventionError: when ``text_input``/``text_output`` are missing or of another
            type, a convention input has the wrong type, or the model needs an input the
            endpoint does not send.
        """
        name = str(config.get("name", ""))
        inputs: set[str] = set()
        for spec in config.get("input", []):
            input_name, dtype = spec.get("name"), spec.get("data_type")
            if input_name in _KNOWN_INPUTS:
                if dtype != _KNOWN_INPUTS[input_name]:
                    raise ConventionError(f"its input '{input_name}' is {dtype}, not {_KNOWN_INPUTS[input_name]}")
                inputs.add(input_name)
            elif not spec.get("optional", False):
                raise ConventionError(f"it needs the input '{input_name}', which this endpoint does not send")
        outputs: set[str] = set()
        for spec in config.get("output", []):
            output_name, dtype = spec.get("name"), spec.get("data_type")
            if output_name in _KNOWN_OUTPUTS:
                if dtype not in _KNOWN_OUTPUTS[output_name]:
                    raise ConventionError(f"its output '{output_name}' is {dtype}")
                outputs.add(output_name)
        if TEXT_INPUT not in inputs or TEXT_OUTPUT not in outputs:
            raise ConventionError(
                "it has no BYTES input 'text_input' and BYTES output 'text_output' (the LLM model convention)"
            )
        template = (config.get("parameters") or {}).get("chat_template", {}).get("string_value")
        return cls(
            name=name,
            inputs=frozenset(inputs),
            outputs=frozenset(outputs),
            batched=int(config.get("max_batch_size", 0) or 0) > 0,
            decoupled=bool((config.get("model_transaction_policy") or {}).get("decoupled", False)),
            chat_template=template or None,
        )

    def _tensor(self, name: str, value: np.ndarray) -> InferInput:
        return InferInput.from_numpy(name, value.reshape((1, 1) if self.batched else (1,)))

    def request(
        self, prompt: str, sampling: dict[str, Any], *, stream: bool, exclude_input: bool, request_id: str
    ) -> InferenceRequest:
        """The inference request for one prompt.

        :param sampling: the sampling parameters (``sampling_parameters``' JSON).
        :param stream: ask for one response per piece of text.
        :param exclude_input: the text returned leaves the prompt out.
        """
        inputs = [self._tensor(TEXT_INPUT, np.array([prompt.encode("utf-8")], dtype=np.object_))]
        parameters: dict[str, Any] = {}
        flags = {"stream": stream, "exclude_input_in_output": exclude_input}
        for name in ("finish_reason", "num_input_tokens", "num_output_tokens"):
            if name in self.outputs:
                flags[f"return_{name}"] = True
        for name, value in flags.items():
            if name in self.inputs:
                inputs.append(self._tensor(name, np.array([value], dtype=np.bool_)))
            elif not name.startswith("return_"):
                parameters[name] = value
        if "sampling_parameters" in self.inputs:
            text = json.dumps(sampling, separators=(",", ":"))
            inputs.append(self._tensor("sampling_parameters", np.array([text.encode("utf-8")], dtype=np.object_)))
        else:
            for key, value in sampling.items():
                parameters[key] = json.dumps(value) if isinstance(value, list) else value
        return InferenceRequest(self.name, inputs=inputs, parameters=parameters, id=request_id)


@dataclass(slots=True)
class Step:
    """What one response of the model says, per choice.

    :ivar texts: the new text of each choice (bytes, decode with a :class:`TextDecoder`).
    :ivar finish_reasons: each choice's finish reason when it ended with this response, else None.
    :ivar num_input_tokens: the prompt's token count, when the model reports it.
    :ivar num_output_tokens: the tokens of each choice in this response, when reported.
    :ivar final: the model's last response for the request.
    """

    texts: list[bytes]
    finish_reasons: list[str | None] = field(default_factory=list)
    num_input_tokens: int | None = None
    num_output_tokens: list[int] | None = None
    final: bool = False

    @classmethod
    def read(cls, response: InferenceResponse) -> Step:
        """Copy what the endpoint needs out of ``response`` (release the response afterwards)."""
        text = response.output(TEXT_OUTPUT)
        texts = [bytes(t) for t in text.as_numpy().reshape(-1)] if text is not None else []
        reasons: list[str | None] = [None] * len(texts)
        finish = response.output("finish_reason")
        if finish is not None:
            for i, value in enumerate(finish.as_numpy().reshape(-1)[: len(texts)]):
                reason = bytes(value).decode("utf-8", "replace")
                reasons[i] = reason if reason not in ("", "None", "null") else None
        step = cls(texts, reasons, final=response.final)
        num_input = response.output("num_input_tokens")
        if num_input is not None and num_input.as_numpy().size:
            step.num_input_tokens = int(num_input.as_numpy().reshape(-1)[0])
        num_output = response.output("num_output_tokens")
        if num_output is not None:
            step.num_output_tokens = [int(v) for v in num_output.as_numpy().reshape(-1)]
        return step


class TextDecoder:
    """UTF-8 text of one choice from its pieces: a character split between two responses stays whole."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes, final: bool = False) -> str:
        """The text ``data`` completes (with ``final``, also whatever was left over)."""
        return self._decoder.decode(data, final)
