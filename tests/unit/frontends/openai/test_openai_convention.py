"""The OpenAI endpoint's model convention and chat templates, without a server."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tritium.core import InferenceResponse, InferInput, OutputTensor
from tritium.frontends.openai.chat_template import DEFAULT_CHAT_TEMPLATE, TemplateError, render
from tritium.frontends.openai.convention import ConventionError, LLMModel, Step, TextDecoder


def _config(inputs: list[tuple[str, str, bool]], outputs: list[tuple[str, str]], **extra: object) -> dict:
    return {
        "name": "m",
        "input": [{"name": n, "data_type": t, "dims": [1], "optional": o} for n, t, o in inputs],
        "output": [{"name": n, "data_type": t, "dims": [-1]} for n, t in outputs],
        **extra,
    }


VLLM = _config(
    [
        ("text_input", "TYPE_STRING", False),
        ("stream", "TYPE_BOOL", True),
        ("sampling_parameters", "TYPE_STRING", True),
        ("exclude_input_in_output", "TYPE_BOOL", True),
        ("return_num_input_tokens", "TYPE_BOOL", True),
    ],
    [("text_output", "TYPE_STRING"), ("num_input_tokens", "TYPE_UINT32")],
    max_batch_size=0,
    model_transaction_policy={"decoupled": True},
    parameters={"chat_template": {"string_value": "{{ messages[0]['content'] }}"}},
)


def _values(request_input: InferInput) -> list:
    data = bytes(request_input.data)  # type: ignore[arg-type]
    if request_input.datatype == "BOOL":
        return [bool(b) for b in data]
    out, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at : at + 4], "little")
        out.append(data[at + 4 : at + 4 + size].decode())
        at += 4 + size
    return out


def test_a_vllm_model_config_follows_the_convention() -> None:
    llm = LLMModel.from_config(VLLM)
    assert (llm.name, llm.batched, llm.decoupled, llm.chat_template) == (
        "m",
        False,
        True,
        "{{ messages[0]['content'] }}",
    )
    request = llm.request("Hi", {"max_tokens": 4, "stop": ["x"]}, stream=True, exclude_input=True, request_id="r1")
    assert (request.model_name, request.id, request.parameters) == ("m", "r1", {})
    assert [(i.name, i.datatype, i.shape, _values(i)) for i in request.inputs] == [
        ("text_input", "BYTES", [1], ["Hi"]),
        ("stream", "BOOL", [1], [True]),
        ("exclude_input_in_output", "BOOL", [1], [True]),
        ("return_num_input_tokens", "BOOL", [1], [True]),
        ("sampling_parameters", "BYTES", [1], ['{"max_tokens":4,"stop":["x"]}']),
    ]


def test_without_those_inputs_the_settings_travel_as_request_parameters() -> None:
    llm = LLMModel.from_config(
        _config([("text_input", "TYPE_STRING", False)], [("text_output", "TYPE_STRING")], max_batch_size=8)
    )
    request = llm.request(
        "Hi", {"max_tokens": 4, "stop": ["x", "y"], "seed": 3}, stream=False, exclude_input=True, request_id=""
    )
    assert [(i.name, i.shape) for i in request.inputs] == [("text_input", [1, 1])]  # batched: a batch of one
    assert request.parameters == {
        "stream": False,
        "exclude_input_in_output": True,
        "max_tokens": 4,
        "stop": '["x", "y"]',
        "seed": 3,
    }


@pytest.mark.parametrize(
    "config, message",
    [
        (
            _config([("text_input", "TYPE_STRING", False)], []),
            "it has no BYTES input 'text_input' and BYTES output 'text_output' (the LLM model convention)",
        ),
        (
            _config([("text_input", "TYPE_FP32", False)], [("text_output", "TYPE_STRING")]),
            "its input 'text_input' is TYPE_FP32, not TYPE_STRING",
        ),
        (
            _config(
                [("text_input", "TYPE_STRING", False), ("stream", "TYPE_INT32", True)], [("text_output", "TYPE_STRING")]
            ),
            "its input 'stream' is TYPE_INT32, not TYPE_BOOL",
        ),
        (
            _config(
                [("text_input", "TYPE_STRING", False), ("max_tokens", "TYPE_INT32", False)],
                [("text_output", "TYPE_STRING")],
            ),
            "it needs the input 'max_tokens', which this endpoint does not send",
        ),
        (
            _config(
                [("text_input", "TYPE_STRING", False)],
                [("text_output", "TYPE_STRING"), ("num_output_tokens", "TYPE_FP32")],
            ),
            "its output 'num_output_tokens' is TYPE_FP32",
        ),
    ],
)
def test_configs_outside_the_convention_say_why(config: dict, message: str) -> None:
    with pytest.raises(ConventionError) as info:
        LLMModel.from_config(config)
    assert str(info.value) == message


def test_a_response_is_read_per_choice() -> None:
    texts = InferInput.from_numpy("t", np.array([b"Paris", b"Lyon"], dtype=np.object_))
    reasons = InferInput.from_numpy("f", np.array([b"None", b"length"], dtype=np.object_))
    response = InferenceResponse(
        "m",
        "1",
        outputs=[
            OutputTensor("text_output", "BYTES", [2], bytes(texts.data)),  # type: ignore[arg-type]
            OutputTensor("finish_reason", "BYTES", [2], bytes(reasons.data)),  # type: ignore[arg-type]
            OutputTensor("num_input_tokens", "UINT32", [1], np.array([5], np.uint32).tobytes()),
            OutputTensor("num_output_tokens", "UINT32", [2], np.array([1, 2], np.uint32).tobytes()),
        ],
        final=False,
    )
    step = Step.read(response)
    assert (step.texts, step.finish_reasons, step.num_input_tokens, step.num_output_tokens, step.final) == (
        [b"Paris", b"Lyon"],
        [None, "length"],
        5,
        [1, 2],
        False,
    )


def test_a_character_split_between_responses_stays_whole() -> None:
    decoder = TextDecoder()
    data = "é!".encode()
    assert (decoder.feed(data[:1]), decoder.feed(data[1:]), decoder.feed(b"\xff", final=True)) == ("", "é!", "\ufffd")


def test_chat_templates() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert render(DEFAULT_CHAT_TEMPLATE, messages) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    with pytest.raises(TemplateError) as refused:
        render("{{ raise_exception('roles must alternate') }}", messages)
    assert (str(refused.value), refused.value.broken) == ("roles must alternate", False)
    with pytest.raises(TemplateError) as broken:
        render("{% for %}", messages)
    assert broken.value.broken and str(broken.value).startswith("the chat template does not compile: ")
    with pytest.raises(TemplateError) as sandboxed:  # the sandbox keeps a template away from Python internals
        render("{{ messages.__class__.__mro__ }}", messages)
    assert not sandboxed.value.broken
    assert json.loads(render("{{ messages | tojson }}", messages)) == messages
