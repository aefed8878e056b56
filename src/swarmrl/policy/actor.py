"""The LLM actor: the runtime's batch of turn requests -> one sampler call."""

from __future__ import annotations

from typing import Sequence

from swarmrl.policy.sampler import HFSampler, Sample


class LLMActor:
    def __init__(self, sampler: HFSampler, max_new_tokens: int, greedy: bool = False):
        self.sampler = sampler
        self.max_new_tokens = max_new_tokens
        self.greedy = greedy
        self.generated_tokens = 0  # running count, for tokens/s

    def act(self, requests: Sequence, seed: int) -> list[Sample]:
        out = self.sampler.generate([r.prompt for r in requests], self.max_new_tokens, seed, greedy=self.greedy)
        self.generated_tokens += sum(len(s.ids) for s in out)
        return out
