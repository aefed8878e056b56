"""Latency shaping: how the time a collective takes enters its reward (`shaping.mode`).

RLCR's claim is that a *time limit*, not a penalty, is what makes a collective parallelise:
two solutions that both land before the deadline score the same, so the only reason to be
faster is to get more work in before the cut. The switch makes the claim testable against
the two alternatives on any task:

- `time_limit` (RLCR): the rollout is cut at the curriculum's deadline; its score is the
  reward earned before it (the runtime enforces the cut, `Rollout.score` counts it).
- `penalty` (the DeepSeek-style alternative): no deadline but a generous safety cap; the
  score is the task reward minus `penalty_per_s * latency`. Every second costs the same,
  so being one second faster always pays, and lambda must be tuned to the task's time scale.
- `none`: the task reward alone, under the safety cap: no incentive to be fast at all.

Latency of a rollout is `Rollout.finished_at`: the time its last item landed if every item
was solved, the deadline if it was cut, else the end of its last turn (the team gave up).

The functions below are pure (tensors in, tensors out) so they are tested on hand numbers;
`shaped_scores` is the one call the trainer makes.
"""

from __future__ import annotations

from typing import Sequence

import torch

from swarmrl.collective.state import Rollout
from swarmrl.config import ShapingConfig

MODES = ("time_limit", "penalty", "none")


def deadline_s(cfg: ShapingConfig, curriculum_limit_s: float) -> float:
    """The deadline rollouts run under: the curriculum's for RLCR, the safety cap otherwise."""
    if cfg.mode not in MODES:
        raise ValueError(f"shaping.mode must be one of {MODES}, got {cfg.mode!r}")
    return curriculum_limit_s if cfg.mode == "time_limit" else cfg.safety_cap_s


def shape(mode: str, rewards: torch.Tensor, latencies_s: torch.Tensor, penalty_per_s: float) -> torch.Tensor:
    """Shaped score per rollout [N].

    rewards: [N] task reward earned before the rollout's deadline, in [0, 1]
    latencies_s: [N] rollout latency in simulated seconds
    """
    if mode == "penalty":
        return rewards - penalty_per_s * latencies_s  # [N]
    if mode in ("time_limit", "none"):
        # The deadline already did the work for time_limit (nothing after it was earned);
        # none is the same formula under the safety cap.
        return rewards.clone()  # [N]
    raise ValueError(f"shaping.mode must be one of {MODES}, got {mode!r}")


def rollout_rewards(rollouts: Sequence[Rollout]) -> tuple[torch.Tensor, torch.Tensor]:
    """(task reward before the deadline [N], latency in seconds [N]) of finished rollouts."""
    rewards = torch.tensor([r.score for r in rollouts], dtype=torch.float32)  # [N]
    latencies = torch.tensor([r.finished_at if r.finished_at is not None else r.time_limit
                              for r in rollouts], dtype=torch.float32)  # [N]
    return rewards, latencies


def shaped_scores(cfg: ShapingConfig, rollouts: Sequence[Rollout]) -> torch.Tensor:
    """The score the advantage is computed from, one per rollout [N]."""
    rewards, latencies = rollout_rewards(rollouts)  # [N], [N]
    return shape(cfg.mode, rewards, latencies, cfg.penalty_per_s)  # [N]
