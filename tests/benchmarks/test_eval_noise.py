"""benchmarks/eval_noise.py's statistics on hand-made grids, against hand computation."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("eval_noise", ROOT / "benchmarks" / "eval_noise.py")
eval_noise = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval_noise)


def g(one: list[float], two: list[float]) -> dict:
    """A grid of teams 1 and 2 at limits 5 and 10 s."""
    return {(1, 5.0): one[0], (1, 10.0): one[1], (2, 5.0): two[0], (2, 10.0): two[1]}


A = g([0.2, 0.5], [0.3, 0.8])
B = g([0.25, 0.4], [0.3, 0.9])
C = g([0.2, 0.45], [0.35, 0.7])


def test_worst_difference_is_the_lowest_over_the_limits():
    # team 1: 0.2-0.25 = -0.05, 0.5-0.4 = +0.1; team 2: 0, -0.1
    got = eval_noise.worst_difference(A, B, teams=(1, 2))
    assert got[1] == pytest.approx(-0.05) and got[2] == pytest.approx(-0.1)


def test_null_readings_cover_every_ordered_pair():
    got = eval_noise.null_readings([A, B, C], teams=(1, 2))
    assert len(got) == 6  # 3 draws: (A,B) (A,C) (B,A) (B,C) (C,A) (C,B)
    # (B, A): team 1 min(+0.05, -0.1) = -0.1; team 2 min(0, +0.1) = 0
    assert got[2][1] == pytest.approx(-0.1) and got[2][2] == pytest.approx(0.0)


def test_mean_difference_and_its_standard_error():
    trained, ws = [A, B], [C, C]
    d = eval_noise.mean_difference(trained, ws)
    # team 1 at 10 s: mean(0.5, 0.4) - 0.45 = 0; variance of (0.5, 0.4) = 0.005, of (0.45, 0.45) = 0
    m, se = d[(1, 10.0)]
    assert m == pytest.approx(0.0, abs=1e-12) and se == pytest.approx(math.sqrt(0.005 / 2))
    # team 2 at 10 s: mean(0.8, 0.9) - 0.7 = 0.15
    assert d[(2, 10.0)][0] == pytest.approx(0.15)
    worst = eval_noise.worst_mean(d, teams=(1, 2))
    # team 1: 5 s gives mean(0.2, 0.25) - 0.2 = +0.025, 10 s gives 0: the worst is 10 s
    assert worst[1]["limit_s"] == 10.0 and worst[1]["z_from_tolerance"] == pytest.approx(0.05 / math.sqrt(0.0025))
    # team 2: 5 s gives 0.3 - 0.35 = -0.05 with no spread on either side: no z
    assert worst[2]["mean"] == pytest.approx(-0.05) and worst[2]["se"] == 0.0 and worst[2]["z_from_tolerance"] is None


def test_summary_counts_the_draws_that_pass():
    s = eval_noise.summarize([A, C], {"run": [B, dict(C)]}, teams=(1, 2))
    # draw 0, B against A: team 1 reads -0.1 (fails); draw 1, C against itself: 0 (passes)
    assert s["runs"]["run"]["draws_passing"] == 1
    assert s["runs"]["run"]["per_draw"][0][1] == pytest.approx(-0.1)
    # the null: (A, C) team 2 min(-0.05, +0.1) = -0.05 passes (>= -0.05, to rounding); (C, A) team 1
    # min(0, -0.05) and team 2 min(+0.05, -0.1) = -0.1 fails
    assert s["null"]["pairs"] == 2 and s["null"]["worst_by_team"][2] == pytest.approx([-0.1, -0.05])


def test_end_to_end_on_a_tiny_run(tmp_path, capsys):
    import json

    from swarmrl.config import load_config
    from swarmrl.policy.model import build_tiny_policy, save_policy
    from swarmrl.rl.loop import train
    tiny = ROOT / "configs" / "tiny_test.yaml"
    cfg = load_config(tiny, ["rl.steps=1", "sampler.temperature=1.0"])
    save_policy(build_tiny_policy(cfg.model), tmp_path / "init")
    run = train(cfg, tmp_path / "run", init_policy=tmp_path / "init", log=lambda *_: None)
    out = tmp_path / "noise.json"
    assert eval_noise.main([str(run.path), "--warm-start", str(tmp_path / "init"), "--draws", "2", "--problems", "2",
                            "--team-sizes", "1,2", "--time-limits", "1,3", "--json", str(out),
                            "--plot", str(tmp_path / "noise.png")]) == 0
    got = json.loads(out.read_text())
    assert got["settings"]["seeds"] == [cfg.task.eval_seed, cfg.task.eval_seed + 1]
    assert got["null"]["pairs"] == 2 and len(got["runs"]["run"]["per_draw"]) == 2
    assert len(got["grids"]["warm_start"]) == 2 and len(got["grids"]["warm_start"][0]) == 4  # 2 teams x 2 limits
    assert (tmp_path / "noise.png").stat().st_size > 0
    assert "the check passes on" in capsys.readouterr().out


def test_the_problem_set_tally_by_hand_and_on_the_committed_records():
    ps_spec = importlib.util.spec_from_file_location(
        "problem_sets", ROOT / "benchmarks" / "small_teams" / "eval_noise" / "problem_sets.py")
    problem_sets = importlib.util.module_from_spec(ps_spec)
    ps_spec.loader.exec_module(problem_sets)
    c = {"x_perfect": 3.2, "x_own": 2.9, "reach_ratio": 0.4, "worst_minus_warm_start": {"1": -0.05, "2": 0.1}}
    assert problem_sets.passes(c) == {"3x": False, "1.0 by 0.4x": True, "small teams": True}
    c = {"x_perfect": 3.0, "x_own": 3.0, "reach_ratio": None, "worst_minus_warm_start": {"1": -0.051}}
    assert problem_sets.passes(c) == {"3x": True, "1.0 by 0.4x": False, "small teams": False}
    records = problem_sets.load()
    assert len(records) == 5 and all(len(sets) == 4 for sets in records.values())
    assert records["eval_noise_s0"]["1000003"]["reach_ratio"] == pytest.approx(0.355, abs=5e-4)  # the README's
