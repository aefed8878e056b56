"""Fixed workflows on the collective runtime: routing waits for every input, only the
submitting role earns reward, role actions are checked, and the clock and deadline apply."""

from __future__ import annotations

import numpy as np
import pytest

from swarmrl.collective.runtime import Runtime, RuntimeLimits
from swarmrl.config import TaskConfig
from swarmrl.tasks.arith import ArithTask
from swarmrl.workflows.graph import preset
from swarmrl.scenarios import GraphScenario
from swarmrl.tasks.arith_roles import WorkflowScriptedActor, parse_desk
from tests.collective.runtime_helpers import END, LAT, TOK, encode

NO_DEADLINE = 1e9


def runtime(k: int = 4, dep: float = 0.0, label_pool: int = 0) -> Runtime:
    task = ArithTask(TaskConfig(items_per_problem=k, terms_per_item=2, dependency_rate=dep, label_pool=label_pool))
    return Runtime(task, TOK, LAT, RuntimeLimits(max_new_tokens_per_turn=64))


def run(name: str, slip: float = 0.0, limit: float = NO_DEADLINE, n: int = 3, k: int = 4, dep: float = 0.0,
        label_pool: int = 0, **mult):
    rt = runtime(k, dep, label_pool)
    wf = preset(name, **mult)
    rs = [rt.new_rollout(i, i, p, limit, 0, scenario=GraphScenario(wf))
          for i, p in enumerate(rt.task.sample(np.random.default_rng(0), n))]
    rt.run(rs, WorkflowScriptedActor(TOK, END, slip_rate=slip, seed=0), seed=0)
    return rs


def test_parse_desk():
    assert parse_desk("C:4+1?7,no") == (3, "4+1", ["7", "no"])
    assert parse_desk("A:#B+2") == (1, "#B+2", [])
    assert parse_desk("(no items left)") is None


@pytest.mark.parametrize("label_pool", [0, 40])
@pytest.mark.parametrize("name", ["voting", "eval_opt", "orch_workers"])
def test_careful_scripted_roles_solve_everything(name, label_pool):
    for r in run(name, dep=0.3, k=5, label_pool=label_pool):
        assert r.score == 1.0 and r.counters["invalid_actions"] == 0
        assert r.end_reason == "solved"


def test_aggregator_starts_only_after_every_generator_finished():
    for r in run("voting", slip=0.3):
        gen_ends = [t.end for t in r.turns if t.role == "generator"]
        agg = [t for t in r.turns if t.role == "aggregator"]
        assert agg and min(t.start for t in agg) == pytest.approx(max(gen_ends) + LAT.message_latency_s)
        # it saw every generator's answers, as candidates on its desk
        first = agg[0].observation
        assert all(f"generator-{i}:" in first for i in (1, 2, 3))
        # only the aggregator's submissions count; generators' are proposals
        assert {s["agent"] for s in r.submissions} == {"aggregator"}
        assert {r.agents[p["agent"]].role for p in r.proposals} == {"generator"}


def test_majority_vote_repairs_a_lone_slip():
    rs = run("voting", slip=0.25, n=12)
    fixed = 0
    for r in rs:
        for item in range(1, 5):
            votes = [r.outputs[f"generator-{i}"][item] for i in (1, 2, 3)]
            truth = str(r.problem.item(item).answer)
            if votes.count(truth) == 2:  # one generator slipped: the aggregator still gets it right
                assert item in r.solved
                fixed += 1
    assert fixed > 0


def test_reviser_recomputes_what_the_evaluator_rejects():
    rs = run("eval_opt", slip=0.5, n=8)
    rejected = sum(v == "no" for r in rs for v in r.outputs["evaluator"].values())
    assert rejected > 0
    assert all(r.score == 1.0 for r in rs)  # careful evaluator + reviser fix every slip


def test_orchestrator_plan_routes_items_to_workers():
    (r,) = run("orch_workers", n=1, k=6, workers=2)
    assert r.assignments == {"worker-1": [1, 2, 3], "worker-2": [4, 5, 6]}
    done_by = {p["item"]: p["agent"] for p in r.proposals}
    assert done_by == {1: "worker-1", 2: "worker-1", 3: "worker-1", 4: "worker-2", 5: "worker-2", 6: "worker-2"}


class Fixed:
    """Replies by agent name; anything else <done/>."""

    def __init__(self, replies):
        self.replies = replies

    def act(self, requests, seed):
        return [encode(self.replies.get((q.agent.name, q.agent.turns), "<done/>")) for q in requests]


def test_role_actions_are_checked():
    rt = runtime()
    (p,) = rt.task.sample(np.random.default_rng(0), 1)
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 0, scenario=GraphScenario(preset("orch_workers")))
    rt.run([r], Fixed({("orchestrator", 0): '<verdict item="A">yes</verdict><assign who="ceo" item="A"/>'
                                             '<assign who="worker-1" item="A-Z"/><hire role="expert"/>'}), seed=0)
    errs = r.turns[0].errors
    assert any("not your role's action" in e for e in errs)
    assert any("cannot assign 'A' to 'ceo'" in e for e in errs)
    assert any("cannot assign 'A-Z'" in e for e in errs)
    assert any("only the CEO can hire" in e for e in errs)
    assert r.counters["invalid_actions"] == 4


def test_deadline_truncates_a_workflow_like_an_org():
    full = run("voting")
    gen_end = max(t.end for t in full[0].turns if t.role == "generator")
    cut = run("voting", limit=gen_end + 0.05)  # the aggregator can never act in time
    assert all(r.score == 0.0 for r in cut)
    assert all(not any(t.role == "aggregator" for t in r.turns) for r in cut)
