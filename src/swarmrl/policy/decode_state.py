"""The plain data of a DecodeStream (policy/sampler.py): its settings and its rows."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class DecodeSettings:
    """What a DecodeStream decodes with (HFSampler.stream fills it from the sampler and policy)."""

    max_new_tokens: int  # a turn is cut (hit_cap) after this many tokens
    temperature: float
    greedy: bool
    end_id: int  # the token that ends a turn
    pad_id: int
    max_batch_sequences: int  # rows decoded at once; further prompts wait in the queue
    prefill_overhead_tokens: int  # one forward call's fixed cost in tokens (kvcache.length_buckets)
    admit_fraction: float  # queued prompts join a running batch once they are this many x its rows
    batched_adapters: bool = True  # mixed LoRA adapters in batched matmuls (policy/lora_batch.py)
    draft_tokens: int = 0  # guessed tokens verified per row and decode call (policy/speculative.py)


@dataclass
class Row:
    """One request of a DecodeStream: queued, then a batch row until its turn ends."""

    tag: object  # the caller's name for it, returned with its Sample
    prompt: list[int]
    key: object  # the agent whose next prompt extends this one (its KV cache is saved), or None
    adapter: str | None  # the LoRA adapter it runs through, or None
    generator: torch.Generator | None  # its own sampling noise (row seed); None: the stream's
    toks: list[int] = field(default_factory=list)  # generated so far
    lps: list[float] = field(default_factory=list)  # behaviour log-prob of each token
