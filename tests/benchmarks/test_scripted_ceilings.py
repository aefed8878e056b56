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
    # more strategies to choose from: never slower
    assert got["with_chain"]["oracle"]["all_solved_s"] <= got["demonstrated"]["oracle"]["all_solved_s"]
