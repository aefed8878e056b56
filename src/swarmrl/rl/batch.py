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
    advantage: float  # set by the trainer's estimator; flat over the sequence's tokens (invariant 4)
    role: str
    rollout: int
    group: int = 0  # the problem: advantages are normalised among rollouts of the same group
    multiplicity: int = 1  # agents of this role in its rollout that generated tokens


def collect_sequences(rollouts: list[Rollout]) -> list[TrainSeq]:
    """One sequence per agent that generated anything, in rollout then agent order."""
    seqs = []
    for r in rollouts:
        active = [a for a in r.agents.values() if any(a.gen_mask)]
        for a in active:
            seqs.append(TrainSeq(list(a.ids), list(a.gen_mask), list(a.logprobs), 0.0, a.role, r.index, r.group,
                                 multiplicity=sum(1 for b in active if b.role == a.role)))
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


def token_logprobs(model, ids: torch.Tensor, attn: torch.Tensor, with_entropy: bool = True, *,
                   temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p_T(ids[:, t] | ids[:, <t]) for every position; position 0 gets 0.  ids, attn: [B, T].

    p_T = softmax(logits / temperature), the distribution the sampler draws from
    (policy/sampler.py `sample_tokens` divides the same float32 logits the same way), so the
    PPO ratio is exactly 1 on the policy that sampled. The entropy is that of p_T too.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 (got {temperature})")
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()  # [B, T-1, V]
    if temperature != 1.0:
        logits = logits / temperature  # [B, T-1, V]
    logp_all = torch.log_softmax(logits, dim=-1)  # [B, T-1, V]
    picked = logp_all.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # [B, T-1]
    logp = torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)  # [B, T]
    ent = None
    if with_entropy:
        with torch.no_grad():
            e = -(logp_all.exp() * logp_all).sum(-1)  # [B, T-1]
            ent = torch.cat([torch.zeros_like(e[:, :1]), e], dim=1)  # [B, T]
    return logp, ent
