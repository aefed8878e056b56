"""Shared prompt prefixes in the sampler (sampler.share_prompts).

Agents of different rollouts often read the same first tokens: every rollout of a group shows
the CEO the same header and problem, and an expert hired under the same name in two rollouts of
one problem reads the same header and often the same brief. A `PromptPool` keeps the keys and
values of the prompts a DecodeStream prefilled; a later prompt that starts with at least
`MIN_SHARED` of the same tokens runs only its remainder on top of them, through the same path
that continues an agent's own previous turn (policy/sampler.py). Its logits are a full
prefill's up to float rounding (the kernels see other shapes).

A pool lives as long as its stream: one rollout batch under one set of weights, never across an
update. Keys include the LoRA adapter, whose keys/values differ for the same tokens.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple

import torch

MIN_SHARED = 16  # a shorter common prefix saves less than the bookkeeping costs


class Past(NamedTuple):
    """Keys/values a row's prompt starts with: its agent's previous turn, or a pooled prompt."""

    tokens: list[int]
    kv: list  # per layer (keys, values) [kv_heads, len(tokens), head_dim]
    pooled: bool  # from the PromptPool (another row's prompt), not the agent's own turn


@dataclass
class Entry:
    key: tuple  # (adapter, first MIN_SHARED tokens): its place in the index
    tokens: list[int]
    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values) [kv_heads, L, head_dim]
    nbytes: int


def common_prefix(a: list[int], b: list[int], cap: int) -> int:
    """How many leading tokens a and b share, at most `cap`."""
    n = 0
    while n < cap and a[n] == b[n]:
        n += 1
    return n


class PromptPool:
    """Prefilled prompts, looked up by their first MIN_SHARED tokens; least recently used first."""

    def __init__(self):
        self.entries: OrderedDict[int, Entry] = OrderedDict()
        self.index: dict[tuple, list[int]] = {}  # (adapter, first MIN_SHARED tokens) -> entry ids
        self.bytes = 0
        self.hits = self.shared_tokens = 0  # lookups served, and the prompt tokens they did not run
        self._next_id = 0

    @staticmethod
    def lead(adapter: str | None, tokens: list[int]) -> tuple | None:
        """Where a prompt is indexed: its adapter and first MIN_SHARED tokens; None when it is too
        short to share that many and keep one token to run."""
        return (adapter, tuple(tokens[:MIN_SHARED])) if len(tokens) > MIN_SHARED else None

    def covers(self, adapter: str | None, tokens: list[int]) -> bool:
        """True when the prompt is too short to pool or an entry already starts with all of it."""
        key = self.lead(adapter, tokens)
        return key is None or any(
            len(self.entries[i].tokens) >= len(tokens) and common_prefix(self.entries[i].tokens, tokens, len(tokens))
            == len(tokens) for i in self.index.get(key, ()))

    def add(self, adapter: str | None, tokens: list[int], kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Keep a prefilled prompt (kv: per layer [kv_heads, len(tokens), head_dim]); call
        `covers` first, which says when keeping it would add nothing."""
        key = self.lead(adapter, tokens)
        entry = Entry(key, list(tokens), kv, sum(k.nbytes + v.nbytes for k, v in kv))
        self.entries[self._next_id] = entry
        self.index.setdefault(key, []).append(self._next_id)
        self._next_id += 1
        self.bytes += entry.nbytes

    def longest(self, adapter: str | None, prompt: list[int]) -> tuple[list[int], list] | None:
        """The longest stored prefix of `prompt` that leaves it at least one token to run (its
        last token's logits are the ones sampled from), as (tokens, per-layer (keys, values)
        [kv_heads, n, head_dim]); None when no entry shares MIN_SHARED tokens with it."""
        best, best_id = 0, None
        for i in self.index.get(self.lead(adapter, prompt), ()):
            tokens = self.entries[i].tokens
            n = common_prefix(tokens, prompt, min(len(tokens), len(prompt) - 1))
            if n > best:
                best, best_id = n, i
        if best < MIN_SHARED:
            return None
        self.entries.move_to_end(best_id)
        self.hits += 1
        self.shared_tokens += best
        entry = self.entries[best_id]
        return entry.tokens[:best], [(k[:, :best], v[:, :best]) for k, v in entry.kv]

    def evict(self) -> bool:
        """Drop the least recently used entry; False when the pool is empty."""
        if not self.entries:
            return False
        eid, entry = self.entries.popitem(last=False)
        ids = self.index[entry.key]
        ids.remove(eid)
        if not ids:
            del self.index[entry.key]
        self.bytes -= entry.nbytes
        return True
