#!/usr/bin/env python3
"""Chat with an LLM served by tritium's OpenAI-compatible endpoint, streaming the answer.

    tritium-server --model-repository=examples/llm_models --openai-port 9000
    python examples/llm_models/chat_client.py "What is the capital of France?"
    The capital of France is Paris.

Uses the official ``openai`` client (``pip install openai``), unchanged: only its base URL
points at tritium.
"""

from __future__ import annotations

import argparse
import sys

import openai


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("question", help="what to ask")
    p.add_argument("--url", default="http://127.0.0.1:9000/v1", help="the endpoint (default: %(default)s)")
    p.add_argument("--model", default="smollm2", help="the model (default: %(default)s)")
    p.add_argument("--max-tokens", type=int, default=128, help="the longest answer, in tokens")
    p.add_argument("--system", help="a system message")
    args = p.parse_args(argv)
    messages = [{"role": "system", "content": args.system}] if args.system else []
    messages.append({"role": "user", "content": args.question})
    client = openai.OpenAI(base_url=args.url, api_key="unused", max_retries=0)
    try:
        stream = client.chat.completions.create(
            model=args.model, messages=messages, max_tokens=args.max_tokens, stream=True
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                sys.stdout.write(chunk.choices[0].delta.content)
                sys.stdout.flush()
    except openai.APIError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
