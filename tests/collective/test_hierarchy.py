"""Hierarchical hiring (`workflow.manager_hires`): experts that hire experts of their own, within
the CEO's cap, and the scripted hierarchies of the village-to-city ceilings."""

from __future__ import annotations

from runtime_helpers import END, LAT, NO_DEADLINE, TOK, ScriptActor, problems, turns_of

from swarmrl.collective.org import Org
from swarmrl.collective.runtime import Runtime, RuntimeLimits
from swarmrl.config import TaskConfig
from swarmrl.diagnostics.collective import collective_metrics
from swarmrl.scenarios.org import OrgScenario
from swarmrl.tasks.arith import ArithTask
from swarmrl.tasks.arith_scripts import ScriptedActor, Strategy

HIRE = '<hire role="expert"/>'


def test_org_lets_each_expert_hire_its_quota_within_the_cap():
    org = Org(max_experts=4, manager_hires=2)
    assert org.hire("ceo") == ("expert-1", None)
    assert org.hire("expert-1") == ("expert-2", None)
    assert org.hire("expert-2") == ("expert-3", None)  # a hire may hire in turn
    assert org.hire("expert-1") == ("expert-4", None)
    assert org.hire("expert-3") == (None, "error: team is full (max 4 experts)")
    assert org.fire("ceo", "expert-4") is None
    assert org.hire("expert-1") == (None, "error: you have made your 2 hires")  # a quota, not a headcount
    assert org.hire("expert-4") == (None, "error: only active teammates can hire")  # fired
    assert org.hire("stranger") == (None, "error: only active teammates can hire")
    assert [org.boss_of(n) for n in ("ceo", "expert-1", "expert-2", "expert-3")] == [None, "ceo", "expert-1", "expert-2"]
    assert org.fire("expert-1", "expert-2") == "error: only the CEO can fire"


def test_without_manager_hires_only_the_ceo_hires():
    org = Org(max_experts=4)
    org.hire("ceo")
    assert org.hire("expert-1") == (None, "error: only the CEO can hire")


def hier_runtime(k: int, cap: int, manager_hires: int, **limits) -> Runtime:
    task = ArithTask(TaskConfig(items_per_problem=k, terms_per_item=2, dependency_rate=0.5))
    return Runtime(task, TOK, LAT, RuntimeLimits(**limits), scenario=OrgScenario(cap, manager_hires))


def test_a_managers_hires_join_with_the_manager_as_boss_and_are_briefed_by_it():
    rt = hier_runtime(k=4, cap=3, manager_hires=2)
    (p,) = problems(rt, 1)
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 3)
    rt.run([r], ScriptActor({("ceo", 0): '<hire role="expert">hire one, take A</hire><done/>',
                        ("expert-1", 0): '<hire role="expert">take B</hire><take item="A"/>',
                        ("expert-2", 0): "<done/>"}), seed=0)
    assert r.org.boss_of("expert-2") == "expert-1"
    assert "expert-2 boss=expert-1" in TOK.decode(r.agents["expert-2"].ids)  # its header
    assert "@expert-1: take B" in turns_of(r, "expert-2")[0].observation
    assert r.counters["hires"] == 2 and r.counters["invalid_actions"] == 0
    assert collective_metrics([r])["team_hired_by_experts_per_rollout"] == 1.0  # expert-1's hire, not the CEO's


def test_without_manager_hires_an_experts_hire_is_refused():
    rt = hier_runtime(k=4, cap=3, manager_hires=0)
    (p,) = problems(rt, 1)
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 3)
    rt.run([r], ScriptActor({("ceo", 0): '<hire role="expert">go</hire><done/>', ("expert-1", 0): HIRE}), seed=0)
    assert r.org.size() == 2
    assert "error: only the CEO can hire" in turns_of(r, "expert-1")[1].observation


def test_a_ceo_may_hire_its_whole_evaluation_cap_in_one_turn():
    # One reply carries at most 32 actions by default; a cap of 40 needs 40 hires and a kickoff.
    rt = hier_runtime(k=4, cap=40, manager_hires=0, max_hires_per_rollout=40)
    (p,) = problems(rt, 1)
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 40)
    rt.run([r], ScriptActor({("ceo", 0): HIRE * 40 + "<done/>"}), seed=0)
    assert r.org.peak_size == 41 and r.counters["invalid_actions"] == 0
    small = hier_runtime(k=4, cap=8, manager_hires=0)
    r8 = small.new_rollout(0, 0, p, NO_DEADLINE, 8)
    small.run([r8], ScriptActor({("ceo", 0): "<wait/>" * 33}), seed=0)
    assert "error: too many actions (max 32)" in turns_of(r8, "ceo")[1].observation


def test_scripted_hierarchies_staff_the_tree_and_solve_every_item():
    strategies = [Strategy(20, board=True, ceo_works=cw, share=share, managers=m)
                  for m in (3, 4) for cw in (False, True) for share in ("wait", "recompute")]
    rt = hier_runtime(k=24, cap=20, manager_hires=20, max_turns_per_agent=64, max_context_tokens=4096,
                      max_hires_per_rollout=20)
    probs = problems(rt, len(strategies), seed=3)
    rollouts = [rt.new_rollout(i, i, p, NO_DEADLINE, 20) for i, p in enumerate(probs)]
    rt.run(rollouts, ScriptedActor(TOK, END, dict(enumerate(strategies))), seed=0)
    for r, strat in zip(rollouts, strategies):
        assert r.score == 1.0 and r.counters["invalid_actions"] == 0, strat.label()
        assert r.org.peak_size == 21, strat.label()
        bosses = [r.org.boss_of(f"expert-{i}") for i in range(1, 21)]
        managers = [f"expert-{i}" for i in range(1, strat.managers + 1)]
        assert bosses[:strat.managers] == ["ceo"] * strat.managers, strat.label()
        # 17 or 16 experts over the managers, the first ones taking one more (3: 6 6 5; 4: 4 4 4 4)
        assert [bosses.count(m) for m in managers] == strat.manager_shares(), strat.label()
        assert sum(strat.manager_shares()) == 20 - strat.managers
        assert collective_metrics([r])["team_hired_by_experts_per_rollout"] == 20 - strat.managers, strat.label()
        assert r.turns[0].generated_tokens == strat.managers + (6 if strat.ceo_works else 1) + 1, strat.label()


def test_manager_shares():
    assert Strategy(20, board=True, managers=3).manager_shares() == [6, 6, 5]
    assert Strategy(3, board=True, managers=3).manager_shares() == []


def test_experts_are_told_who_hired_them_and_whether_they_may_hire():
    rt = hier_runtime(k=4, cap=3, manager_hires=2)
    (p,) = problems(rt, 1)
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 3)
    r.org.hire("ceo")
    r.org.hire("expert-1")
    flat_rt = hier_runtime(k=4, cap=3, manager_hires=0)
    r0 = flat_rt.new_rollout(0, 0, p, NO_DEADLINE, 3)
    r0.org.hire("ceo")
    flat = flat_rt.scenario.describe(r0, "expert-1", "expert")  # the rollout's org sets the rules told
    assert "hired by the CEO" in flat and "work the CEO gives you" in flat and "hire" not in flat.split("CEO", 1)[1]
    managed = rt.scenario.describe(r, "expert-2", "expert")
    assert "hired by expert-1" in managed and "work expert-1 gives you" in managed
    assert "You may hire up to 2 experts of your own" in managed
    assert rt.scenario.actions("expert")[-1] == "hire" and "hire" not in OrgScenario(3).actions("expert")


def test_under_a_hierarchy_an_experts_header_shows_its_quota():
    rt = hier_runtime(k=4, cap=3, manager_hires=2)
    (p,) = problems(rt, 1)
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 3)
    rt.run([r], ScriptActor({("ceo", 0): '<hire role="expert">go</hire><done/>'}), seed=0)
    assert TOK.decode(r.agents["expert-1"].ids).startswith(f"expert-1 boss=ceo\n{p.text()}\nmax=2\n")
    flat = hier_runtime(k=4, cap=3, manager_hires=0)
    r0 = flat.new_rollout(0, 0, p, NO_DEADLINE, 3)
    flat.run([r0], ScriptActor({("ceo", 0): '<hire role="expert">go</hire><done/>'}), seed=0)
    assert "max=" not in TOK.decode(r0.agents["expert-1"].ids)
