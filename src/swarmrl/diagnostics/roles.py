"""Per-role statistics of the policy's own tokens, accumulated over micro-batches.

Zeng et al. (2026) show that the failures of multi-agent RL are invisible in aggregate
numbers: under a shared policy one role's distribution takes over another's (role capture)
while the global perplexity and KL look fine; under isolated policies one role's adapter
drifts (its perplexity and gradient norm rise) before the accuracy cliff. So every number
here is kept *per role*.

Sums, not means, are accumulated — a micro-batch holds an arbitrary mix of roles and
lengths, and means of means would weight them wrongly — and divided once at the end:

    sums = {}
    for micro in ...:
        sums = merge_sums(sums, role_token_sums(logp, old_logp, ent, mask, roles, clip_eps, adv=adv))
    metrics.update(finalize_role_stats(sums))
"""

from __future__ import annotations

import math
from typing import Iterable

import torch

from swarmrl.rl.losses import clip_removes_gradient

SUM_KEYS = ("tokens", "nll", "entropy", "ratio", "clipped")


def role_token_sums(logp: torch.Tensor, old_logp: torch.Tensor, entropy: torch.Tensor, mask: torch.Tensor,
                    role_of_row: list[str], clip_eps: float | None, *, adv: torch.Tensor,
                    clip_eps_high: float = 0.0, dual_clip: float = 0.0) -> dict[str, dict[str, float]]:
    """Per-role sums over generated tokens of one micro-batch.  logp, old_logp, entropy, mask, adv: [B, T].

    Returns {role: {tokens, nll (sum of -logp), entropy, ratio (sum of exp(logp - old_logp)),
    clipped (count of tokens whose gradient the PPO clip removes, the same set as the loss's
    clip_frac: rl/losses.py `clip_removes_gradient`; 0 when clip_eps is None, a loss that
    does not clip; `clip_eps_high` and `dual_clip` as in the loss)}}. Roles without generated tokens
    are omitted.
    """
    if len(role_of_row) != logp.shape[0]:
        raise ValueError(f"role_of_row has {len(role_of_row)} entries for {logp.shape[0]} rows")
    with torch.no_grad():
        m = mask.to(logp.dtype)  # [B, T]
        ratio = torch.exp(logp - old_logp)  # [B, T]
        clipped = (clip_removes_gradient(ratio, adv, clip_eps, clip_eps_high, dual_clip).to(logp.dtype)
                   if clip_eps is not None
                   else torch.zeros_like(m))  # [B, T]
        per_row = {
            "tokens": m.sum(1),  # [B]
            "nll": (-logp * m).sum(1),  # [B]
            "entropy": (entropy * m).sum(1),  # [B]
            "ratio": (ratio * m).sum(1),  # [B]
            "clipped": (clipped * m).sum(1),  # [B]
        }
        rows = {k: v.tolist() for k, v in per_row.items()}  # one host transfer per statistic
    out: dict[str, dict[str, float]] = {}
    for i, role in enumerate(role_of_row):
        if rows["tokens"][i] <= 0:
            continue
        acc = out.setdefault(role, dict.fromkeys(SUM_KEYS, 0.0))
        for k in SUM_KEYS:
            acc[k] += rows[k][i]
    return out


def merge_sums(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Add two results of `role_token_sums` role by role (a new dict; the inputs are not changed)."""
    out = {role: dict(v) for role, v in a.items()}
    for role, v in b.items():
        acc = out.setdefault(role, dict.fromkeys(SUM_KEYS, 0.0))
        for k in SUM_KEYS:
            acc[k] += v.get(k, 0.0)
    return out


def finalize_role_stats(sums: dict[str, dict[str, float]]) -> dict[str, float]:
    """Token means per role, as `role/<r>/<metric>` metrics keys.

    perplexity = exp(mean nll) of the policy's own sampled tokens (rises when a role's
    distribution drifts away from what it samples), entropy, ratio_mean, clip_frac, tokens.
    """
    out: dict[str, float] = {}
    for role in sorted(sums):
        s = sums[role]
        n = s["tokens"]
        if n <= 0:
            continue
        out[f"role/{role}/perplexity"] = math.exp(s["nll"] / n)
        out[f"role/{role}/entropy"] = s["entropy"] / n
        out[f"role/{role}/ratio_mean"] = s["ratio"] / n
        out[f"role/{role}/clip_frac"] = s["clipped"] / n
        out[f"role/{role}/tokens"] = n
    return out


def grad_norm(parameters: Iterable[torch.nn.Parameter]) -> float:
    """L2 norm over the .grad of the parameters that have one (no clipping, no side effects).

    Call it on one role's adapter parameters (isolated policies) to get `role/<r>/grad_norm`,
    the gradient-amplification signal, before the optimizer step clips or consumes it.
    """
    total = 0.0
    for p in parameters:
        if p.grad is not None:
            total += float(p.grad.detach().double().pow(2).sum())
    return math.sqrt(total)



def observed_multiplicity(rollouts) -> dict[str, float]:
    """Mean agents per role that generated anything, over the rollouts where the role did.
    Where the scenario fixes no multiplicity (the org: the CEO hires) this is the team the
    step actually ran."""
    per: dict[str, list[int]] = {}
    for r in rollouts:
        counts: dict[str, int] = {}
        for a in r.agents.values():
            if any(a.gen_mask):
                counts[a.role] = counts.get(a.role, 0) + 1
        for role, k in counts.items():
            per.setdefault(role, []).append(k)
    return {role: sum(v) / len(v) for role, v in sorted(per.items())}
