"""Policy losses (a registry: `rl.loss` names a built-in, `ppo_clip` or `pg`, or a
`package.module:fn` / `path/file.py:fn` spec of a user's loss). Every loss returns
`(loss, metrics)` and has the signature

    loss_fn(logp [B, T], old_logp [B, T], adv [B, T], weights [B, T], *, clip_eps=0.2)

`make_loss(rl_cfg)` binds `rl.clip_eps_high` (DAPO's clip-higher) and `rl.dual_clip` (dual-clip
PPO) as further keywords when they are set, so a loss that does not take them keeps working
under the defaults and is refused before training when they are set.

(`clip_eps` is keyword-only so that a stray fifth positional argument, such as a token
count, fails loudly instead of silently becoming the clip range.)

`weights` is the loss mask times the per-sequence weight from `rl/aggregation.py`
(0 on every token the policy did not generate, invariant 3), and the loss is
`(per_token * weights).sum()`. How gradient mass is split between tokens, sequences and
roles (token mean, sequence mean, role-balanced, multiplicity-normalised) is therefore
decided once, by the weights, and not inside each loss. The weights of a minibatch are
computed over the whole minibatch, so summing the losses of its micro-batches gives exactly
the minibatch loss.

Metrics (ratio_mean, clip_frac, approx_kl) are plain token means over the tokens with
weight > 0: they describe the policy's tokens, not the aggregation (rl/update.py pools them
over micro-batches by token count). `clip_frac` counts the tokens whose gradient the clip
removes (`clip_removes_gradient`); a loss that never clips says so with the function
attribute `clips = False` (a loss without the attribute is taken to clip at `clip_eps`), and
the per-role statistics (diagnostics/roles.py) then count no clipped tokens either.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

import torch

from swarmrl.config import RLConfig
from swarmrl.registry import PluginError, Registry

LossFn = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]
LOSSES: Registry[LossFn] = Registry("policy loss", classes=False)


def register_loss(name: str) -> Callable[[LossFn], LossFn]:
    """Decorator adding a loss under `name` (a duplicate name is a PluginError)."""
    return LOSSES.register(name)


def get_loss(name: str) -> LossFn:
    """A registered name, or a `package.module:fn` / `path/file.py:fn` spec -> the loss."""
    return LOSSES.get(name)


def make_loss(cfg: RLConfig) -> LossFn:
    """`rl.loss` with `rl.clip_eps_high` / `rl.dual_clip` bound when set (else the registered
    function itself, so the defaults run exactly the code they ran before these options).
    A loss that takes neither keyword is a PluginError naming the key, before training."""
    fn = get_loss(cfg.loss)
    extra = {k: v for k, v in (("clip_eps_high", cfg.clip_eps_high), ("dual_clip", cfg.dual_clip)) if v}
    if not extra:
        return fn
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    missing = [k for k in extra if k not in params and not takes_any]
    if missing:
        raise PluginError(f"rl.{missing[0]} is set but rl.loss={cfg.loss!r} takes no `{missing[0]}` keyword "
                          "(built-in: ppo_clip); unset it or use a loss that clips")
    bound = functools.partial(fn, **extra)
    bound.clips = getattr(fn, "clips", True)  # rl/update.py reads it: a bound clipping loss still clips
    return bound


def clip_removes_gradient(ratio: torch.Tensor, adv: torch.Tensor, clip_eps: float, clip_eps_high: float = 0.0,
                          dual_clip: float = 0.0) -> torch.Tensor:
    """Tokens whose gradient the PPO clip removes.  ratio, adv: [B, T] -> bool [B, T].

    The pessimistic max(-A r, -A clip(r)) takes the flat clipped branch only when the ratio has
    left the trust region in the direction the advantage pushes it: A > 0 and r > 1 + eps_high,
    or A < 0 and r < 1 - eps. A token outside the range on the other side keeps its gradient
    (the unclipped branch is the larger loss), so counting it would report a clip that did
    nothing (TRL's and verl's clip fraction count the same set). With dual clip c > 0, a token
    with A < 0 and r > c is flat too (the loss is capped at -A c; verl's `pg_clipfrac_lower`).
    `clip_eps_high` 0 means clip_eps (a symmetric range).
    """
    high = clip_eps_high or clip_eps
    out = ((adv > 0) & (ratio > 1.0 + high)) | ((adv < 0) & (ratio < 1.0 - clip_eps))  # [B, T]
    if dual_clip > 0:
        out = out | ((adv < 0) & (ratio > dual_clip))  # [B, T]
    return out


def _token_metrics(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, weights: torch.Tensor,
                   clip_eps: float | None, clip_eps_high: float = 0.0, dual_clip: float = 0.0
                   ) -> dict[str, torch.Tensor]:
    """Token means over weight > 0 of the ratio, the clipped fraction and the k3 KL estimate
    (and, with dual clip on, `dual_clip_frac`: the tokens that the dual clip alone flattens)."""
    with torch.no_grad():
        on = (weights > 0).to(logp.dtype)  # [B, T]
        n = on.sum().clamp(min=1)  # scalar
        log_ratio = logp - old_logp  # [B, T]
        ratio = torch.exp(log_ratio)  # [B, T]
        clipped = (clip_removes_gradient(ratio, adv, clip_eps, clip_eps_high, dual_clip).to(logp.dtype)
                   if clip_eps is not None else torch.zeros_like(on))  # [B, T]
        out = {
            "ratio_mean": (ratio * on).sum() / n,
            "clip_frac": (clipped * on).sum() / n,  # [B, T] -> scalar
            "approx_kl": (((ratio - 1.0) - log_ratio) * on).sum() / n,  # k3 estimator, >= 0
        }
        if dual_clip > 0:
            lower = ((adv < 0) & (ratio > dual_clip)).to(logp.dtype)  # [B, T]
            out["dual_clip_frac"] = (lower * on).sum() / n
        return out


@LOSSES.register("ppo_clip")
def ppo_clip_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, weights: torch.Tensor, *,
                  clip_eps: float = 0.2, clip_eps_high: float = 0.0,
                  dual_clip: float = 0.0) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO-clip surrogate against the behaviour log-probs.  All inputs [B, T].

    With one update per batch the ratio is 1 and this is the plain policy gradient
    -adv * logp; the clip matters once minibatches_per_step > 1.

    per_token = max(-A r, -A clip(r, 1 - eps, 1 + eps_high)), and with dual clip c > 0, for
    A < 0 only, min(that, -A c). This is verl 0.8.0.dev `compute_policy_loss_vanilla`
    (clip_ratio_low / clip_ratio_high / clip_ratio_c) and TRL 1.10 GRPOTrainer `_compute_loss`
    (epsilon / epsilon_high, `-min(r A, clip(r) A)`, the same number), without verl's clamp of
    the log-ratio at +-20. `clip_eps_high` 0 = clip_eps (symmetric: the code before the option);
    `dual_clip` 0 = off (verl's default is 3.0, always on).
    """
    weights = weights.to(logp.dtype)  # [B, T]
    ratio = torch.exp(logp - old_logp)  # [B, T]
    unclipped = -adv * ratio  # [B, T]
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + (clip_eps_high or clip_eps))  # [B, T]
    per_token = torch.maximum(unclipped, clipped)  # [B, T] pessimistic bound
    if dual_clip > 0:  # a negative advantage cannot push a token's loss above -A c however large r grows
        per_token = torch.where(adv < 0, torch.minimum(per_token, -adv * dual_clip), per_token)  # [B, T]
    loss = (per_token * weights).sum()  # scalar
    return loss, _token_metrics(logp, old_logp, adv, weights, clip_eps, clip_eps_high, dual_clip)


ppo_clip_loss.clips = True


@LOSSES.register("pg")
def pg_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, weights: torch.Tensor, *,
            clip_eps: float = 0.2) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Vanilla REINFORCE-style policy gradient -adv * logp (RLCR's core update).  [B, T] inputs.

    `clip_eps` is accepted for the common signature and ignored: nothing is clipped, so
    clip_frac is 0.
    """
    weights = weights.to(logp.dtype)  # [B, T]
    per_token = -adv * logp  # [B, T]
    loss = (per_token * weights).sum()  # scalar
    return loss, _token_metrics(logp, old_logp, adv, weights, None)


pg_loss.clips = False
