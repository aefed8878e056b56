"""The `swarmrl` CLI on bad input: exit 2, one `error:` line that names the cause, no traceback,
nothing created."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarmrl.cli import main
from test_cli import TINY, error_output, output


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
    out = error_output(capsys)
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


@pytest.mark.parametrize("argv, fragment", [
    (["--resume", "{run}", "--out", "{run}"], "--resume DIR continues that run with its own config.yaml"),
    (["--out", "{run}", "--init", "{run}/nope"], "--init {run}/nope: no such model directory"),
])
def test_train_flag_errors(argv, fragment, tmp_path, capsys):
    run = tmp_path / "r"
    assert main(["train", TINY, *[a.format(run=run) for a in argv]]) == 2
    assert fragment.format(run=run) in error_output(capsys)
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
    out = error_output(capsys)
    assert out.startswith("error: ") and fragment.format(d=d) in out and "Traceback" not in out


def test_scale_rejects_zero_problems(tmp_path, capsys):
    assert main(["scale", str(tmp_path), "--config", TINY, "--problems", "0"]) == 2
    assert "--problems must be >= 1, got 0" in error_output(capsys)


@pytest.mark.parametrize("cmd", ["eval", "scale"])
def test_eval_of_a_missing_directory(cmd, tmp_path, capsys):
    assert main([cmd, str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'}: no such run, checkpoint or model directory" in error_output(capsys)


def test_report_of_a_missing_or_empty_run(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'}: no such run directory" in error_output(capsys)
    assert main(["report", str(tmp_path)]) == 2
    assert f"{tmp_path / 'metrics.jsonl'} not found" in error_output(capsys)
    (tmp_path / "metrics.jsonl").write_text("")
    assert main(["report", str(tmp_path)]) == 2
    assert "no metrics to plot" in error_output(capsys)
    assert not (tmp_path / "plots").exists()


def test_error_text_is_printed_verbatim_not_as_markup(tmp_path, capsys):
    bad = tmp_path / "[bold]x.yaml"  # unescaped, rich would print it as a bold "x.yaml"
    bad.write_text("rl: [\n")
    assert main(["train", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert f"{bad}: invalid YAML" in error_output(capsys)


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
    out = error_output(capsys)
    assert out.startswith("error: ") and str(model) in out


def test_bad_dataset_row_names_file_and_row_and_creates_no_run(tmp_path, capsys):
    data = tmp_path / "m.jsonl"
    data.write_text('{"prompt": "1+1?", "answer": "2"}\n{"prompt": "2+2?"}\n')
    out_dir = tmp_path / "run"
    assert main(["train", TINY, "--out", str(out_dir), "--init", str(_tiny_model_dir(tmp_path / "m")),
                 "task.name=math", f"task.dataset={data}", "model.max_context_tokens=2048"]) == 2
    out = error_output(capsys)
    assert f"{data}: row 1: no field 'answer'" in out
    assert not out_dir.exists()


@pytest.mark.parametrize("name, argv, fragment", [
    ("malformed.yaml", ["train", "malformed.yaml", "--out", "r"], "malformed.yaml: invalid YAML"),
    ("binary.yaml", ["train", "binary.yaml", "--out", "r"], "binary.yaml: not a UTF-8 text file"),
    (None, ["report", "nope"], "nope: no such run directory"),
    (None, ["eval", ".", "--problems", "0"], "--problems must be >= 1, got 0"),
])
def test_entry_point_prints_one_error_line(name, argv, fragment, tmp_path):
    """The real entry point in a fresh process: one line on standard error (so `> log` still shows it),
    nothing on standard output, no traceback."""
    import os
    import subprocess
    import sys
    if name:
        (tmp_path / name).write_bytes(BAD_FILES[name])
    p = subprocess.run([sys.executable, "-m", "swarmrl.cli", *argv], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "300"}, timeout=120)
    assert p.returncode == 2
    assert p.stderr.startswith(f"error: {fragment}") and len(p.stderr.strip().splitlines()) == 1
    assert p.stdout == ""
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv", [["sweep", "malformed.yaml"], ["experiment", "latency-shaping", "--config",
                                                                  "malformed.yaml"]])
def test_other_yaml_inputs_name_the_file(argv, tmp_path, capsys, monkeypatch):
    (tmp_path / "malformed.yaml").write_bytes(BAD_FILES["malformed.yaml"])
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--out", "o"]) == 2
    assert error_output(capsys).startswith("error: malformed.yaml: invalid YAML at line 2")
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


def test_demo_refuses_ranks_this_machine_cannot_run_before_the_warm_start(tmp_path, capsys, monkeypatch):
    """The demo's learner.processes=2 on a machine with one GPU (model.device=auto lands there)."""
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    cache = tmp_path / "cache"
    assert main(["demo", "--config", TINY, "--out", str(tmp_path / "demo"), "learner.processes=2",
                 f"warmstart.cache_dir={cache}"]) == 2
    assert "learner.processes=2 puts one rank on each GPU" in error_output(capsys)
    assert not cache.exists() and not (tmp_path / "demo").exists()
