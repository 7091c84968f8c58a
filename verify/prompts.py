"""
Prompts fitted to an exact token count with the server's own template and tokenizer.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .client import ServerClient

# A deterministic haystack: the passkey "noise" filler (RULER / landmark-attention style).
FILLER = ("The grass is green. The sky is blue. The sun is yellow. Here we go. "
          "There and back again. ")
NEEDLE = "The special magic number is: {value}."
QUESTION = ("What is the special magic number mentioned in the text above? "
            "Answer with the number only.")

Messages = list[dict[str, str]]


class PromptFitError(RuntimeError):
    """No prompt with exactly the requested token count could be built."""


def fit(client: ServerClient, build: Callable[[int, int], Messages], target_tokens: int,
        max_units: int = 1_000_000) -> tuple[Messages, int]:
    """Find messages of exactly `target_tokens` prompt tokens.

    `build(units, pad)` returns messages for `units` filler sentences plus `pad` one-token
    pad words. Binary search on units, then adjust the pad until the count is exact.
    """
    count = client.count_prompt_tokens
    lo, hi = 0, 1
    while count(build(hi, 0)) <= target_tokens:
        lo, hi = hi, hi * 2
        if hi > max_units:
            raise PromptFitError(f"{target_tokens} tokens need more than {max_units} units")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(build(mid, 0)) <= target_tokens:
            lo = mid
        else:
            hi = mid
    pad = target_tokens - count(build(lo, 0))
    for _ in range(8):
        n = count(build(lo, pad))
        if n == target_tokens:
            return build(lo, pad), n
        pad += target_tokens - n
        if pad < 0:
            lo, pad = max(lo - 1, 0), 0
    raise PromptFitError(f"could not hit exactly {target_tokens} tokens (last: {n})")


def filler(units: int, pad: int) -> str:
    return FILLER * units + " x" * pad


def nonce(seed: int) -> str:
    rng = random.Random(seed)
    return "Request " + "".join(rng.choice("abcdefghjkmnpqrstuvwxyz") for _ in range(12)) + "."


def long_prompt(client: ServerClient, target_tokens: int, seed: int) -> tuple[Messages, int]:
    """A user message of exactly target_tokens prompt tokens, starting with a unique nonce."""
    head = nonce(seed)

    def build(units: int, pad: int) -> Messages:
        return [{"role": "user", "content": f"{head} {filler(units, pad)}\nContinue the text."}]

    return fit(client, build, target_tokens)


def needle_prompt(client: ServerClient, target_tokens: int, depth: float, value: str,
                  prefill: str | None) -> tuple[Messages, int]:
    """A haystack of exactly target_tokens with the needle at `depth` (0..1) of the filler."""

    def build(units: int, pad: int) -> Messages:
        before = int(round(units * depth))
        text = (filler(before, 0) + NEEDLE.format(value=value) + " "
                + filler(units - before, pad))
        msgs = [{"role": "user", "content": f"{text}\n\n{QUESTION}"}]
        if prefill:
            msgs.append({"role": "assistant", "content": prefill})
        return msgs

    return fit(client, build, target_tokens)
