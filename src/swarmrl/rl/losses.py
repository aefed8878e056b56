"""Policy losses (a registry). Every loss returns `(loss, metrics)`.

Aggregation is by token mean over the whole minibatch: the loss of a micro-batch is its
sum over generated tokens divided by `num_tokens`, the generated-token count of the whole
minibatch, so accumulating micro-batches gives exactly the minibatch token mean.
"""

from __future__ import annotations

from typing import Callable

import torch

LossFn = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]
LOSSES: dict[str, LossFn] = {}


def register_loss(name: str):
    def deco(fn: LossFn) -> LossFn:
        LOSSES[name] = fn
        return fn
    return deco


def get_loss(name: str) -> LossFn:
    if name not in LOSSES:
        raise KeyError(f"unknown policy loss '{name}'; registered: {sorted(LOSSES)}")
    return LOSSES[name]


@register_loss("ppo_clip")
def ppo_clip_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                  num_tokens: int, clip_eps: float = 0.2) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO-clip surrogate against the behaviour log-probs.

    logp, old_logp, adv, mask: [B, T]; mask is 1 on generated tokens only (invariant 3).
    With one update per batch the ratio is 1 and this is the plain policy gradient
    -adv * logp; the clip matters once minibatches_per_step > 1.
    """
    mask = mask.to(logp.dtype)  # [B, T]
    ratio = torch.exp(logp - old_logp)  # [B, T]
    unclipped = -adv * ratio  # [B, T]
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)  # [B, T]
    per_token = torch.maximum(unclipped, clipped)  # [B, T]
    loss = (per_token * mask).sum() / max(num_tokens, 1)
    with torch.no_grad():
        n = mask.sum().clamp(min=1)
        metrics = {
            "ratio_mean": (ratio * mask).sum() / n,
            "clip_frac": (((ratio - 1.0).abs() > clip_eps).to(logp.dtype) * mask).sum() / n,
            "approx_kl": (((ratio - 1.0) - (logp - old_logp)) * mask).sum() / n,  # k3 estimator
        }
    return loss, metrics


@register_loss("pg")
def pg_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
            num_tokens: int, clip_eps: float = 0.2) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Vanilla REINFORCE-style policy gradient: -adv * logp (token mean). [B, T] inputs."""
    mask = mask.to(logp.dtype)  # [B, T]
    loss = (-adv * logp * mask).sum() / max(num_tokens, 1)
    with torch.no_grad():
        n = mask.sum().clamp(min=1)
        ratio = torch.exp(logp - old_logp)  # [B, T]
        metrics = {"ratio_mean": (ratio * mask).sum() / n, "clip_frac": torch.zeros(()),
                   "approx_kl": (((ratio - 1.0) - (logp - old_logp)) * mask).sum() / n}
    return loss, metrics
