"""A run directory made from scripted rollouts (no model): an org rollout with hires, direct
messages, channel posts, archive reads and a fire, and one rollout of each fixed workflow, so
the report's timeline has every kind of mark to draw. Metrics rows are synthetic."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from swarmrl.collective.runtime import Runtime, RuntimeLimits
from swarmrl.config import TaskConfig
from swarmrl.report.samples import sample_row
from swarmrl.scenarios import GraphScenario
from swarmrl.tasks.arith import ArithTask
from swarmrl.tasks.arith_roles import WorkflowScriptedActor
from swarmrl.tasks.arith_scripts import ScriptedActor, Strategy
from swarmrl.workflows.graph import preset
from tests.collective.runtime_helpers import END, LAT, TOK, encode

WORKFLOWS = ("voting", "eval_opt", "orch_workers")


def _runtime(k: int = 6, dep: float = 0.4) -> Runtime:
    return Runtime(ArithTask(TaskConfig(items_per_problem=k, terms_per_item=2, dependency_rate=dep)), TOK, LAT,
                   RuntimeLimits(max_new_tokens_per_turn=64))


class FiringActor(ScriptedActor):
    """The scripted CEO, which also fires its second expert on its second turn."""

    def act(self, requests, seed):
        out = super().act(requests, seed)
        for i, req in enumerate(requests):
            if req.agent.role == "ceo" and req.agent.turns == 1 and "expert-2" in req.rollout.agents:
                out[i] = encode('<fire who="expert-2"/><post ch="general">B=1</post>')
        return out


def org_rollouts(n: int = 2, time_limit: float = 8.0):
    rt = _runtime()
    decode = lambda ids: TOK.decode(ids)  # noqa: E731
    probs = rt.task.sample(np.random.default_rng(3), n)
    rs = [rt.new_rollout(i, 0, p, time_limit, 3) for i, p in enumerate(probs)]
    strategies = {i: Strategy(2 + i % 2, share="poll", ceo_works=True) for i in range(n)}
    rt.run(rs, FiringActor(TOK, END, strategies), seed=0)
    return [sample_row(r, decode, rt.task.parse_item) for r in rs]


def workflow_rollout(name: str, index: int, time_limit: float = 30.0):
    rt = _runtime(k=4, dep=0.0)
    (p,) = rt.task.sample(np.random.default_rng(index), 1)
    r = rt.new_rollout(index, index, p, time_limit, 0, scenario=GraphScenario(preset(name)))
    rt.run([r], WorkflowScriptedActor(TOK, END, slip_rate=0.3, seed=0), seed=0)
    return sample_row(r, lambda ids: TOK.decode(ids), rt.task.parse_item)


def metrics_rows(steps: int) -> list[dict]:
    return [{"step": s, "score_mean": 0.1 * s, "reward_mean": 0.1 * s, "time_limit": 8.0, "team_size_mean": 2.5,
             "messages_per_rollout": 3.0 + s, "loss": 1.0 / (s + 1), "role/ceo/entropy": 2.0, "role/expert/entropy": 1.5,
             "alerts": ["role_capture:expert: one expert writes every answer"] if s == 1 else []}
            for s in range(steps)]


def write_scripted_run(run: Path) -> Path:
    """Step 0: two org rollouts; step 1: one rollout per fixed workflow."""
    (run / "samples").mkdir(parents=True)
    (run / "config.yaml").write_text("workflow: {name: org}\ntask: {name: arith}\n")
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics_rows(2)))
    steps = {0: org_rollouts(), 1: [workflow_rollout(w, i) for i, w in enumerate(WORKFLOWS)]}
    for step, rows in steps.items():
        (run / "samples" / f"step_{step:04d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run
