"""An experiment's spec: the arms trained from one warm start, and the scaling evaluation."""

from __future__ import annotations

from dataclasses import dataclass, field

from swarmrl.scaling.scale import ScaleSpec


@dataclass
class ExperimentConfig:
    base: str = "rlcr_arith.yaml"
    """The swarmrl config every arm starts from (a path or a preset name in configs/)."""
    overrides: list[str] = field(default_factory=list)
    """key=value overrides applied to every arm (the shared budget: steps, seed, ...)."""
    arms: dict[str, list[str]] = field(default_factory=dict)
    """Arm name -> its own key=value overrides (at least the shaping mode)."""
    scale: ScaleSpec = field(default_factory=ScaleSpec)
    """The scaling evaluation run on every arm (and on the warm start)."""
    title: str = "Latency shaping: does a time limit teach a collective to parallelise?"
    """The report's heading."""
