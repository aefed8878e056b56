"""The time-limit curriculum: the deadline grows over training (RLCR).

Short deadlines first reward quick, shallow coordination; longer ones later leave room
for longer-horizon coordination.
"""

from __future__ import annotations

from swarmrl.config import TimeLimitConfig


def time_limit_at(cfg: TimeLimitConfig, step: int) -> float:
    if cfg.schedule == "constant" or cfg.ramp_steps == 0:
        return cfg.end
    frac = min(max(step, 0) / cfg.ramp_steps, 1.0)
    return cfg.start + frac * (cfg.end - cfg.start)
