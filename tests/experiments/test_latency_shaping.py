"""The latency-shaping experiment: config errors, the checks on constructed tables, CLI bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarmrl.cli import main, resolve_config
from swarmrl.config import ConfigError, load_config
from swarmrl.experiments.latency_shaping import arm_configs, compute_checks, load_experiment
from swarmrl.scaling.scale import summarize

REPO = Path(__file__).resolve().parents[2]
TINY = str(REPO / "configs" / "tiny_test.yaml")


def _rows(curves, limits):
    return [{"team_size": k, "time_limit_s": L, "score_mean": s, "useful_work": 8 * s, "total_tokens_per_rollout": 1.0,
             "generated_tokens_per_rollout": 1.0} for k, ss in curves.items() for L, s in zip(limits, ss)]


def _train(msgs, share):
    return [{"step": i, "ref/messages_per_rollout": m, "ref/expert_work_share": e} for i, (m, e) in enumerate(zip(msgs, share))]


def test_checks_on_constructed_data():
    cfg = load_config(None, ["time_limit.start=6", "time_limit.end=7"])
    limits = [4.0, 6.0, 7.0, 10.0]
    tables = {"time_limit": _rows({1: [0.125, 0.25, 0.375, 0.75], 4: [0.25, 0.625, 0.75, 1.0]}, limits),
              "none": _rows({1: [0.125, 0.25, 0.375, 0.75], 4: [0.125, 0.375, 0.5, 0.75]}, limits)}
    runs = {"time_limit": _train([2.0] * 10 + [3.5] * 10, [0.5] * 10 + [0.8] * 10),
            "none": _train([2.0] * 10 + [2.2] * 10, [0.5] * 10 + [0.5] * 10)}
    c = compute_checks(cfg, runs, tables, {a: summarize(t) for a, t in tables.items()})
    tl = c["arms"]["time_limit"]
    assert tl["items_single_at_tight"] == 2.0 and tl["items_by_team_at_tight"] == {4: 5.0}
    assert tl["items_ratio_best_team_vs_single_at_tight"] == 2.5 and c["check_items_2x_at_tight"]
    assert tl["train/ref/messages_per_rollout"]["ratio"] == pytest.approx(1.75) and c["check_messages_rise_1.5x"]
    assert tl["train/ref/expert_work_share"]["change"] == pytest.approx(0.3) and c["check_expert_share_rises"]
    # single agent's best 0.75 first at 10 s; the team of 4 reaches it at 7 s
    assert tl["time_to_single_agent_score_s"] == {1: 10.0, 4: 7.0} and c["check_team_reaches_single_best_sooner"]
    assert c["check_none_rises_less"] == {"messages": True, "expert_share": True}
    # under none the team reaches 0.75 only at 10 s too: not sooner
    assert c["arms"]["none"]["team_beats_single_to_its_best"] is False


def test_the_shipped_experiment_config_is_valid():
    exp = load_experiment(REPO / "configs" / "experiments" / "latency_shaping.yaml")
    cfgs = arm_configs(exp, resolve_config)
    assert {a: c.shaping.mode for a, c in cfgs.items()} == {"time_limit": "time_limit", "penalty": "penalty", "none": "none"}
    assert len({(c.rl.steps, c.seed, c.rl.problems_per_step) for c in cfgs.values()}) == 1  # same budget and seed


def test_experiment_bad_input(tmp_path):
    p = tmp_path / "e.yaml"
    p.write_text(f"base: {TINY}\narms: {{a: [shaping.mode=none]}}\nscale: {{team_sizes: [1, 9]}}\n")
    with pytest.raises(ConfigError, match="team sizes must be in 1..4"):
        arm_configs(load_experiment(p), resolve_config)
    p.write_text(f"base: {TINY}\narms: {{a: [time_limit.start=0]}}\n")
    with pytest.raises(ConfigError, match="time_limit.start must be > 0"):
        arm_configs(load_experiment(p), resolve_config)
    p.write_text(f"base: {TINY}\narm: {{}}\n")
    with pytest.raises(ConfigError, match="did you mean 'arms'"):
        load_experiment(p)


def test_cli_scale_bad_input(tmp_path, capsys):
    assert main(["scale", str(tmp_path), "--config", TINY, "--time-limits", "0,4"]) == 2
    assert "time limits must be > 0" in capsys.readouterr().out
    assert main(["scale", str(tmp_path), "--config", TINY, "--team-sizes", "1,8"]) == 2
    assert "team sizes must be in 1..4" in capsys.readouterr().out
    assert main(["experiment", "nope", "--out", str(tmp_path / "x")]) == 2
    assert "unknown experiment" in capsys.readouterr().out
