"""Collective metrics: is the team really doing more useful work, in parallel, together?

RLCR's point is that a reward curve alone cannot tell. These read the rollouts (the
simulated timeline) and report team size, useful work, communication and latency.
"""

from __future__ import annotations

import numpy as np

from swarmrl.collective.state import Rollout


def _mean(xs) -> float:
    return float(np.mean(xs)) if len(xs) else 0.0


def collective_metrics(rollouts: list[Rollout]) -> dict[str, float]:
    n = len(rollouts)
    c = lambda key: _mean([r.counters[key] for r in rollouts])  # noqa: E731
    useful = [sum(1 for t in r.solved.values() if t <= r.time_limit) for r in rollouts]
    team = [r.org.peak_size for r in rollouts]
    by_experts = sum(1 for r in rollouts for it, who in r.solved_by.items()
                     if who != "ceo" and r.solved[it] <= r.time_limit)
    submits = [s for r in rollouts for s in r.submissions]
    gen = [sum(t.generated_tokens for t in r.turns) for r in rollouts]
    m = {
        "score_mean": _mean([r.score for r in rollouts]),
        "score_std": float(np.std([r.score for r in rollouts])) if n else 0.0,
        "latency_mean": _mean([r.finished_at or 0.0 for r in rollouts]),
        "team_size_mean": _mean(team),
        "useful_work": _mean(useful),  # correct items before the deadline, per rollout
        "useful_work_per_agent": _mean([u / max(t, 1) for u, t in zip(useful, team)]),
        "expert_work_share": by_experts / max(sum(useful), 1),
        "accuracy": _mean([s["correct"] for s in submits]),
        "messages_per_rollout": _mean([r.counters["direct_messages"] + r.counters["channel_posts"] for r in rollouts]),
        "direct_messages_per_rollout": c("direct_messages"),
        "channel_posts_per_rollout": c("channel_posts"),
        "archive_reads_per_rollout": c("archive_reads"),
        "message_tokens_per_rollout": c("message_tokens"),
        "invalid_actions": c("invalid_actions"),
        "hit_token_cap": c("hit_token_cap"),
        "wrong_submits": c("wrong_submits"),
        "hires_per_rollout": c("hires"),
        "fires_per_rollout": c("fires"),
        "turns_per_rollout": _mean([len(r.turns) for r in rollouts]),
        "generated_tokens_per_rollout": _mean(gen),
        "solved_rate": _mean([r.end_reason == "solved" for r in rollouts]),
    }
    for role in ("ceo", "expert"):
        turns = [t for r in rollouts for t in r.turns if t.role == role]
        m[f"role/{role}/turns_per_rollout"] = len(turns) / max(n, 1)
        m[f"role/{role}/tokens_per_turn"] = _mean([t.generated_tokens for t in turns])
    return m


def team_size_histogram(rollouts: list[Rollout], max_size: int) -> list[float]:
    counts = np.bincount([r.org.peak_size for r in rollouts], minlength=max_size + 1)
    return (counts / max(len(rollouts), 1)).tolist()
