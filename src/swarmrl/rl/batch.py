"""From rollouts to padded tensors, and token log-probs of a batch under a model.

One training sequence = one agent's whole context in one rollout (header, observations,
its own turns), so a prompt is never duplicated across turns; `gen_mask` marks the tokens
the policy generated, the only ones that get gradient (invariant 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from swarmrl.collective.state import Rollout


@dataclass
class TrainSeq:
    ids: list[int]
    gen_mask: list[int]
    old_logp: list[float]
    advantage: float  # the rollout's flat collective advantage (invariant 4)
    role: str
    rollout: int


def collect_sequences(rollouts: list[Rollout], advantages: torch.Tensor) -> list[TrainSeq]:
    seqs = []
    for r in rollouts:
        for a in r.agents.values():
            if any(a.gen_mask):
                seqs.append(TrainSeq(list(a.ids), list(a.gen_mask), list(a.logprobs),
                                     float(advantages[r.index]), a.role, r.index))
    return seqs


def micro_batches(seqs: list[TrainSeq], micro_batch_tokens: int) -> list[list[TrainSeq]]:
    """Group sequences of similar length so that rows * longest <= micro_batch_tokens."""
    order = sorted(seqs, key=lambda s: len(s.ids))
    out, cur = [], []
    for s in order:
        if cur and (len(cur) + 1) * len(s.ids) > micro_batch_tokens:
            out.append(cur)
            cur = []
        cur.append(s)
    return out + ([cur] if cur else [])


def pad(seqs: list[TrainSeq], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(s.ids) for s in seqs)
    b = len(seqs)
    ids = torch.full((b, width), pad_id, dtype=torch.long)  # [B, T]
    attn = torch.zeros((b, width), dtype=torch.long)  # [B, T]
    mask = torch.zeros((b, width))  # [B, T]
    old = torch.zeros((b, width))  # [B, T]
    adv = torch.zeros((b, width))  # [B, T]
    for i, s in enumerate(seqs):
        n = len(s.ids)
        ids[i, :n] = torch.tensor(s.ids)
        attn[i, :n] = 1
        mask[i, :n] = torch.tensor(s.gen_mask, dtype=torch.float32)
        old[i, :n] = torch.tensor(s.old_logp)
        adv[i, :n] = s.advantage  # flat: the same value on every token of the sequence
    return {"ids": ids, "attn": attn, "mask": mask, "old_logp": old, "adv": adv}


def token_logprobs(model, ids: torch.Tensor, attn: torch.Tensor, with_entropy: bool = True
                   ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(ids[:, t] | ids[:, <t]) for every position; position 0 gets 0.  ids, attn: [B, T]."""
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()  # [B, T-1, V]
    logp_all = torch.log_softmax(logits, dim=-1)  # [B, T-1, V]
    picked = logp_all.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # [B, T-1]
    logp = torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)  # [B, T]
    ent = None
    if with_entropy:
        with torch.no_grad():
            e = -(logp_all.exp() * logp_all).sum(-1)  # [B, T-1]
            ent = torch.cat([torch.zeros_like(e[:, :1]), e], dim=1)  # [B, T]
    return logp, ent
