"""Batched sampling that returns token ids and behaviour log-probs.

The runtime hands over every causally safe turn of every rollout at once; this sorts them
by prompt length (less padding), generates in chunks with `model.generate`, stops each
sequence at the end-of-turn token (or at stop strings, for chat models), and returns the
log-probability of each sampled token under the sampling distribution, which the PPO
ratio needs as its denominator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from swarmrl.policy.model import Policy


@dataclass
class Sample:
    ids: list[int]  # generated tokens, including the end token when the turn ended normally
    logprobs: list[float] = field(default_factory=list)  # behaviour log-prob of each id
    hit_cap: bool = False  # True when the turn was cut at max_new_tokens


class HFSampler:
    def __init__(self, policy: Policy, temperature: float = 1.0, max_batch_sequences: int = 256,
                 stop_strings: list[str] | None = None):
        self.policy = policy
        self.temperature = temperature
        self.max_batch_sequences = max_batch_sequences
        self.stop_strings = stop_strings

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], max_new_tokens: int, seed: int,
                 greedy: bool = False) -> list[Sample]:
        out: list[Sample | None] = [None] * len(prompts)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        model = self.policy.model
        was_training = model.training
        model.eval()
        try:
            for c, start in enumerate(range(0, len(order), self.max_batch_sequences)):
                idx = order[start:start + self.max_batch_sequences]
                samples = self._generate_chunk([prompts[i] for i in idx], max_new_tokens, seed * 1009 + c, greedy)
                for i, s in zip(idx, samples):
                    out[i] = s
        finally:
            model.train(was_training)
        return out  # type: ignore[return-value]

    def _generate_chunk(self, prompts: list[list[int]], max_new_tokens: int, seed: int,
                        greedy: bool) -> list[Sample]:
        p = self.policy
        device = p.model.device
        width = max(len(x) for x in prompts)
        # Left padding: generation appends on the right, so all prompts must end together.
        input_ids = torch.full((len(prompts), width), p.pad_id, dtype=torch.long)  # [B, L]
        attention = torch.zeros((len(prompts), width), dtype=torch.long)  # [B, L]
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids):] = 1
        torch.manual_seed(seed)
        kwargs = dict(stop_strings=self.stop_strings, tokenizer=p.tokenizer) if self.stop_strings else {}
        gen = p.model.generate(
            input_ids=input_ids.to(device), attention_mask=attention.to(device),
            do_sample=not greedy, temperature=self.temperature if not greedy else None,
            top_k=None, top_p=None, max_new_tokens=max_new_tokens,
            eos_token_id=p.end_id, pad_token_id=p.pad_id,
            output_scores=True, return_dict_in_generate=True, **kwargs)
        new = gen.sequences[:, width:].cpu()  # [B, G]
        scores = torch.stack(gen.scores, dim=1).float().cpu()  # [B, G, V] processed (temperature-scaled) logits
        logp = torch.log_softmax(scores, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)  # [B, G]
        samples = []
        for row in range(len(prompts)):
            ids = new[row].tolist()
            n = ids.index(p.end_id) + 1 if p.end_id in ids else len(ids)
            samples.append(Sample(ids=ids[:n], logprobs=logp[row, :n].tolist(),
                                  hit_cap=p.end_id not in ids[:n]))
        return samples
