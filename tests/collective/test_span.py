"""A span of control (`workflow.span`): the CEO hires at most `span` experts, who share the rest
of the cap, so no agent's quota grows with the cap (village to city)."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_helpers import END, LAT, NO_DEADLINE, TOK, ScriptActor, problems, turns_of

from swarmrl.collective.handlers import BOARD_NEXT
from swarmrl.collective.org import Org
from swarmrl.collective.runtime import Runtime, RuntimeLimits
from swarmrl.config import TaskConfig
from swarmrl.diagnostics.collective import collective_metrics
from swarmrl.scenarios.org import OrgScenario, tree_demo
from swarmrl.tasks.arith import ArithScripts, ArithTask
from swarmrl.tasks.arith_scripts import Strategy

BOARD_HIRE = f'<hire role="expert" item="{BOARD_NEXT}"/>'


def staffed(cap: int, span: int, direct: int) -> Org:
    org = Org(max_experts=cap, span=span, max_hires=cap)
    for _ in range(direct):
        assert org.hire("ceo")[1] is None
    return org


@pytest.mark.parametrize("cap, span, ceo, shares", [
    (64, 8, 8, [7] * 8),  # 8 + 8 x 7 = 64: no quota above the span
    (16, 8, 8, [1] * 8),
    (12, 8, 8, [1, 1, 1, 1, 0, 0, 0, 0]),  # 4 left over 8 managers: the first ones take one
    (8, 3, 3, [2, 2, 1]),  # 5 left over 3
    (5, 8, 5, [0] * 5),  # a cap within the span is a flat org
])
def test_quotas_split_the_cap_below_the_span(cap, span, ceo, shares):
    org = staffed(cap, span, ceo)
    assert org.quota("ceo") == ceo
    assert [org.quota(f"expert-{i}") for i in range(1, ceo + 1)] == shares
    assert ceo + sum(shares) == cap


def test_every_agent_hires_its_quota_and_no_more():
    org = staffed(8, 3, 3)
    assert org.hire("ceo") == (None, "error: you have made your 3 hires")  # the CEO too, under a span
    assert org.hire("expert-1") == ("expert-4", None)
    assert org.hire("expert-1") == ("expert-5", None)
    assert org.hire("expert-1") == (None, "error: you have made your 2 hires")
    assert org.quota("expert-4") == 0  # a manager's hire works and does not hire
    assert org.hire("expert-4") == (None, "error: you have no hires to make")
    assert org.hire("expert-3") == ("expert-6", None)
    assert org.hire("expert-3") == (None, "error: you have made your 1 hires")
    assert org.fire("ceo", "expert-2") is None
    assert org.hire("expert-2") == (None, "error: only active teammates can hire")
    assert org.size() - 1 == 5


def test_span_and_manager_hires_are_exclusive():
    with pytest.raises(ValueError, match="span 2"):
        Org(max_experts=8, manager_hires=2, span=2)


def span_runtime(k: int, cap: int, span: int, **limits) -> Runtime:
    task = ArithTask(TaskConfig(items_per_problem=k, terms_per_item=2, dependency_rate=0.5))
    return Runtime(task, TOK, LAT, RuntimeLimits(**limits), scenario=OrgScenario(cap, span=span))


def test_headers_show_each_agents_own_quota():
    rt = span_runtime(k=12, cap=12, span=8, max_context_tokens=2048)
    (p,) = problems(rt, 1)
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 12)
    rt.run([r], ScriptActor({("ceo", 0): BOARD_HIRE * 8 + "<done/>",
                             ("expert-1", 0): BOARD_HIRE + "<done/>"}), seed=0)
    text = {n: TOK.decode(a.ids) for n, a in r.agents.items()}
    assert text["ceo"].startswith(f"ceo\n{p.text()}\nmax=8\n")
    assert text["expert-1"].startswith(f"expert-1 boss=ceo\n{p.text()}\nmax=1\n")
    for worker in ("expert-5", "expert-9"):  # no quota (the 5th manager's share is 0), no line
        boss = r.org.boss_of(worker)
        head = f"{worker} boss={boss}\n{p.text()}\n"
        assert text[worker].startswith(head) and not text[worker][len(head):].startswith("max=")
    assert r.org.boss_of("expert-9") == "expert-1"
    assert "You may hire up to 1 experts" in rt.scenario.describe(r, "expert-1", "expert")
    assert "hire" not in rt.scenario.describe(r, "expert-5", "expert").split("CEO", 1)[1]
    assert "up to 8 experts" in rt.scenario.describe(r, "ceo", "ceo")
    assert collective_metrics([r])["team_hired_by_experts_per_rollout"] == 1.0


def test_a_tree_of_quotas_staffs_a_city_that_no_quota_exceeds_the_span():
    # Every agent hires exactly the number in its own header: 8 managers of 7 each fill a cap of 64.
    rt = span_runtime(k=64, cap=64, span=8, max_context_tokens=4096, max_hires_per_rollout=64)
    (p,) = problems(rt, 1)
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 64)
    replies = {("ceo", 0): BOARD_HIRE * 8 + "<done/>"}
    replies |= {(f"expert-{i}", 0): BOARD_HIRE * 7 + "<done/>" for i in range(1, 9)}
    rt.run([r], ScriptActor(replies), seed=0)
    assert r.org.peak_size == 65 and r.counters["invalid_actions"] == 0
    quotas = [int(t[4:t.index("\n")]) for a in r.agents.values()
              if (t := TOK.decode(a.ids).split(p.text() + "\n", 1)[1]).startswith("max=")]
    assert max(quotas) == 8 and sorted(quotas) == [7] * 8 + [8]
    assert collective_metrics([r])["team_hired_by_experts_per_rollout"] == 56


def test_scripted_trees_hire_their_quotas_and_solve_every_item():
    rt = span_runtime(k=12, cap=8, span=8, max_context_tokens=2048)
    probs = problems(rt, 6, seed=3)
    shapes = [(8, 1), (8, 2), (8, 3), (8, 7), (5, 2), (2, 1)]  # (experts, span)
    strategies = {i: Strategy(k, board=True, share=share, managers=s)
                  for i, ((k, s), share) in enumerate(zip(shapes, ["wait", "poll", "recompute"] * 2))}
    rollouts = [rt.new_rollout(i, i, p, NO_DEADLINE, shapes[i][0], span=shapes[i][1]) for i, p in enumerate(probs)]
    rt.run(rollouts, ArithScripts().org_actor(TOK, END, strategies), seed=0)
    for r, (k, s) in zip(rollouts, shapes):
        assert r.score == 1.0 and r.counters["invalid_actions"] == 0, (k, s)
        assert r.org.peak_size == k + 1
        direct = [n for n in r.agents if r.org.boss_of(n) == "ceo"]
        assert len(direct) == s
        assert [sum(r.org.boss_of(m) == d for m in r.agents) for d in direct] == [r.org.quota(d) for d in direct]
        assert "error" not in "".join(t.observation for t in turns_of(r, "ceo"))


def test_tree_demos_draw_every_span_below_the_team():
    rng = np.random.default_rng(0)
    draws = [tree_demo(Strategy(6, board=True), rng) for _ in range(200)]
    assert {span for _, _, span in draws} == {1, 2, 3, 4, 5}
    assert all(cap == 6 and strat.managers == span for strat, cap, span in draws)


def test_the_warm_start_shows_trees_only_under_a_span():
    rt = span_runtime(k=12, cap=8, span=8, max_context_tokens=2048)
    scripts = ArithScripts(board_rate=0.5)
    rollouts, _, stats = rt.scenario.demonstrations(rt, scripts, TOK, END, 60, seed=0)
    trees = [r for r in rollouts if r.org.span]
    assert stats["trees"] == len(trees) > 0
    assert all(0 < r.org.span < r.org.max_experts for r in trees)
    flat_rt = span_runtime(k=12, cap=8, span=0, max_context_tokens=2048)
    _, _, flat = flat_rt.scenario.demonstrations(flat_rt, scripts, TOK, END, 60, seed=0)
    assert flat["trees"] == 0
