"""Shared by the distributed tests: the tiny config, a tiny initial policy on disk, metric comparison."""

from __future__ import annotations

from pathlib import Path

import torch

from swarmrl.config import load_config
from swarmrl.rl.advantages import ADVANTAGES, register_advantage
from swarmrl.runs.rundir import wall_clock

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny_test.yaml"
TINY_LR = load_config(TINY).rl.lr  # run_match.weights: the Adam noise allowed per step

# An untrained tiny model never scores, so the collective advantage would be 0 and the weights
# would never move; equality and resume checks need updates that really change the weights.
SPREAD = "_test_spread_dist"
if SPREAD not in ADVANTAGES:
    @register_advantage(SPREAD)
    def _spread(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor, roles: torch.Tensor) -> torch.Tensor:
        return rewards - rewards.mean() + torch.linspace(-1.0, 1.0, len(rewards))  # [S], never all 0


def tiny_cfg(*overrides: str):
    return load_config(TINY, [f"rl.advantage={SPREAD}", "eval.val_interval=0", "run.progress=false", *overrides])


def timeless(m: dict, drop: tuple[str, ...] = ()) -> dict:
    return {k: v for k, v in m.items() if not wall_clock(k) and not k.startswith(drop)}
