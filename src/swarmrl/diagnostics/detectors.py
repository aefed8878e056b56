"""Failure detectors that run on every step's metrics and raise alerts with their evidence.

They watch for the mechanisms Zeng et al. (2026, "When Does Multi-Agent RL Improve LLM
Workflows?") found behind multi-agent RL failures, while training runs rather than in a
post-mortem:

- `gradient_amplification` (isolated policies): a role played by several agents (three
  generators) receives the same outcome reward several times, its gradients align, and its
  adapter drifts faster than the rest. Signal: that role's gradient norm well above the
  other roles', sustained.
- `role_capture` (shared policy): the dominant role's output distribution leaks into
  another role's slot (the aggregator writes long arguments instead of a choice). Signal:
  a role's output *signature* has moved away from its own starting point and now sits
  closer to another role's starting point. Aggregate perplexity and KL do not show it.
- `accuracy_cliff`: the late collapse of validation accuracy after a peak.

Each detector fires once per (name, role) when its condition starts to hold, and not again
on every following step; the alert *clears* when the condition is evaluated and found false,
after which it can fire again. A condition that cannot be evaluated on a step (no
validation that step, a role absent) neither fires nor clears.

The paper reads these mechanisms off plots after the fact; the thresholds below are ours.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

CHAR_CLASSES = ("digit", "letter", "tag", "space", "other")
"""Character classes of `RoleSignature.char_hist`: digits, letters, `<`/`>`, whitespace, anything else."""
ALL_ROLES = "all"
"""The `role` of alerts that concern the whole collective (accuracy_cliff)."""


@dataclass
class DetectorConfig:
    amplification_ratio: float = 2.0
    """gradient_amplification: a role with multiplicity > 1 is suspect when its grad norm
    exceeds this multiple of the median grad norm of the single-multiplicity roles."""
    patience: int = 2
    """gradient_amplification: consecutive steps the ratio must hold before the alert fires
    (one noisy minibatch is not drift)."""
    capture_min_shift: float = 0.3
    """role_capture: minimum distance of a role's signature from its own reference before
    it can count as captured (see `signature_distance` for the units)."""
    cliff_drop: float = 0.15
    """accuracy_cliff: fire when peak-so-far minus current val_accuracy exceeds this."""


@dataclass
class Alert:
    name: str
    role: str
    step: int
    message: str
    evidence: dict = field(default_factory=dict)


@dataclass
class RoleSignature:
    """A cheap fingerprint of what a role writes in one step.

    mean_length: mean output length (any unit, the same for every role and step, e.g. tokens);
    compliance: fraction of outputs in the role's expected format (0..1);
    char_hist: normalised histogram over CHAR_CLASSES (sums to 1).
    """
    mean_length: float
    compliance: float
    char_hist: list[float]

    @classmethod
    def from_texts(cls, texts: list[str], compliant: list[bool]) -> "RoleSignature":
        """Signature of a role's outputs in one step (length in characters)."""
        if not texts:
            return cls(0.0, 0.0, [0.0] * len(CHAR_CLASSES))
        return cls(sum(map(len, texts)) / len(texts), sum(map(bool, compliant)) / max(len(compliant), 1),
                   char_histogram("".join(texts)))


def char_histogram(text: str) -> list[float]:
    """Normalised counts of CHAR_CLASSES in `text` (all zeros for an empty text)."""
    counts = [0] * len(CHAR_CLASSES)
    for c in text:
        i = 0 if c.isdigit() else 1 if c.isalpha() else 2 if c in "<>" else 3 if c.isspace() else 4
        counts[i] += 1
    n = max(len(text), 1)
    return [k / n for k in counts]


def signature_distance(a: RoleSignature, b: RoleSignature) -> float:
    """|Δ log(1 + length)| + |Δ compliance| + total variation of the char histograms.

    Each term is unit-free and of order 1 for a real change of style: a log length because
    "5 tokens vs 50" matters and "500 vs 545" does not; compliance and total variation
    are already in [0, 1].
    """
    d_len = abs(math.log1p(max(a.mean_length, 0.0)) - math.log1p(max(b.mean_length, 0.0)))
    d_comp = abs(a.compliance - b.compliance)
    d_hist = 0.5 * sum(abs(x - y) for x, y in zip(a.char_hist, b.char_hist, strict=True))
    return d_len + d_comp + d_hist


def _grad_norms(metrics: dict) -> dict[str, float]:
    """{role: metrics['role/<role>/grad_norm']} for the finite entries."""
    out = {}
    for k, v in metrics.items():
        if k.startswith("role/") and k.endswith("/grad_norm") and isinstance(v, (int, float)) and math.isfinite(v):
            out[k[len("role/"):-len("/grad_norm")]] = float(v)
    return out


def role_grad_ratios(metrics: dict, multiplicity: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """(each multiplied role's grad norm / the median of the single-agent roles' norms, those
    single roles' norms); ({}, singles) when there is no positive single-role baseline."""
    norms = _grad_norms(metrics)
    singles = {r: n for r, n in norms.items() if multiplicity.get(r, 1) <= 1}
    median = statistics.median(singles.values()) if singles else 0.0
    if median <= 0:  # no baseline role, or no tokens for it: says nothing about drift
        return {}, singles
    return {r: n / median for r, n in norms.items() if multiplicity.get(r, 1) > 1}, singles


def mean_amplification(rows: list[dict]) -> float | None:
    """Mean over a run's steps (metrics rows) of the largest multiplied-role grad-norm ratio
    (`role_grad_ratios`, multiplicities from `role/<r>/multiplicity`); None when no step had one.
    About k for k identical agents sharing a role's gradient; about 1 with the mitigation."""
    per_step = []
    for m in rows:
        mult = {k[len("role/"):-len("/multiplicity")]: v for k, v in m.items()
                if k.startswith("role/") and k.endswith("/multiplicity") and isinstance(v, (int, float))}
        ratios, _ = role_grad_ratios(m, mult)
        if ratios:
            per_step.append(max(ratios.values()))
    return sum(per_step) / len(per_step) if per_step else None


class Detectors:
    """Runs the three detectors on each step's metrics; keeps the history they need."""

    def __init__(self, cfg: DetectorConfig):
        self.cfg = cfg
        self.streak: dict[str, int] = {}  # role -> consecutive steps above the amplification ratio
        self.references: dict[str, RoleSignature] = {}  # role -> its first signature
        self.peak: float | None = None  # best val_accuracy so far
        self.peak_step: int | None = None
        self.active: set[tuple[str, str]] = set()  # (name, role) fired and not yet cleared
        self.history: list[dict] = []  # every alert fired, as a dict

    def update(self, step: int, metrics: dict, signatures: dict[str, RoleSignature],
               multiplicity: dict[str, float]) -> list[Alert]:
        """Evaluate every detector on this step; return the alerts that fire now.

        `multiplicity`: agents per role in the workflow; roles missing from it count as 1.
        """
        # (name, role) -> (message, evidence) when the condition holds, None when it is false
        verdicts: dict[tuple[str, str], tuple[str, dict] | None] = {}
        verdicts.update(self._amplification(metrics, multiplicity))
        verdicts.update(self._capture(signatures))
        verdicts.update(self._cliff(step, metrics))
        fired = []
        for key in sorted(verdicts):
            verdict = verdicts[key]
            if verdict is None:
                self.active.discard(key)  # cleared: may fire again later
            elif key not in self.active:
                self.active.add(key)
                fired.append(Alert(key[0], key[1], step, verdict[0], verdict[1]))
        self.history.extend(asdict(a) for a in fired)
        return fired

    def _amplification(self, metrics: dict, multiplicity: dict[str, float]) -> dict:
        ratios, singles = role_grad_ratios(metrics, multiplicity)
        if not ratios:
            return {}  # no baseline role this step (or no multiplied one): nothing to compare
        norms, median = _grad_norms(metrics), statistics.median(singles.values())
        out: dict = {}
        for role in sorted(ratios):
            k, ratio = multiplicity[role], ratios[role]
            self.streak[role] = self.streak.get(role, 0) + 1 if ratio > self.cfg.amplification_ratio else 0
            if self.streak[role] == 0:
                out[("gradient_amplification", role)] = None
            elif self.streak[role] >= self.cfg.patience:
                out[("gradient_amplification", role)] = (
                    f"role '{role}' (multiplicity {k:g}) has grad norm {norms[role]:.3g} = {ratio:.2f}x the median "
                    f"{median:.3g} of the single-agent roles for {self.streak[role]} steps",
                    {"grad_norm": norms[role], "median_single_grad_norm": median, "ratio": ratio,
                     "multiplicity": k, "steps": self.streak[role], "single_grad_norms": dict(sorted(singles.items()))})
        return out

    def _capture(self, signatures: dict[str, RoleSignature]) -> dict:
        for role, sig in signatures.items():
            self.references.setdefault(role, RoleSignature(float(sig.mean_length), float(sig.compliance),
                                                           [float(x) for x in sig.char_hist]))
        out: dict = {}
        for role in sorted(signatures):
            others = {r: ref for r, ref in self.references.items() if r != role}
            if not others:
                continue
            cur = signatures[role]
            own = signature_distance(cur, self.references[role])
            dist = {r: signature_distance(cur, ref) for r, ref in sorted(others.items())}
            nearest = min(dist, key=lambda r: (dist[r], r))
            if own > self.cfg.capture_min_shift and dist[nearest] < own:
                out[("role_capture", role)] = (
                    f"role '{role}' moved {own:.3f} from its own reference and is now {dist[nearest]:.3f} from "
                    f"role '{nearest}''s reference",
                    {"own_distance": own, "nearest_role": nearest, "nearest_distance": dist[nearest],
                     "distances": dist, "current": asdict(cur), "reference": asdict(self.references[role])})
            else:
                out[("role_capture", role)] = None
        return out

    def _cliff(self, step: int, metrics: dict) -> dict:
        acc = metrics.get("val_accuracy")
        if not isinstance(acc, (int, float)) or not math.isfinite(acc):
            return {}  # no validation this step
        acc = float(acc)
        if self.peak is None or acc > self.peak:
            self.peak, self.peak_step = acc, step
        drop = self.peak - acc
        if drop > self.cfg.cliff_drop:
            return {("accuracy_cliff", ALL_ROLES): (
                f"val_accuracy {acc:.3f} is {drop:.3f} below its peak {self.peak:.3f} (step {self.peak_step})",
                {"peak": self.peak, "peak_step": self.peak_step, "current": acc, "drop": drop})}
        return {("accuracy_cliff", ALL_ROLES): None}

    def state_dict(self) -> dict:
        """Plain JSON-able state (for checkpoints); the config is not part of it."""
        return {"streak": dict(self.streak), "references": {r: asdict(s) for r, s in self.references.items()},
                "peak": self.peak, "peak_step": self.peak_step, "active": sorted([n, r] for n, r in self.active),
                "history": [dict(a) for a in self.history]}

    def load_state_dict(self, state: dict) -> None:
        self.streak = {r: int(n) for r, n in state["streak"].items()}
        self.references = {r: RoleSignature(**s) for r, s in state["references"].items()}
        self.peak, self.peak_step = state["peak"], state["peak_step"]
        self.active = {(n, r) for n, r in state["active"]}
        self.history = [dict(a) for a in state["history"]]
