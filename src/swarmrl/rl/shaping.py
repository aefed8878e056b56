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

PARL-style staged rewards (Kimi K2.5's `r = l1 * r_parallel + l2 * r_finish + r_perf`), on
top of any mode: `staged_scores` adds `lambda1(step) * r_inst + lambda2(step) * r_finish`, each
coefficient annealed linearly to 0 (`anneal`), against serial collapse early (nobody spawned)
and spurious parallelism later (spawned agents that do nothing):

- r_inst (instantiation) = min(spawned, cap) / cap: agents created after the rollout started
  (hires), at or before the deadline, over the org's expert cap (`Org.max_experts`); 0 when
  the cap is 0.
- r_finish = finished / spawned: spawned agents that took work and submitted every item they
  took (an empty queue) before the deadline or their firing; 0 when nobody was spawned.

A wrong answer's cost (`wrong_cost`, on top of any mode): the score loses `wrong_cost` / K per
item of K decided by a wrong submission that landed by the deadline (`wrong_fractions`), so that
guessing an item the team will not reach in time stops being free.

The functions below are pure (tensors in, tensors out) so they are tested on hand numbers;
`staged_scores` is the one call the trainer makes (`shaped_scores` when every extra term is off).
"""

from __future__ import annotations

from typing import Sequence

import torch

from swarmrl.collective.grading import wrong_by_deadline
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


def anneal(coef: float, start: int, end: int, step: int) -> float:
    """coef until `start`, then linearly to 0 at `end`, 0 after it; `end` 0 = never annealed."""
    if end == 0 or step <= start:
        return coef
    return coef * max(0.0, (end - step) / (end - start))


def _spawned(r: Rollout) -> list:
    """Agents created after the rollout began (hired), at or before its deadline."""
    t0 = min(a.created_at for a in r.agents.values())
    return [a for a in r.agents.values() if t0 < a.created_at <= r.time_limit]


def staged_terms(rollouts: Sequence[Rollout]) -> tuple[torch.Tensor, torch.Tensor]:
    """(r_inst [N], r_finish [N]) of finished rollouts, both in [0, 1] (module docstring)."""
    inst, fin = [], []
    for r in rollouts:
        spawned = _spawned(r)
        cap = r.org.max_experts
        inst.append(min(len(spawned), cap) / cap if cap > 0 else 0.0)
        done = sum(1 for a in spawned if a.took and not a.queue)
        fin.append(done / len(spawned) if spawned else 0.0)
    return torch.tensor(inst, dtype=torch.float32), torch.tensor(fin, dtype=torch.float32)  # [N], [N]


def wrong_fractions(rollouts: Sequence[Rollout]) -> torch.Tensor:
    """[N]: each rollout's items decided by a wrong submission landed by its deadline, over its items."""
    return torch.tensor([wrong_by_deadline(r) / r.problem.num_items for r in rollouts], dtype=torch.float32)


def _mean(x: torch.Tensor) -> float:
    return float(x.mean()) if x.numel() else 0.0


def staged_scores(cfg: ShapingConfig, rollouts: Sequence[Rollout], step: int
                  ) -> tuple[torch.Tensor, dict[str, float]]:
    """The score the advantage is computed from [N], and its extra terms' metrics: the mean
    reward a wrong answer's cost took (`shaping/wrong_cost`); each staged coefficient at this
    step (`shaping/instantiation_coef`, `shaping/finish_coef`), each term's mean over the
    rollouts (`shaping/instantiation_mean`, `shaping/finish_mean`) and the mean reward it added
    (`shaping/instantiation_bonus`, `shaping/finish_bonus`)."""
    scores, metrics = shaped_scores(cfg, rollouts), {}  # [N]
    if cfg.wrong_cost:
        cost = cfg.wrong_cost * wrong_fractions(rollouts)  # [N]
        scores, metrics["shaping/wrong_cost"] = scores - cost, _mean(cost)
    if not (cfg.instantiation_coef or cfg.finish_coef):
        return scores, metrics
    l1 = anneal(cfg.instantiation_coef, cfg.instantiation_anneal_start, cfg.instantiation_anneal_end, step)
    l2 = anneal(cfg.finish_coef, cfg.finish_anneal_start, cfg.finish_anneal_end, step)
    inst, fin = staged_terms(rollouts)  # [N], [N]
    metrics |= {"shaping/instantiation_coef": l1, "shaping/finish_coef": l2,
                "shaping/instantiation_mean": _mean(inst), "shaping/finish_mean": _mean(fin),
                "shaping/instantiation_bonus": l1 * _mean(inst), "shaping/finish_bonus": l2 * _mean(fin)}
    return scores + l1 * inst + l2 * fin, metrics  # [N]
