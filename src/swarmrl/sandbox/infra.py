"""Infra errors are not zeros: drop those rollouts from the loss, and stop when they pile up.

A rollout with any `infra_error` grade (the runtime counts them in
`rollout.counters["infra_errors"]`) has a reward that says nothing about the policy:
training on it as a zero would teach the model that correct code is wrong whenever the
sandbox hiccups. The trainer keeps the rest and aborts past `max_infra_error_rate`,
because a broken sandbox should stop a run loudly, not quietly shrink its batches.
"""

from __future__ import annotations

from typing import Sequence


class InfraErrorRateExceeded(RuntimeError):
    """Too many rollouts lost to grader/sandbox failures; the message gives the numbers."""


def check_infra_errors(rollouts: Sequence, max_rate: float) -> tuple[list[bool], float]:
    """-> (keep mask: True for rollouts without infra errors, rate of rollouts with any).

    Raises InfraErrorRateExceeded if rate > max_rate. An empty batch has rate 0.
    """
    bad = [r.counters.get("infra_errors", 0) > 0 for r in rollouts]
    rate = sum(bad) / len(bad) if bad else 0.0
    if rate > max_rate:
        raise InfraErrorRateExceeded(
            f"{sum(bad)} of {len(bad)} rollouts ({rate:.0%}) hit sandbox/grader infra errors, "
            f"above sandbox.max_infra_error_rate={max_rate:.0%}; see the `detail` of their "
            "submissions in samples/ (is bubblewrap working? run `swarmrl` with a code task "
            "after scripts/setup.sh)")
    return [not b for b in bad], rate
