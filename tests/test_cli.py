"""The `swarmrl` CLI end to end on configs/tiny_test.yaml: smoke, resume, determinism, errors, eval."""

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


def test_demo_runs_end_to_end_and_times_its_phases(cache, tmp_path, capsys):
    """`swarmrl demo` on the tiny config: before / after evaluations, the run, the report, and a
    summary whose phases add up to at most its wall time (the RL steps run inside training)."""
    out = tmp_path / "demo"
    assert main(["demo", "--config", TINY, "--out", str(out), cache]) == 0
    summary = json.loads((out / "demo_summary.json").read_text())
    phases = summary["phases_s"]
    assert set(phases) == {"warm_start", "evaluate_before", "train", "evaluate_after", "report", "rl_steps"}
    assert sum(v for k, v in phases.items() if k != "rl_steps") <= summary["wall_s"]
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
    out = output(capsys)
    assert "error" in out
    assert str(target) in out


def test_unknown_override_key_suggests_the_closest(tmp_path, capsys):
    assert main(["train", TINY, "--out", str(tmp_path / "x"), "rl.step=3"]) == 2
    out = output(capsys)
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
    assert "team size must be in 1..65" in output(capsys)


# ------------------------------------------------------------------ bad input: exit 2, `error:`, no traceback

BAD_FILES = {
    "malformed.yaml": b"rl: {steps: 2\n",
    "list.yaml": b"- rl\n- task\n",
    "binary.yaml": bytes(range(128, 256)),
    "section.yaml": b"rl: 3\n",
}

# (id, config: TINY or a BAD_FILES name, overrides, fragments the message must contain)
BAD_TRAIN = [
    ("malformed_yaml", "malformed.yaml", [], ["malformed.yaml: invalid YAML at line 2"]),
    ("top_level_list", "list.yaml", ["rl.steps=3"], ["list.yaml: the top level must be a mapping", "got a list"]),
    ("binary_yaml", "binary.yaml", [], ["binary.yaml: not a UTF-8 text file"]),
    ("section_not_mapping", "section.yaml", ["rl.steps=3"], ["rl: expected a mapping, got 3", "'rl.steps'"]),
    ("override_unparsable", TINY, ["rl.lr=[1"], ["rl.lr: cannot parse the value '[1'"]),
    ("override_nan", TINY, ["rl.lr=.nan"], ["rl.lr: expected a finite number, got nan"]),
    ("threads_0", TINY, ["run.threads=0"], ["run.threads must be >= 1", "got 0"]),
    ("hidden_size_0", TINY, ["model.hidden_size=0"], ["model.hidden_size must be >= 1, got 0"]),
    ("odd_head_dim", TINY, ["model.hidden_size=30"], ["the head dimension, 15) must be even"]),
    ("batch_sequences_0", TINY, ["warmstart.batch_sequences=0"], ["warmstart.batch_sequences must be >= 1, got 0"]),
    ("steps_0", TINY, ["rl.steps=0"], ["rl.steps must be >= 1", "got 0"]),
    ("start_after_end", TINY, ["time_limit.start=5"], ["time_limit.start (5) must be <= time_limit.end (4)"]),
    ("checkpoint_every_neg", TINY, ["run.checkpoint_every=-1"], ["run.checkpoint_every must be >= 0", "got -1"]),
    ("samples_per_step_neg", TINY, ["run.samples_per_step=-1"], ["run.samples_per_step must be >= 0", "got -1"]),
    ("max_turns_0", TINY, ["sampler.max_turns_per_agent=0"], ["sampler.max_turns_per_agent must be >= 1", "got 0"]),
    ("context_too_small", TINY, ["model.max_context_tokens=16"],
     ["model.max_context_tokens must be >= sampler.max_new_tokens_per_turn + 128 (= 176", "got 16"]),
    ("grad_clip_0", TINY, ["rl.grad_clip=0"], ["rl.grad_clip must be > 0", "got 0.0"]),
    ("seed_neg", TINY, ["seed=-1"], ["seed must be >= 0", "got -1"]),
    ("arith_with_dataset", TINY, ["task.dataset=x.jsonl"], ["task.dataset='x.jsonl' is for task.name=math or code"]),
    ("math_warm_start", TINY, ["task.name=math"],
     ["task.name=math: the task has no scripted demonstrations for the warm start",
      "model.name_or_path=", "--init"]),
    ("code_warm_start", TINY, ["task.name=code"], ["task.name=code: the task has no scripted demonstrations", "--init"]),
    ("missing_config", "nope.yaml", [], ["config not found: nope.yaml"]),
]


@pytest.mark.parametrize("config, overrides, fragments", [c[1:] for c in BAD_TRAIN], ids=[c[0] for c in BAD_TRAIN])
def test_bad_train_input_is_an_error_before_anything_is_created(config, overrides, fragments, tmp_path, capsys,
                                                                 monkeypatch):
    for name, data in BAD_FILES.items():
        (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)  # file names in the messages are the relative names given
    out_dir, cache = tmp_path / "run", tmp_path / "cache"
    rc = main(["train", config, "--out", str(out_dir), *overrides, f"warmstart.cache_dir={cache}"])
    out = output(capsys)
    assert rc == 2
    assert out.startswith("error: ")
    for f in fragments:
        assert f in out
    assert "Traceback" not in out
    assert not out_dir.exists() and not cache.exists()  # no run directory, no warm start


def test_time_limit_start_after_end_is_fine_when_start_is_unused():
    from swarmrl.config import load_config
    assert load_config(TINY, ["time_limit.start=5", "time_limit.schedule=constant"]).time_limit.start == 5.0
    assert load_config(TINY, ["time_limit.start=5", "time_limit.ramp_steps=0"]).time_limit.end == 4.0


def test_train_into_an_existing_run_fails_before_the_warm_start(smoke_run, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert main(["train", TINY, "--out", str(smoke_run), f"warmstart.cache_dir={cache}"]) == 2
    out = output(capsys)
    assert f"{smoke_run} already contains a run (metrics.jsonl)" in out and "--overwrite" in out
    assert not cache.exists()


@pytest.mark.parametrize("argv, fragment", [
    (["--resume", "{run}", "--out", "{run}"], "--resume DIR continues that run with its own config.yaml"),
    (["--out", "{run}", "--init", "{run}/nope"], "--init {run}/nope: no such model directory"),
])
def test_train_flag_errors(argv, fragment, tmp_path, capsys):
    run = tmp_path / "r"
    assert main(["train", TINY, *[a.format(run=run) for a in argv]]) == 2
    assert fragment.format(run=run) in output(capsys)
    assert not run.exists()


# eval/scale flags are checked before the model loads, so an empty directory stands in for a run.
BAD_EVAL = [
    ("problems_0", ["--problems", "0"], "--problems must be >= 1, got 0"),
    ("problems_neg", ["--problems", "-3"], "--problems must be >= 1, got -3"),
    ("team_size_0", ["--team-size", "0"], "--team-size must be >= 1 (the CEO counts), got 0"),
    ("team_size_neg", ["--team-size", "-1"], "--team-size must be >= 1 (the CEO counts), got -1"),
    ("time_limit_0", ["--time-limit", "0"], "--time-limit must be > 0 seconds, got 0"),
    ("time_limit_neg", ["--time-limit", "-2"], "--time-limit must be > 0 seconds, got -2"),
    ("time_limit_nan", ["--time-limit", "nan"], "--time-limit must be > 0 seconds, got nan"),
    ("json_dir_missing", ["--json", "{d}/no/m.json"], "--json {d}/no/m.json: the directory {d}/no does not exist"),
]


@pytest.mark.parametrize("flags, fragment", [c[1:] for c in BAD_EVAL], ids=[c[0] for c in BAD_EVAL])
def test_bad_eval_flags(flags, fragment, tmp_path, capsys):
    d = str(tmp_path)
    assert main(["eval", d, *[f.format(d=d) for f in flags]]) == 2
    out = output(capsys)
    assert out.startswith("error: ") and fragment.format(d=d) in out and "Traceback" not in out


def test_scale_rejects_zero_problems(tmp_path, capsys):
    assert main(["scale", str(tmp_path), "--config", TINY, "--problems", "0"]) == 2
    assert "--problems must be >= 1, got 0" in output(capsys)


@pytest.mark.parametrize("cmd", ["eval", "scale"])
def test_eval_of_a_missing_directory(cmd, tmp_path, capsys):
    assert main([cmd, str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'}: no such run, checkpoint or model directory" in output(capsys)


def test_report_of_a_missing_or_empty_run(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'}: no such run directory" in output(capsys)
    assert main(["report", str(tmp_path)]) == 2
    assert f"{tmp_path / 'metrics.jsonl'} not found" in output(capsys)
    (tmp_path / "metrics.jsonl").write_text("")
    assert main(["report", str(tmp_path)]) == 2
    assert "no metrics to plot" in output(capsys)
    assert not (tmp_path / "plots").exists()


def test_error_text_is_printed_verbatim_not_as_markup(tmp_path, capsys):
    bad = tmp_path / "[bold]x.yaml"  # unescaped, rich would print it as a bold "x.yaml"
    bad.write_text("rl: [\n")
    assert main(["train", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert f"{bad}: invalid YAML" in output(capsys)


def _tiny_model_dir(path: Path) -> Path:
    from swarmrl.config import ModelConfig
    from swarmrl.policy.model import build_tiny_policy, save_policy
    save_policy(build_tiny_policy(ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                                              intermediate_size=64)), path)
    return path


def test_eval_of_a_model_dir_with_a_corrupt_header(tmp_path, capsys):
    model = _tiny_model_dir(tmp_path / "m")
    weights_file = model / "model.safetensors"
    data = bytearray(weights_file.read_bytes())
    data[8:16] = b"\xff" * 8  # the JSON header right after its length
    weights_file.write_bytes(bytes(data))
    assert main(["eval", str(model), "--config", TINY, "--problems", "1"]) == 2
    out = output(capsys)
    assert out.startswith("error: ") and str(model) in out


def test_eval_of_a_byte_flipped_final_dir(smoke_run, tmp_path, capsys):
    run = tmp_path / "copy"
    shutil.copytree(smoke_run, run)
    target = run / "final" / "model.safetensors"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    assert main(["eval", str(run / "final"), "--problems", "1"]) == 2
    out = output(capsys)
    assert out.startswith("error: ") and str(target) in out


def test_bad_dataset_row_names_file_and_row_and_creates_no_run(tmp_path, capsys):
    data = tmp_path / "m.jsonl"
    data.write_text('{"prompt": "1+1?", "answer": "2"}\n{"prompt": "2+2?"}\n')
    out_dir = tmp_path / "run"
    assert main(["train", TINY, "--out", str(out_dir), "--init", str(_tiny_model_dir(tmp_path / "m")),
                 "task.name=math", f"task.dataset={data}", "model.max_context_tokens=2048"]) == 2
    out = output(capsys)
    assert f"{data}: row 1: no field 'answer'" in out
    assert not out_dir.exists()


@pytest.mark.parametrize("name, argv, fragment", [
    ("malformed.yaml", ["train", "malformed.yaml", "--out", "r"], "malformed.yaml: invalid YAML"),
    ("binary.yaml", ["train", "binary.yaml", "--out", "r"], "binary.yaml: not a UTF-8 text file"),
    (None, ["report", "nope"], "nope: no such run directory"),
    (None, ["eval", ".", "--problems", "0"], "--problems must be >= 1, got 0"),
])
def test_entry_point_prints_one_error_line(name, argv, fragment, tmp_path):
    """The real entry point in a fresh process: nothing else (a traceback) on stdout or stderr."""
    import os
    import subprocess
    import sys
    if name:
        (tmp_path / name).write_bytes(BAD_FILES[name])
    p = subprocess.run([sys.executable, "-m", "swarmrl.cli", *argv], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "300"}, timeout=120)
    assert p.returncode == 2
    assert p.stdout.startswith(f"error: {fragment}") and len(p.stdout.strip().splitlines()) == 1
    assert "Traceback" not in p.stdout + p.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv", [["sweep", "malformed.yaml"], ["experiment", "latency-shaping", "--config",
                                                                  "malformed.yaml"]])
def test_other_yaml_inputs_name_the_file(argv, tmp_path, capsys, monkeypatch):
    (tmp_path / "malformed.yaml").write_bytes(BAD_FILES["malformed.yaml"])
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--out", "o"]) == 2
    assert output(capsys).startswith("error: malformed.yaml: invalid YAML at line 2")
    assert not (tmp_path / "o").exists()


def test_version_flag(capsys):
    import swarmrl
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert output(capsys).strip() == f"swarmrl {swarmrl.__version__}" == "swarmrl 0.1.0"


def test_train_help_lists_config_keys_and_overrides(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "key=value" in out and "docs/config.md" in out
    assert "rl.{steps," in out and "run.{" in out and "loggers" in out
