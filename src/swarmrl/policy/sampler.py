"""Batched sampling that returns token ids and behaviour log-probs.

The runtime hands over every causally safe turn of every rollout at once; this sorts them
by prompt length (less padding) and decodes them together with a KV cache.

Why not `model.generate`: agent turns have very different lengths (a one-token `<wait/>`
next to a 60-token hiring turn), and `generate` keeps computing every row until the
longest one ends. The loop below drops a row from the batch (and from the KV cache) as
soon as it emits the end-of-turn token or a stop string, so the cost of a wave follows
the tokens actually generated (measured: benchmarks/rollout_throughput.py). The returned
log-probs are those of the distribution actually sampled from (temperature applied),
which the PPO ratio needs as its denominator.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from swarmrl.policy.model import Policy


@dataclass
class Sample:
    ids: list[int]  # generated tokens, including the end token when the turn ended normally
    logprobs: list[float] = field(default_factory=list)  # behaviour log-prob of each id
    hit_cap: bool = False  # True when the turn was cut at max_new_tokens


def sample_tokens(logits: torch.Tensor, temperature: float, greedy: bool,
                  generator: torch.Generator | list[torch.Generator] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [B, V] -> (token [B], log-prob of that token under the sampled distribution [B]).

    `generator` may be one generator per row: then each row is sampled by Gumbel-max with its
    own noise, so a row's tokens depend on its own seed only, not on which other rows share
    the batch (rollouts split across workers sample exactly what they sample in one process).
    """
    logp = torch.log_softmax(logits.float() / (1.0 if greedy else temperature), dim=-1)  # [B, V]
    if greedy:
        tok = logp.argmax(dim=-1)  # [B]
    elif isinstance(generator, list):
        u = torch.stack([torch.rand(logp.shape[-1], generator=g, device=logp.device) for g in generator])  # [B, V]
        tok = (logp - torch.log(-torch.log(u))).argmax(dim=-1)  # [B] argmax(logp + Gumbel) ~ softmax(logp)
    else:
        tok = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)  # [B]
    return tok, logp.gather(-1, tok.unsqueeze(-1)).squeeze(-1)


class HFSampler:
    def __init__(self, policy: Policy, temperature: float = 1.0, max_batch_sequences: int = 256,
                 stop_strings: list[str] | None = None):
        if temperature <= 0:
            raise ValueError(f"sampler temperature must be > 0 (got {temperature}); use greedy=True instead")
        self.policy = policy
        self.temperature = temperature
        self.max_batch_sequences = max_batch_sequences
        self.stop_strings = stop_strings or []

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], max_new_tokens: int, seed: int,
                 greedy: bool = False, adapters: list[str] | None = None,
                 row_seeds: list[int] | None = None) -> list[Sample]:
        """`adapters`: the LoRA adapter of each prompt (isolated policies: one batch, mixed adapters).
        `row_seeds`: one sampling seed per prompt (batch-independent sampling; `seed` is then unused)."""
        out: list[Sample | None] = [None] * len(prompts)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        model = self.policy.model
        was_training = model.training
        model.eval()
        try:
            for c, start in enumerate(range(0, len(order), self.max_batch_sequences)):
                idx = order[start:start + self.max_batch_sequences]
                samples = self._generate_chunk([prompts[i] for i in idx], max_new_tokens, seed * 1009 + c, greedy,
                                               [adapters[i] for i in idx] if adapters is not None else None,
                                               [row_seeds[i] for i in idx] if row_seeds is not None else None)
                for i, s in zip(idx, samples):
                    out[i] = s
        finally:
            model.train(was_training)
        return out  # type: ignore[return-value]

    def _stopped(self, ids: list[int]) -> bool:
        """Does the reply end with a stop string? (Chat models; the tiny model has an end token.)"""
        if not self.stop_strings:
            return False
        tail = self.policy.tokenizer.decode(ids[-16:], skip_special_tokens=False)
        return any(tail.endswith(s) for s in self.stop_strings)

    def _generate_chunk(self, prompts: list[list[int]], max_new_tokens: int, seed: int,
                        greedy: bool, adapters: list[str] | None,
                        row_seeds: list[int] | None = None) -> list[Sample]:
        p = self.policy
        device = p.model.device
        B, width = len(prompts), max(len(x) for x in prompts)
        # Left padding: every row's next token is predicted at the same (last) column.
        ids = torch.full((B, width), p.pad_id, dtype=torch.long)  # [B, L]
        attn = torch.zeros((B, width), dtype=torch.long)  # [B, L]
        for row, x in enumerate(prompts):
            ids[row, width - len(x):] = torch.tensor(x, dtype=torch.long)
            attn[row, width - len(x):] = 1
        ids, attn = ids.to(device), attn.to(device)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)  # [B, L] positions ignore the padding
        gen = torch.Generator(device=device).manual_seed(seed)
        row_gens = None if row_seeds is None else [torch.Generator(device=device).manual_seed(x) for x in row_seeds]
        cache = DynamicCache()
        # transformers 5 renamed `past_key_values` to `cache`; remote-code models may still use the old name.
        base = p.model.get_base_model() if hasattr(p.model, "get_base_model") else p.model
        kw = "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
        extra = (lambda rows: {"adapter_names": [adapters[r] for r in rows]}) if adapters else (lambda rows: {})
        out = p.model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1,
                      **{kw: cache}, **extra(range(B)))
        logits = out.logits[:, -1]  # [B, V]
        active = torch.arange(B, device=device)  # [A] original row of each batch row still decoding
        next_pos = pos[:, -1] + 1  # [A]
        toks: list[list[int]] = [[] for _ in range(B)]
        lps: list[list[float]] = [[] for _ in range(B)]
        for t in range(max_new_tokens):
            gens = gen if row_gens is None else [row_gens[r] for r in active.tolist()]
            tok, lp = sample_tokens(logits, self.temperature, greedy, gens)  # [A], [A]
            keep = []
            for j, (row, k, v) in enumerate(zip(active.tolist(), tok.tolist(), lp.tolist())):
                toks[row].append(k)
                lps[row].append(v)
                if k != p.end_id and not self._stopped(toks[row]):
                    keep.append(j)
            if not keep or t == max_new_tokens - 1:
                break
            if len(keep) < len(active):  # drop finished rows from the batch and the KV cache
                sel = torch.tensor(keep, device=device)
                active, tok, next_pos, attn = active[sel], tok[sel], next_pos[sel], attn[sel]
                cache.batch_select_indices(sel)
            attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)  # [A, L+t+1]
            out = p.model(input_ids=tok.unsqueeze(-1), attention_mask=attn, position_ids=next_pos.unsqueeze(-1),
                          use_cache=True, logits_to_keep=1, **{kw: cache}, **extra(active.tolist()))
            logits = out.logits[:, -1]
            next_pos = next_pos + 1
        return [Sample(ids=toks[r], logprobs=lps[r],
                       hit_cap=toks[r][-1] != p.end_id and not self._stopped(toks[r])) for r in range(B)]
