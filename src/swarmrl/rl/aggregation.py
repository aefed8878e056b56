"""How much gradient mass each generated token gets (loss aggregation).

The loss of a minibatch is `sum_s w_s * sum_t per_token_loss[s, t]` over its sequences s
(one sequence = one agent's trajectory in one rollout) and their generated tokens t. The
choice of w_s is what Zeng et al. (2026) identify as a cause of *role capture* under a
shared policy: with a token mean, a role that writes 10x more tokens gets 10x the gradient
mass, and its distribution leaks into the other roles' slots. Modes (`rl.aggregation`, a
registry of denominators):

- `token_mean`:    w_s = 1 / sum_s' n_s'            every token equal (the verl/DAPO default).
- `seq_mean`:      w_s = 1 / (S * n_s)               every sequence equal (the original GRPO).
- `role_balanced`: w_s = 1 / (R * n_role(s))         every role type gets total mass 1/R, split
                                                     by tokens inside the role.
- `dr_grpo`:       w_s = 1 / (S * DR_GRPO_TOKENS)    a fixed divisor per token (Dr. GRPO, Liu et al.
                                                     2025): a long sequence is not scaled down.

A mode is a pure function `(n [S] float token counts, has [S] bool, roles [S] long) ->
denom [S]` and w_s = 1 / denom_s where `has`; a `package.module:fn` or `path/file.py:fn`
spec loads a user's mode of that signature.

`multiplicity` (the `multiplicity_normalized` mitigation for isolated policies) divides w_s
by the number of agents of the sequence's role in the workflow: three generators receiving
the same outcome reward produce three aligned gradients (*gradient amplification*), and
dividing by 3 gives the role the gradient of one agent.

A sequence without generated tokens gets weight 0 and is not counted in S or R (so each
mode's total mass sum_s w_s * n_s stays 1 before the multiplicity division).
"""

from __future__ import annotations

from typing import Callable

import torch

from swarmrl.registry import Registry

AggregationFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
AGGREGATIONS: Registry[AggregationFn] = Registry("loss aggregation", classes=False)


@AGGREGATIONS.register("token_mean")
def token_mean(n: torch.Tensor, has: torch.Tensor, roles: torch.Tensor) -> torch.Tensor:
    """Every generated token of the minibatch equal: the total token count.  [S] -> [S]."""
    return n.sum().expand_as(n)  # [S]


@AGGREGATIONS.register("seq_mean")
def seq_mean(n: torch.Tensor, has: torch.Tensor, roles: torch.Tensor) -> torch.Tensor:
    """Every sequence with tokens equal: S * n_s.  [S] -> [S]."""
    safe_n = torch.where(has, n, torch.ones_like(n))  # [S] avoids 1/0 on empty sequences
    return has.sum().to(n.dtype) * safe_n  # [S]


@AGGREGATIONS.register("role_balanced")
def role_balanced(n: torch.Tensor, has: torch.Tensor, roles: torch.Tensor) -> torch.Tensor:
    """Every role type with tokens equal, tokens equal inside a role: R * n_role(s).  [S] -> [S]."""
    _, inv = torch.unique(roles, return_inverse=True)  # [S] in 0..G-1
    g = int(inv.max()) + 1 if inv.numel() else 0
    role_tokens = torch.zeros(g, dtype=n.dtype).index_add_(0, inv, n)  # [G]
    num_roles = (role_tokens > 0).sum().to(n.dtype)  # scalar: roles with any generated token
    return num_roles * role_tokens[inv]  # [S]


# Dr. GRPO's constant L, the "max completion length". TRL 1.10 `loss_type="dr_grpo"` divides the
# summed token losses by (completions x max_completion_length); verl 0.8 `seq-mean-token-sum-norm`
# by `loss_scale_factor` (default: the padded response length). Any constant gives the same
# direction; it only rescales the learning rate. 1024 covers one agent's generated tokens at the
# defaults (sampler.max_turns_per_agent 12 x max_new_tokens_per_turn 64 = 768) and keeps
# lr comparable with seq_mean there. For another constant, register your own denominator
# (`lambda n, has, roles: has.sum() * L`, a plugin spec in rl.aggregation).
DR_GRPO_TOKENS = 1024


@AGGREGATIONS.register("dr_grpo")
def dr_grpo(n: torch.Tensor, has: torch.Tensor, roles: torch.Tensor) -> torch.Tensor:
    """A fixed per-token divisor: S * DR_GRPO_TOKENS, S = sequences with tokens (TRL's rows).  [S] -> [S]."""
    return (has.sum().to(n.dtype) * DR_GRPO_TOKENS).expand_as(n)  # [S]


def sequence_weights(token_counts: torch.Tensor, roles: torch.Tensor, mode: str,
                     multiplicity: torch.Tensor | None = None) -> torch.Tensor:
    """Per-token weight w_s of each sequence of one minibatch.  token_counts, roles: [S] -> [S] float.

    token_counts: generated tokens per sequence; roles: role-type id per sequence;
    mode: a registered aggregation name or a plugin spec; multiplicity: [S] agents of that
    role in the workflow (>= 1), or None.
    """
    denominator = AGGREGATIONS.get(mode)
    if token_counts.shape != roles.shape or token_counts.dim() != 1:
        raise ValueError(f"token_counts and roles must be 1-D of one length; got {tuple(token_counts.shape)}, "
                         f"{tuple(roles.shape)}")
    n = token_counts.to(torch.float32)  # [S]
    has = n > 0  # [S] sequences that carry loss at all
    denom = denominator(n, has, roles)  # [S]
    w = torch.where(has, 1.0 / torch.where(has, denom, torch.ones_like(denom)), torch.zeros_like(n))  # [S]

    if multiplicity is not None:
        m = multiplicity.to(n.dtype)  # [S]
        if m.shape != n.shape:
            raise ValueError(f"multiplicity must have shape {tuple(n.shape)}; got {tuple(m.shape)}")
        if bool((m < 1).any()):
            raise ValueError("multiplicity must be >= 1 for every sequence")
        w = w / m  # [S]
    return w


def token_weights(mask: torch.Tensor, seq_weights: torch.Tensor) -> torch.Tensor:
    """The `weights` argument of a policy loss: mask * w_s.  mask: [B, T], seq_weights: [B] -> [B, T]."""
    return mask.to(seq_weights.dtype) * seq_weights[:, None]  # [B, T]
