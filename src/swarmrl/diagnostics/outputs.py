"""What each role wrote this step: output length, format compliance, signature (from rollouts).

Compliance asks "did the agent emit the action its role expects?" (the paper's role-capture
symptom is an aggregator that argues instead of choosing): a turn complies when it has no
action errors and contains one of its role's expected actions.
"""

from __future__ import annotations

import numpy as np

from swarmrl.collective.state import Rollout
from swarmrl.diagnostics.detectors import RoleSignature

# expects (workflows/graph.py) -> actions that fulfil it; `done` ends a role's work anywhere.
EXPECTED_ACTIONS = {
    "answer": ("submit", "take", "done"),
    "choice": ("submit", "done"),
    "verdict": ("verdict", "done"),
    "plan": ("assign", "done"),
}


def turn_complies(r: Rollout, turn) -> bool:
    if turn.errors or not turn.actions:
        return False
    expects = r.scenario.expects(turn.role)
    if expects is None:  # the role owes no particular output (the RLCR org): any valid action is in format
        return True
    kinds = {a[1:].split(" ", 1)[0].split(">", 1)[0].rstrip("/") for a in turn.actions}
    return bool(kinds & set(EXPECTED_ACTIONS[expects]))


def role_output_metrics(rollouts: list[Rollout]) -> tuple[dict[str, float], dict[str, RoleSignature]]:
    """`role/<r>/output_length`, `role/<r>/compliance`, `role/<r>/proposal_accuracy` + signatures."""
    texts: dict[str, list[str]] = {}
    ok: dict[str, list[bool]] = {}
    for r in rollouts:
        for t in r.turns:
            texts.setdefault(t.role, []).append(t.reply)
            ok.setdefault(t.role, []).append(turn_complies(r, t))
    metrics, sigs = {}, {}
    for role in texts:
        sigs[role] = RoleSignature.from_texts(texts[role], ok[role])
        metrics[f"role/{role}/output_length"] = sigs[role].mean_length
        metrics[f"role/{role}/compliance"] = sigs[role].compliance
    props: dict[str, list[bool]] = {}
    for r in rollouts:
        for p in r.proposals:
            props.setdefault(r.agents[p["agent"]].role, []).append(p["correct"])
    for role, xs in props.items():
        metrics[f"role/{role}/proposal_accuracy"] = float(np.mean(xs))
    return metrics, sigs
