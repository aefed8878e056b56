"""Scaling evaluation: one row per (team size, limit); time-to-score on a constructed table; bad input."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from swarmrl.config import ConfigError, load_config
from swarmrl.policy.model import build_tiny_policy
from swarmrl.diagnostics.collective import at_limit, token_counter
from swarmrl.scaling.scale import (ScaleSpec, check_same_task, check_spec, run_scaling, scale_rollouts, score_at,
                                   standard_error, summarize, time_to_score, write_table)

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml"


def table(curves: dict[int, list[float]], limits: list[float]) -> list[dict]:
    return [{"team_size": k, "time_limit_s": L, "score_mean": s, "total_tokens_per_rollout": 100.0 * k + L,
             "generated_tokens_per_rollout": 10.0 * k}
            for k, ss in curves.items() for L, s in zip(limits, ss)]


LIMITS = [2.0, 4.0, 6.0, 8.0, 12.0]
ROWS = table({1: [0.0, 0.25, 0.5, 0.625, 0.625],   # single agent: best 0.625, first reached at 8 s
              2: [0.0, 0.375, 0.625, 0.75, 0.875],  # reaches 0.625 at 6 s
              4: [0.125, 0.5, 0.75, 0.875, 1.0],    # reaches 0.625 at 6 s (0.5 < 0.625 at 4 s)
              8: [0.0, 0.125, 0.25, 0.5, 0.5]},     # never reaches it
             LIMITS)


def test_time_to_score_on_a_constructed_table():
    assert time_to_score(ROWS, 1, 0.625) == 8.0
    assert time_to_score(ROWS, 2, 0.625) == 6.0
    assert time_to_score(ROWS, 4, 0.625) == 6.0
    assert time_to_score(ROWS, 8, 0.625) is None
    assert time_to_score(ROWS, 4, 0.1) == 2.0
    # rows in any order give the same answer
    assert time_to_score(list(reversed(ROWS)), 2, 0.625) == 6.0


def test_time_to_score_is_exact_from_the_score_steps():
    # Team 2's steps: 0.625 first at 5.25 s, between the grid's 4 and 6 s; tokens stay the grid's.
    rows = [dict(r) for r in ROWS]
    rows[9]["score_steps"] = [[0.0, 0.0], [1.5, 0.25], [5.25, 0.625], [11.0, 0.875]]  # team 2 at 12 s
    assert rows[9]["team_size"] == 2 and rows[9]["time_limit_s"] == 12.0
    assert time_to_score(rows, 2, 0.625) == 5.25 and time_to_score(rows, 2, 0.625, grid=True) == 6.0
    assert time_to_score(rows, 2, 0.9) is None and time_to_score(rows, 2, 0.0) == 0.0
    assert time_to_score(rows, 4, 0.625) == 6.0  # no steps for team 4: the grid
    by = summarize(rows)["by_team_size"]["2"]
    assert by["time_to_single_agent_score_s"] == 5.25 and by["grid_time_to_single_agent_score_s"] == 6.0
    assert by["tokens_at_that_limit"] == 206.0  # the row at 6 s


def test_summary_on_a_constructed_table():
    s = summarize(ROWS)
    assert s["single_agent_best_score"] == 0.625
    by = s["by_team_size"]
    assert by["1"]["time_to_single_agent_score_s"] == 8.0 and by["1"]["tokens_at_that_limit"] == 108.0
    assert by["2"]["time_to_single_agent_score_s"] == 6.0 and by["2"]["tokens_at_that_limit"] == 206.0
    assert by["8"]["time_to_single_agent_score_s"] is None and by["8"]["tokens_at_that_limit"] is None
    assert by["4"]["best_score"] == 1.0 and by["4"]["best_score_limit_s"] == 12.0
    assert score_at(ROWS, 2, 7.0) == 0.625 and score_at(ROWS, 2, 1.0) is None


def test_run_scaling_table_has_one_row_per_cell(tmp_path):
    cfg = load_config(TINY, ["eval.problems=2"])
    spec = ScaleSpec(team_sizes=[4, 1, 2], time_limits_s=[3.0, 1.0, 2.0, 3.0], problems=2)
    rows = run_scaling(cfg, build_tiny_policy(cfg.model), spec, log=lambda *_: None)
    assert [(r["team_size"], r["time_limit_s"]) for r in rows] == [(k, L) for k in (1, 2, 4) for L in (1.0, 2.0, 3.0)]
    for k in (1, 2, 4):
        got = [r for r in rows if r["team_size"] == k]
        assert all(r["team_size_mean"] <= k for r in got)  # the cap holds
        assert [r["score_mean"] for r in got] == sorted(r["score_mean"] for r in got)  # monotone in the budget
        assert [r["total_tokens_per_rollout"] for r in got] == sorted(r["total_tokens_per_rollout"] for r in got)
        steps = got[-1]["score_steps"]  # the horizon row carries the exact curve up to it
        assert steps[0][0] == 0.0 and steps[-1][1] == got[-1]["score_mean"] and all(t <= 3.0 for t, _ in steps)
        assert all(r["score_mean"] == max(s for t, s in steps if t <= r["time_limit_s"]) for r in got)
    paths = write_table(rows, summarize(rows), tmp_path)
    assert len(paths[1].read_text().strip().splitlines()) == 1 + 9


def test_greedy_scaling_does_not_depend_on_the_sampling_temperature():
    # Greedy decoding takes the most likely token: the temperature that sampling would divide the
    # logits by cannot change it, so two temperatures give the same table (one process, same batches).
    spec = ScaleSpec([1, 3], [1.0, 3.0], problems=2, greedy=True)
    assert check_spec(load_config(TINY, []), spec).greedy
    got = []
    for t in ("1.0", "0.3"):
        cfg = load_config(TINY, [f"sampler.temperature={t}"])
        got.append(run_scaling(cfg, build_tiny_policy(cfg.model), spec, log=lambda *_: None))
    assert got[0] == got[1] and all(r["greedy"] for r in got[0])


def test_standard_error_by_hand():
    assert standard_error([0.0, 1.0]) == pytest.approx(0.5)  # sample sd sqrt(0.5), over sqrt(2)
    assert standard_error([0.25, 0.5, 0.75, 1.0]) == pytest.approx(math.sqrt(0.3125 / 3 / 4))  # squares sum 0.3125
    assert standard_error([0.5, 0.5]) == 0.0 and standard_error([0.3]) is None


def test_each_cell_carries_the_standard_error_of_its_rollouts_scores(tmp_path):
    cfg = load_config(TINY, [])
    policy = build_tiny_policy(cfg.model)
    spec = check_spec(cfg, ScaleSpec([1, 3], [1.0, 3.0], problems=4))
    rows = run_scaling(cfg, policy, spec, log=lambda *_: None)
    by_size, count = scale_rollouts(cfg, policy, spec, log=lambda *_: None), token_counter(policy.tokenizer)
    for r in rows:
        scores = [at_limit(x, r["time_limit_s"], count).score for x in by_size[r["team_size"]]]
        assert r["score_se"] == pytest.approx(statistics.stdev(scores) / math.sqrt(len(scores)))
    csv_text = write_table(rows, summarize(rows), tmp_path)[1].read_text().splitlines()
    assert csv_text[0].split(",")[3] == "score_se" and len(csv_text) == 1 + len(rows)


def _replies(cfg, policy, spec) -> tuple[list, list[list[str]]]:
    by_size = scale_rollouts(cfg, policy, check_spec(cfg, spec), log=lambda *_: None)
    rollouts = [r for k in sorted(by_size) for r in by_size[k]]
    return [r.problem for r in rollouts], [[t.reply for t in r.turns] for r in rollouts]


def test_a_sampling_seed_redraws_the_samples_on_the_same_problems():
    cfg = load_config(TINY, ["sampler.temperature=1.0"])
    policy = build_tiny_policy(cfg.model)
    spec = dict(team_sizes=[1, 3], time_limits_s=[3.0], problems=3)
    default = _replies(cfg, policy, ScaleSpec(**spec))
    assert _replies(cfg, policy, ScaleSpec(**spec, seed=cfg.task.eval_seed)) == default  # None means eval_seed
    problems, replies = _replies(cfg, policy, ScaleSpec(**spec, seed=7))
    assert problems == default[0] and replies != default[1]
    greedy = [_replies(cfg, policy, ScaleSpec(**spec, greedy=True, seed=s)) for s in (None, 7)]
    assert greedy[0] == greedy[1]  # nothing is drawn


def test_prestaffed_teams_are_the_full_size():
    cfg = load_config(TINY, [])
    rows = run_scaling(cfg, build_tiny_policy(cfg.model), ScaleSpec([1, 3], [0.5, 2.0], 2, prestaffed=True),
                       log=lambda *_: None)
    assert {r["team_size"]: r["team_size_mean"] for r in rows} == {1: 1.0, 3: 3.0}
    assert all(r["team_hired_per_rollout"] == r["team_size"] - 1 for r in rows)


@pytest.mark.parametrize("spec, msg", [
    (ScaleSpec([1, 2], [0.0, 4.0]), "time limits must be > 0"),
    (ScaleSpec([1, 2], [-3.0]), "time limits must be > 0"),
    (ScaleSpec([1, 66], [4.0]), r"team sizes must be in 1..65"),  # eval.max_team_size, not the training cap
    (ScaleSpec([0], [4.0]), r"team sizes must be in 1..65"),
    (ScaleSpec([1], [4.0], problems=0), "problems must be >= 1"),
    (ScaleSpec([1], [4.0], seed=-1), "sampling seed must be an integer >= 0"),
])
def test_bad_input(spec, msg):
    with pytest.raises(ConfigError, match=msg):
        check_spec(load_config(TINY, []), spec)


def test_checkpoint_from_another_task_is_refused():
    cfg = load_config(TINY, [])
    trained = cfg.to_dict()
    check_same_task(trained, cfg)  # same task: fine
    trained["task"]["items_per_problem"] = 8
    with pytest.raises(ConfigError, match="checkpoint is from another task.*items_per_problem"):
        check_same_task(trained, cfg)


def test_a_run_from_before_a_task_key_existed_reads_as_its_default():
    cfg = load_config(TINY, [])
    trained = cfg.to_dict()
    del trained["task"]["label_pool"]  # a run written before the key was added
    check_same_task(trained, cfg)
    with pytest.raises(ConfigError, match=r"label_pool': \(0, 64\)"):
        check_same_task(trained, load_config(TINY, ["task.label_pool=64"]))


def test_summary_against_a_reference_single_agent():
    ref = table({1: [0.125, 0.375, 0.5, 0.5, 0.5]}, LIMITS)  # best 0.5, first at 6 s
    s = summarize(ROWS, reference=ref)
    assert s["reference_single_best_score"] == 0.5 and s["reference_time_to_its_best_s"] == 6.0
    by = s["by_team_size"]
    assert by["4"]["time_to_reference_score_s"] == 4.0 and by["4"]["tokens_at_reference_score"] == 404.0
    assert by["2"]["time_to_reference_score_s"] == 6.0 and by["8"]["time_to_reference_score_s"] == 8.0
    assert by["1"]["time_to_single_agent_score_s"] == 8.0  # the plain comparison is unchanged


def test_scripted_solo_reference_is_a_perfect_single_agent():
    from swarmrl.scaling.scale import scripted_solo_rows
    # 3 turns: the policies' loop guard would stop a single agent after 2 of its 4 items (a turn
    # takes them, one solves each); the script is bounded by time alone
    cfg = load_config(TINY, ["sampler.max_turns_per_agent=3"])
    rows = scripted_solo_rows(cfg, build_tiny_policy(cfg.model), ScaleSpec([1], [1.0, 30.0], problems=3))
    assert [r["time_limit_s"] for r in rows] == [1.0, 30.0]
    assert rows[0]["score_mean"] < 1.0 and rows[1]["score_mean"] == 1.0  # every item, given the time
    assert rows[1]["team_size_mean"] == 1.0 and rows[1]["messages_per_rollout"] == 0.0


def test_cli_scale_on_a_run_and_a_checkpoint_from_another_task(tmp_path, capsys):
    import json

    from swarmrl.cli import main
    from swarmrl.policy.model import save_policy
    from swarmrl.rl.loop import train
    cfg = load_config(TINY, ["rl.steps=1"])
    save_policy(build_tiny_policy(cfg.model), tmp_path / "init")
    run = train(cfg, tmp_path / "run", init_policy=tmp_path / "init", log=lambda *_: None)
    out = tmp_path / "scale"
    assert main(["scale", str(run.path), "--team-sizes", "1,2", "--time-limits", "1,3", "--problems", "2",
                 "--greedy", "--seed", "5", "--out", str(out)]) == 0
    got = json.loads((out / "scaling.json").read_text())
    rows = got["rows"]
    assert [(r["team_size"], r["time_limit_s"]) for r in rows] == [(1, 1.0), (1, 3.0), (2, 1.0), (2, 3.0)]
    assert all(r["greedy"] for r in rows)
    # what was scored, and how: a table that can be traced to its checkpoint
    from swarmrl.runs.checkpoint import latest_checkpoint
    from swarmrl.runs.manifest import weights_digest
    scored = weights_digest([run.path / "model", latest_checkpoint(run.path)])
    assert got["source"] == {"model": str(run.path.resolve()), "greedy": True, "problems": 2, "prestaffed": False,
                             "items_per_problem": cfg.task.items_per_problem, "seed": 5, "weights_sha256": scored}
    assert scored != weights_digest([run.path / "model"])  # the trained weights, not the init alone
    assert (out / "score_vs_latency.png").stat().st_size > 0 and (out / "scaling.csv").exists()
    # The task has scripts: the perfect single agent ran on the same problems and limits.
    ref = json.loads((out / "scripted_solo.json").read_text())["rows"]
    assert [r["time_limit_s"] for r in ref] == [1.0, 3.0] and all(r["actor"] == "scripted_solo" for r in ref)
    assert got["summary"]["reference_single_best_score"] == max(r["score_mean"] for r in ref)
    printed = " ".join(capsys.readouterr().out.split())  # rich wraps lines at the terminal width
    assert "perfect scripted single agent: best" in printed and "greedy" in printed
    # The same run scored with a config of another task shape: a clear error, not a silent score.
    assert main(["scale", str(run.path), "--config", str(TINY), "task.items_per_problem=6", "--team-sizes", "1,2",
                 "--out", str(out)]) == 2
    assert "checkpoint is from another task" in capsys.readouterr().err
