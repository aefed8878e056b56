"""The `swarmrl` CLI end to end on configs/tiny_test.yaml: smoke, resume, determinism, eval.
Bad input: test_cli_errors.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from swarmrl.cli import main
from swarmrl.rl.advantages import ADVANTAGES, register_advantage
from swarmrl.runs.rundir import wall_clock

REPO = Path(__file__).resolve().parents[1]
TINY = str(REPO / "configs" / "tiny_test.yaml")
DESIGN_KEYS = ["step", "score_mean", "reward_mean", "time_limit", "latency_mean", "team_size_mean", "useful_work",
               "messages_per_rollout", "message_tokens_per_rollout", "loss", "grad_norm", "entropy", "tokens_per_s"]

# The tiny warm start rarely scores, so the collective advantage is usually 0 and the
# weights would never move; resume and determinism need updates that really change them.
SPREAD = "_test_spread"
if SPREAD not in ADVANTAGES:
    @register_advantage(SPREAD)
    def _spread(rewards: torch.Tensor, groups: torch.Tensor, rollouts: torch.Tensor, roles: torch.Tensor) -> torch.Tensor:
        return rewards - rewards.mean() + torch.linspace(-1.0, 1.0, len(rewards))  # [S], never all 0


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> str:
    """One warm start for the whole file (cached under a temporary directory)."""
    d = tmp_path_factory.mktemp("warmstart")
    assert main(["pretrain", TINY, f"warmstart.cache_dir={d}"]) == 0
    assert len(list(d.glob("warmstart-*"))) == 1
    return f"warmstart.cache_dir={d}"


@pytest.fixture(scope="module")
def smoke_run(cache, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("runs") / "smoke"
    assert main(["train", TINY, "--out", str(run), cache]) == 0
    return run


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def timeless(rs: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not wall_clock(k)} for r in rs]


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path))


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def output(capsys) -> str:
    return capsys.readouterr().out.replace("\n", "")  # rich wraps long lines


def error_output(capsys) -> str:
    """What a failed command printed, which goes to standard error: `swarmrl ... > log` still shows it."""
    captured = capsys.readouterr()
    assert "error:" not in captured.out
    return captured.err.replace("\n", "")


def test_demo_runs_end_to_end_and_times_its_phases(cache, tmp_path, capsys):
    """`swarmrl demo` on the tiny config: before / after evaluations, the run, the report, and a
    summary whose phases add up to at most its wall time (the RL steps run inside training)."""
    out = tmp_path / "demo"
    assert main(["demo", "--config", TINY, "--out", str(out), cache]) == 0
    summary = json.loads((out / "demo_summary.json").read_text())
    phases = summary["phases_s"]
    assert set(phases) == {"warm_start", "evaluate_before", "train", "evaluate_after", "report", "rl_steps"}
    added = [v for k, v in phases.items() if k != "rl_steps"]
    assert sum(added) <= summary["wall_s"] + 0.005 * len(added)  # each phase is rounded to 10 ms
    assert 0 < phases["rl_steps"] <= phases["train"]
    assert summary["score_before"] == summary["eval_before"]["score_mean"]
    assert summary["eval_after"]["problems"] == 4 and len(rows(out)) == 2 and (out / "report.html").exists()
    assert "RL steps" in output(capsys)


def test_smoke_train_writes_a_complete_run_directory(smoke_run, cache):
    run = smoke_run
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["rl"]["steps"] == 2 and cfg["model"]["hidden_size"] == 32
    assert cfg["warmstart"]["cache_dir"] == cache.split("=", 1)[1]
    metrics = rows(run)
    assert [r["step"] for r in metrics] == [0, 1]
    for r in metrics:
        missing = [k for k in DESIGN_KEYS if k not in r]
        assert not missing
        assert any(k.startswith("role/") and k.count("/") == 2 for k in r)
        assert all(isinstance(r[k], (int, float)) for k in DESIGN_KEYS)
    # the deadline curriculum: 3.0 at step 0, halfway (3.5) at step 1 of a 2-step ramp
    assert [r["time_limit"] for r in metrics] == [3.0, 3.5]
    samples = sorted((run / "samples").glob("*.jsonl"))
    assert [p.name for p in samples] == ["step_0000.jsonl", "step_0001.jsonl"]
    for p in samples:
        lines = [json.loads(x) for x in p.read_text().splitlines()]
        assert len(lines) == 1  # run.samples_per_step = 1
        traj = lines[0]
        assert "turns" in traj and "messages" in traj and traj["turns"]
        assert {"agent", "role", "start", "end", "observation", "reply"} <= set(traj["turns"][0])
    for step in (1, 2):
        assert (run / "checkpoints" / f"step_{step}" / "manifest.json").is_file()
        assert (run / "checkpoints" / f"step_{step}" / "policy.safetensors").is_file()
    manifest = json.loads((run / "checkpoints" / "step_2" / "manifest.json").read_text())
    assert manifest["step"] == 2
    assert list((run / "plots").glob("*.png"))


@pytest.fixture(scope="module")
def spread_runs(cache, tmp_path_factory):
    """B and B2: the same 2-step config twice; C: the same config for 4 steps straight."""
    root = tmp_path_factory.mktemp("spread")
    for name, extra in (("B", []), ("B2", []), ("C", ["rl.steps=4"])):
        assert main(["train", TINY, "--out", str(root / name), cache, f"rl.advantage={SPREAD}", *extra]) == 0
    return root


def test_same_config_gives_identical_metrics_and_weights(spread_runs):
    b, b2 = spread_runs / "B", spread_runs / "B2"
    assert len(rows(b)) == 2
    assert timeless(rows(b)) == timeless(rows(b2))
    assert any(r["grad_norm"] > 0 for r in rows(b))  # the updates were real
    assert same_weights(weights(b / "checkpoints/step_2/policy.safetensors"),
                        weights(b2 / "checkpoints/step_2/policy.safetensors"))
    assert (b / "samples/step_0001.jsonl").read_text() == (b2 / "samples/step_0001.jsonl").read_text()


def test_resume_equals_a_straight_run(spread_runs, capsys):
    b, c = spread_runs / "B", spread_runs / "C"
    before = weights(b / "checkpoints/step_2/policy.safetensors")
    # resume B, with its step count raised to C's
    cfg_path = b / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["rl"]["steps"] = 4
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert main(["train", "--resume", str(b)]) == 0
    assert "resuming" in output(capsys)
    assert [r["step"] for r in rows(b)] == [0, 1, 2, 3]
    assert timeless(rows(b)) == timeless(rows(c))
    final_b = weights(b / "checkpoints/step_4/policy.safetensors")
    final_c = weights(c / "checkpoints/step_4/policy.safetensors")
    assert same_weights(final_b, final_c)
    assert not same_weights(before, final_b)  # steps 2-3 really changed the weights
    assert same_weights(weights(b / "final/model.safetensors"), weights(c / "final/model.safetensors"))


def test_corrupt_checkpoint_is_refused_naming_the_file(smoke_run, tmp_path, capsys):
    run = tmp_path / "copy"
    shutil.copytree(smoke_run, run)
    target = run / "checkpoints" / "step_2" / "policy.safetensors"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 2
    printed = capsys.readouterr()
    assert f"skipping checkpoint step_2: corrupt checkpoint file {target}" in printed.out.replace("\n", "")
    assert printed.err.startswith("error: ")


def test_unknown_override_key_suggests_the_closest(tmp_path, capsys):
    assert main(["train", TINY, "--out", str(tmp_path / "x"), "rl.step=3"]) == 2
    out = error_output(capsys)
    assert "rl.step" in out and "rl.steps" in out
    assert not (tmp_path / "x").exists()  # nothing ran


def test_eval_of_a_run_directory(smoke_run, tmp_path, capsys):
    out = tmp_path / "out.json"
    assert main(["eval", str(smoke_run), "--time-limit", "3", "--team-size", "2", "--problems", "4",
                 "--json", str(out)]) == 0
    m = json.loads(out.read_text())
    assert m["team_size_cap"] == 2
    assert m["time_limit"] == 3.0
    assert m["problems"] == 4
    assert m["team_size_mean"] <= 2
    assert "score_mean" in m and 0.0 <= m["score_mean"] <= 1.0
    assert "team_size_cap" in output(capsys)


def test_eval_rejects_a_team_larger_than_the_config_allows(smoke_run, tmp_path, capsys):
    # the evaluation cap (eval.max_team_size, 65 by default) is separate from the training cap (4 here)
    assert main(["eval", str(smoke_run), "--team-size", "66", "--problems", "1"]) == 2
    assert "team size must be in 1..65" in error_output(capsys)


def test_train_into_an_existing_run_fails_before_the_warm_start(smoke_run, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert main(["train", TINY, "--out", str(smoke_run), f"warmstart.cache_dir={cache}"]) == 2
    out = error_output(capsys)
    assert f"{smoke_run} already contains a run (metrics.jsonl)" in out and "--overwrite" in out
    assert not cache.exists()


def test_eval_of_a_byte_flipped_final_dir(smoke_run, tmp_path, capsys):
    run = tmp_path / "copy"
    shutil.copytree(smoke_run, run)
    target = run / "final" / "model.safetensors"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    assert main(["eval", str(run / "final"), "--problems", "1"]) == 2
    out = error_output(capsys)
    assert out.startswith("error: ") and str(target) in out
