"""An advantage estimator for runs that must move the weights from an untrained model (which never
scores, so the collective advantage would be 0): a plugin file, so torchrun's ranks load it too.

    rl.advantage=tests/distributed/spread_advantage.py:spread
"""

from __future__ import annotations

import torch


def spread(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor, roles: torch.Tensor) -> torch.Tensor:
    return rewards - rewards.mean() + torch.linspace(-1.0, 1.0, len(rewards))  # [S], never all 0
