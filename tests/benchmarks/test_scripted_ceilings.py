"""benchmarks/scripted_ceilings.py: the hindsight oracle by hand, and the latency table on a tiny task."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("scripted_ceilings", ROOT / "benchmarks" / "scripted_ceilings.py")
ceilings = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ceilings)


def test_oracle_takes_the_fastest_strategy_per_problem_and_waits_for_the_slowest_problem():
    T = np.array([[1.0, np.inf, 3.0],
                  [2.0, 5.0, 1.0]])  # [strategies, problems]
    at, per = ceilings.oracle_finish(T)
    assert at == 5.0 and per.tolist() == [1.0, 5.0, 1.0]
    assert ceilings.oracle_finish(T[:1])[0] == np.inf  # a problem no strategy finishes


def test_latency_table_on_a_small_task(tmp_path, monkeypatch):
    out = tmp_path / "lat.json"
    monkeypatch.setattr(sys, "argv", ["scripted_ceilings.py", "--latency", "--problems", "4", "--horizon", "12",
                                      "--json", str(out), "task.items_per_problem=4", "workflow.max_experts=2"])
    ceilings.main()
    got = json.loads(out.read_text())
    assert got["single_best_score"] == 1.0
    solo = got["single_levels_s"]["1"]
    for group in ("demonstrated", "with_chain"):
        lv = got[group]["levels"]["1"]
        assert lv["ratio"] == lv["best_s"] / solo and lv["single_s"] == solo
        oracle = got[group]["oracle"]
        # choosing per problem is never slower than the best single strategy
        assert oracle["all_solved_s"] <= lv["best_s"] and oracle["ratio"] == oracle["all_solved_s"] / solo
    rule, fixed = got["with_chain"]["rule"], got["with_chain"]["levels"]["1"]["best_s"]
    assert got["with_chain"]["oracle"]["all_solved_s"] <= rule["all_solved_s"] <= fixed
    # more strategies to choose from: never slower
    assert got["with_chain"]["oracle"]["all_solved_s"] <= got["demonstrated"]["oracle"]["all_solved_s"]


def test_best_rule_by_hand():
    # problems of chain depth 1, 2, 4; strategies 0-1 plain, 2 chain-aware
    T = np.array([[3.0, 4.0, 9.0],
                  [2.0, 6.0, 8.0],
                  [5.0, 5.0, 6.0]])
    is_chain, depth = np.array([False, False, True]), np.array([1, 2, 4])
    # d=1: chain everywhere, 6; d=2: max(2, 6) = 6; d=4: plain 0 on problems 0-1 (4), chain on
    # problem 2 (6) -> 6; the first d that reaches the best wins
    assert ceilings.best_rule(T, is_chain, depth) == (6.0, 1, 0, 2)
    T[2, 0] = 7.0  # now chain everywhere costs 7; d=2: plain 1 on problem 0 (2), chain on the rest (6)
    assert ceilings.best_rule(T, is_chain, depth) == (6.0, 2, 1, 2)
    T[2, 2] = 12.0  # chain-aware is slow everywhere: plain 1 on every problem (d past the deepest)
    assert ceilings.best_rule(T, is_chain, depth) == (8.0, 5, 1, 2)


def test_hierarchy_table_has_posting_and_recomputing_teams(tmp_path, monkeypatch, capsys):
    out = tmp_path / "hier.json"
    monkeypatch.setattr(sys, "argv", ["scripted_ceilings.py", "--hierarchy", "5", "--items", "6", "--problems", "2",
                                      "--limits", "4,8,16", "--json", str(out), "workflow.max_experts=4"])
    ceilings.main()
    got = json.loads(out.read_text())["5"]
    # a team of 5: the CEO and 4 experts, flat or under 2 managers, posting or recomputing
    assert set(got) == {"solo", "team4/board/wait/ceo-works", "team4/board/wait/ceo-works/managers2",
                        "team4/board/recompute/ceo-works", "team4/board/recompute/ceo-works/managers2"}
    for name, by_limit in got.items():
        solved = [by_limit[L]["useful_work"] for L in ("4.0", "8.0", "16.0")]
        assert solved == sorted(solved) and solved[-1] <= 6, name  # items only accumulate, at most 6
    assert got["team4/board/recompute/ceo-works"]["16.0"]["messages_per_rollout"] == 0  # recomputing teams never post
    assert "t4/recompute/managers2" in capsys.readouterr().out
