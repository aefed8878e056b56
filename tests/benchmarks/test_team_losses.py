"""benchmarks/team_losses.py: every lost item by cause, on a hand-made rollout."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace as NS

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("team_losses", ROOT / "benchmarks" / "team_losses.py")
team_losses = importlib.util.module_from_spec(spec)
spec.loader.exec_module(team_losses)


def _agent(known, queue=(), status="done", ready_at=0.0):
    return NS(known=known, queue=list(queue), role="expert", status=status, ready_at=ready_at)


def _rollout():
    # A answer 1; B, C start from A (answers 5, 7); D answer 2; E starts from D (3); F answer 4;
    # G answer 1, solved and never posted; H starts from G (2)
    items = [NS(index=1, dep=None, answer=1), NS(index=2, dep=1, answer=5), NS(index=3, dep=1, answer=7),
             NS(index=4, dep=None, answer=2), NS(index=5, dep=4, answer=3), NS(index=6, dep=None, answer=4),
             NS(index=7, dep=None, answer=1), NS(index=8, dep=7, answer=2)]
    subs = [{"agent": "e1", "item": 1, "correct": True},
            {"agent": "e2", "item": 2, "correct": False},   # held A=2 (the wrong post): misled
            {"agent": "e3", "item": 3, "correct": False},   # held A=1: its own mistake
            {"agent": "e4", "item": 4, "correct": False},   # no dependency: its own mistake
            {"agent": "e1", "item": 4, "correct": False, "status": "not_graded"}]  # after the graded one
    agents = {"e1": _agent({1: "1"}), "e2": _agent({1: "2"}), "e3": _agent({1: "1"}, queue=[8], status="active", ready_at=None),
              "e4": _agent({}, queue=[5], status="idle")}
    # 4 posted values, A, F and C wrong: e1 submitted A right and posted it wrong; e4 never
    # submitted F; e3 posted the wrong C it submitted
    msgs = [NS(text="A=2", sender="e1"), NS(text="done: D=2 F=9", sender="e4"), NS(text="C=8", sender="e3")]
    return NS(problem=NS(items=items), bus=NS(messages=msgs), submissions=subs, agents=agents,
              solved={1: 1.0, 7: 2.0}, end_reason="idle")


def test_losses_by_hand():
    c = team_losses.losses([_rollout()])
    assert c["posted values"] == 4 and c["posted values, wrong"] == 3
    assert c["posted values, wrong: its poster submitted it right"] == 1
    assert c["posted values, wrong: its poster submitted nothing for it"] == 1
    assert c["posted values, wrong: its poster submitted it wrong"] == 1
    assert c["wrong: dependency value"] == 1 and c["wrong: own work"] == 2
    # E (its dependency D lost), F (no dependency) and H (G solved, its value never posted): never answered
    assert c["never answered (dependency lost; held by expert, idle; rollout ended idle)"] == 1
    assert c["never answered (no dependency; on nobody's desk; rollout ended idle)"] == 1
    assert c["never answered (dependency solved, its value never posted; held by expert, waiting for a message; "
             "rollout ended idle)"] == 1
    assert sum(v for k, v in c.items() if not k.startswith("posted")) == 6  # the 6 unsolved items
