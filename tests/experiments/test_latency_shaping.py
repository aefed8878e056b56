"""The latency-shaping experiment: config errors, the checks on constructed tables, CLI bad input."""

from __future__ import annotations

import json
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
    assert tl["items_ratio_best_team_vs_single_at_tight"] == 2.5 and not c["check_items_3x_at_tight"]
    assert tl["train/ref/messages_per_rollout"]["ratio"] == pytest.approx(1.75) and c["check_messages_rise_1.5x"]
    assert tl["train/ref/expert_work_share"]["change"] == pytest.approx(0.3) and c["check_expert_share_rises"]
    # single agent's best 0.75 first at 10 s; the team of 4 reaches it at 7 s
    assert tl["time_to_single_agent_score_s"] == {1: 10.0, 4: 7.0} and c["check_team_reaches_single_best_sooner"]
    assert c["check_none_rises_less"] == {"messages": True, "expert_share": True}
    # under none the team reaches 0.75 only at 10 s too: not sooner
    assert c["arms"]["none"]["team_beats_single_to_its_best"] is False


def test_reference_checks_need_3x_the_items_and_0_4x_the_latency():
    cfg = load_config(None, ["time_limit.start=4", "time_limit.end=5"])
    limits = [2.0, 4.0, 5.0, 8.0, 10.0]
    ref = _rows({1: [0.0, 0.125, 0.25, 0.5, 1.0]}, limits)  # 1 item at 4 s; its best (1.0) first at 10 s
    for team4, items_ok, latency_ok in (
            ([0.0, 0.375, 0.75, 1.0, 1.0], True, False),    # 3 items at 4 s (3x); 1.0 at 8 s = 0.8x the time
            ([0.0, 0.25, 1.0, 1.0, 1.0], False, False),     # 2 items (2x); 1.0 at 5 s = 0.5x
            ([0.25, 0.5, 1.0, 1.0, 1.0], True, False),      # 4 items (4x); 1.0 at 5 s = 0.5x
            ([0.5, 1.0, 1.0, 1.0, 1.0], True, True)):       # 8 items (8x); 1.0 at 4 s = 0.4x
        tables = {"time_limit": _rows({1: [0.0, 0.125, 0.25, 0.5, 1.0], 4: team4}, limits)}
        summaries = {"time_limit": summarize(tables["time_limit"], ref)}
        c = compute_checks(cfg, {"time_limit": _train([2.0] * 20, [0.5] * 20)}, tables, summaries, ref)
        assert c["check_items_3x_reference_at_tight"] is items_ok, team4
        assert c["check_team_reaches_reference_best_at_0.4x"] is latency_ok, team4


def test_a_share_rise_within_the_noise_is_not_a_rise():
    cfg = load_config(None, ["time_limit.start=6", "time_limit.end=7"])
    tables = {"time_limit": _rows({1: [0.25], 4: [0.5]}, [6.0])}
    # Per-step shares alternate 0.5/0.9 (+0.05 in the last window): std 0.2108, s.e. of each window
    # mean 0.2108/sqrt(10) = 0.0667, of the change hypot(0.0667, 0.0667) = 0.0943 > 0.05 / 2.
    noisy = [0.5, 0.9] * 5 + [0.55, 0.95] * 5
    c = compute_checks(cfg, {"time_limit": _train([2.0] * 20, noisy)}, tables, {"time_limit": summarize(tables["time_limit"])})
    e = c["arms"]["time_limit"]["train/ref/expert_work_share"]
    assert e["change"] == pytest.approx(0.05) and e["change_se"] == pytest.approx(0.0943, abs=1e-4)
    assert c["check_expert_share_rises"] is False
    # The same rise with steady per-step values is real.
    steady = [0.70] * 10 + [0.75] * 10
    c = compute_checks(cfg, {"time_limit": _train([2.0] * 20, steady)}, tables, {"time_limit": summarize(tables["time_limit"])})
    assert c["check_expert_share_rises"] is True


def test_the_shipped_experiment_config_is_valid():
    exp = load_experiment(REPO / "configs" / "experiments" / "latency_shaping.yaml")
    cfgs = arm_configs(exp, resolve_config)
    assert {a: c.shaping.mode for a, c in cfgs.items()} == {"time_limit": "time_limit", "penalty": "penalty", "none": "none"}
    assert len({(c.rl.steps, c.seed, c.rl.problems_per_step) for c in cfgs.values()}) == 1  # same budget and seed


def test_experiment_bad_input(tmp_path):
    p = tmp_path / "e.yaml"
    p.write_text(f"base: {TINY}\narms: {{a: [shaping.mode=none]}}\nscale: {{team_sizes: [1, 99]}}\n")
    with pytest.raises(ConfigError, match="team sizes must be in 1..65"):
        arm_configs(load_experiment(p), resolve_config)
    p.write_text(f"base: {TINY}\narms: {{a: [time_limit.start=0]}}\n")
    with pytest.raises(ConfigError, match="time_limit.start must be > 0"):
        arm_configs(load_experiment(p), resolve_config)
    p.write_text(f"base: {TINY}\narm: {{}}\n")
    with pytest.raises(ConfigError, match="did you mean 'arms'"):
        load_experiment(p)


def test_cli_scale_bad_input(tmp_path, capsys):
    assert main(["scale", str(tmp_path), "--config", TINY, "--time-limits", "0,4"]) == 2
    assert "time limits must be > 0" in capsys.readouterr().err
    assert main(["scale", str(tmp_path), "--config", TINY, "--team-sizes", "1,80"]) == 2
    assert "team sizes must be in 1..65" in capsys.readouterr().err
    assert main(["experiment", "nope", "--out", str(tmp_path / "x")]) == 2
    assert "unknown experiment" in capsys.readouterr().err


def test_the_experiment_runs_end_to_end_and_resumes_without_retraining(tmp_path):
    """Two arms x 2 steps on the tiny config from an untrained tiny model: every artifact is
    written, the report carries the checks, and a second invocation reuses the trained arms."""
    from swarmrl.experiments.latency_shaping import ExperimentConfig, rewrite_report, run_experiment
    from swarmrl.policy.model import build_tiny_policy, save_policy
    from swarmrl.scaling.scale import ScaleSpec

    init = tmp_path / "init"
    save_policy(build_tiny_policy(load_config(TINY).model, seed=0), init)
    exp = ExperimentConfig(base=TINY, overrides=["rl.steps=2", "run.checkpoint_every=0", "shaping.safety_cap_s=8"],
                           arms={"time_limit": ["shaping.mode=time_limit"], "none": ["shaping.mode=none"]},
                           scale=ScaleSpec(team_sizes=[1, 2], time_limits_s=[2, 6], problems=2))
    out = tmp_path / "exp"
    report = run_experiment(exp, out, resolve_config, init=init, log=lambda *a: None)
    text = report.read_text()
    assert "## Checks" in text and "time_limit: best team solves >= 3x" in text and "training steps" in text
    assert "## Latency to reach a score" in text and "| perfect scripted single | 1 |" in text
    assert "Same warm start (`init`" in text and str(tmp_path) not in text  # no local path in a shareable report
    for arm in ("warm_start", "time_limit", "none", "scripted_solo"):
        assert (out / "scaling" / f"{arm}.csv").exists()
    assert {p.name for p in (out / "figures").glob("*.png")} >= {"training_at_ref_limit.png", "useful_work_by_team_size.png"}
    import json
    summary = json.loads((out / "summary.json").read_text())
    # the curriculum's ends (tiny: 3 and 4 s) are added to the grid; the report reads the checks there
    assert summary["checks"]["tight_limit_s"] == 3.0 and set(summary["train_s"]) == {"time_limit", "none"}
    rows = json.loads((out / "scaling" / "time_limit.json").read_text())["rows"]
    assert sorted({(r["team_size"], r["time_limit_s"]) for r in rows}) == [(k, L) for k in (1, 2) for L in (2, 3, 4, 6)]
    metrics = (out / "arms" / "time_limit" / "metrics.jsonl").read_text()
    run_experiment(exp, out, resolve_config, init=init, log=lambda *a: None)  # resumes: arms are done
    assert (out / "arms" / "time_limit" / "metrics.jsonl").read_text() == metrics
    # --report-only: the same report and summary from disk, the first invocation's wall time kept
    text, summary = report.read_text(), (out / "summary.json").read_text()
    (out / "report.md").unlink()
    assert rewrite_report(exp, out, resolve_config) == report
    assert report.read_text() == text and (out / "summary.json").read_text() == summary
    (out / "scaling" / "none.json").unlink()
    with pytest.raises(ConfigError, match=r"not a finished run.*none.json.*without --report-only"):
        rewrite_report(exp, out, resolve_config)
    # ... but only arms of this experiment: another config's or another start's finished run is
    # an error, never a result (how a run executes, e.g. its threads, may differ)
    import dataclasses
    threads = dataclasses.replace(exp, overrides=exp.overrides + ["run.threads=1"])
    said = []
    run_experiment(threads, out, resolve_config, init=init, log=said.append)
    assert not any("another machine" in str(m) for m in said)
    # an arm trained on another CPU is this arm, but another draw of it: reused, and said so
    env = out / "arms" / "none" / "environment.jsonl"
    record = json.loads(env.read_text().splitlines()[0])
    env.write_text(json.dumps({**record, "cpu": "another CPU"}) + "\n")
    run_experiment(threads, out, resolve_config, init=init, log=said.append)
    elsewhere = [m for m in said if "another machine" in str(m)]
    assert len(elsewhere) == 1 and "arms/none" in elsewhere[0] and "(cpu differ)" in elsewhere[0]
    longer = dataclasses.replace(exp, overrides=["rl.steps=3", *exp.overrides[1:]])
    with pytest.raises(ConfigError, match=r"arms/time_limit holds a finished run of another config \(rl.steps differ"):
        run_experiment(longer, out, resolve_config, init=init, log=lambda *a: None)
    other = tmp_path / "other_init"
    save_policy(build_tiny_policy(load_config(TINY).model, seed=1), other)
    with pytest.raises(ConfigError, match="the initial weights differ"):
        run_experiment(exp, out, resolve_config, init=other, log=lambda *a: None)
    assert (out / "arms" / "time_limit" / "metrics.jsonl").read_text() == metrics


@pytest.mark.parametrize("path", sorted((REPO / "configs" / "experiments").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_experiment_validates(path):
    """Each arm of each shipped experiment config passes every check a run makes first (the
    demo preset they build on changes; their pinned overrides must keep working)."""
    from swarmrl.build import check_plugins
    for cfg in arm_configs(load_experiment(path), resolve_config).values():
        check_plugins(cfg)
