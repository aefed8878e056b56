"""Advantage estimators (a registry: every entry has the same signature).

An estimator maps per-rollout scores to one scalar per rollout. The trainer then applies
that scalar flat to every generated token of every agent of the rollout (RLCR's "one flat
collective advantage", DESIGN.md invariant 4): no per-agent credit assignment.
"""

from __future__ import annotations

from typing import Callable

import torch

AdvantageFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
ADVANTAGES: dict[str, AdvantageFn] = {}


def register_advantage(name: str):
    def deco(fn: AdvantageFn) -> AdvantageFn:
        ADVANTAGES[name] = fn
        return fn
    return deco


def get_advantage(name: str) -> AdvantageFn:
    if name not in ADVANTAGES:
        raise KeyError(f"unknown advantage estimator '{name}'; registered: {sorted(ADVANTAGES)}")
    return ADVANTAGES[name]


def _group_stats(scores: torch.Tensor, groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-rollout mean and (Bessel-corrected, as verl's GRPO) std of its group."""
    mean = torch.zeros_like(scores)  # [N]
    std = torch.zeros_like(scores)  # [N]
    for g in torch.unique(groups):
        sel = groups == g  # [N] bool
        mean[sel] = scores[sel].mean()
        std[sel] = scores[sel].std() if int(sel.sum()) > 1 else 0.0
    return mean, std


@register_advantage("collective")
def collective_advantage(scores: torch.Tensor, groups: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """(score - group mean) / (group std + eps) for each rollout.  scores, groups: [N] -> [N].

    A group is all rollouts of the same problem. A group whose rollouts all scored the
    same carries no signal and gets advantage 0 (not a division blow-up).
    """
    mean, std = _group_stats(scores, groups)  # [N], [N]
    return (scores - mean) / (std + eps)  # [N]; exactly 0 where all scores are equal
