"""The simulated clock's latency model.

Latency is what RLCR optimises, so it must not depend on the machine the simulation
runs on: a turn's duration is computed from token counts, never measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from swarmrl.config import ClockConfig


@dataclass(frozen=True)
class LatencyModel:
    call_overhead_s: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    message_latency_s: float

    @classmethod
    def from_config(cls, cfg: ClockConfig) -> "LatencyModel":
        return cls(cfg.call_overhead_s, cfg.prefill_tokens_per_s, cfg.decode_tokens_per_s,
                   cfg.message_latency_s)

    def turn_duration(self, new_prompt_tokens: int, generated_tokens: int) -> float:
        # Only tokens new to the agent's context are prefilled: the rest is prefix-cached.
        return (self.call_overhead_s + new_prompt_tokens / self.prefill_tokens_per_s
                + generated_tokens / self.decode_tokens_per_s)

    @property
    def min_turn_s(self) -> float:
        return self.call_overhead_s + 1.0 / self.decode_tokens_per_s

    @property
    def d_min(self) -> float:
        """Earliest a turn starting at s can affect another agent: s + d_min.

        Turns starting before s1 + d_min (s1 = earliest pending start in the rollout)
        cannot be reached by anything not yet simulated, so they may be sampled together.
        """
        return self.min_turn_s + self.message_latency_s
