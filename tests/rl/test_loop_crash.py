"""Crash safety of `train`: every way a run can be cut short still resumes, exactly.

A kill is simulated by raising a BaseException at the moment of interest (the on-disk state
is then what a kill -9 there would leave; tests/rl/test_loop_kill.py does real kills).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from swarmrl.cli import main
from swarmrl.config import ConfigError, load_config
from swarmrl.policy.model import build_tiny_policy, save_policy, save_run_policy
from swarmrl.rl import loop
from swarmrl.rl.loop import load_trained_policy, train
from swarmrl.rl.trainer import Trainer
from swarmrl.runs.checkpoint import CheckpointError
from swarmrl.runs.rundir import wall_clock

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny_test.yaml"
# Small and fast; weight decay makes every step move the weights even when the tiny model
# earns no reward (a zero advantage alone would leave them unchanged and prove nothing).
FAST = ["eval.val_interval=0", "sampler.max_new_tokens_per_turn=8", "sampler.max_turns_per_agent=2",
        "rl.problems_per_step=1", "rl.rollouts_per_problem=2", "rl.role_grad_interval=0",
        "rl.weight_decay=0.5", "rl.lr=0.01", "run.threads=1", "run.keep_checkpoints=2"]


class Killed(BaseException):
    """Stands in for SIGKILL: not an Exception, so nothing on the way up handles it."""


def cfg_for(steps: int, *extra: str):
    return load_config(TINY, [*FAST, f"rl.steps={steps}", *extra])


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def timeless(run: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [{k: v for k, v in r.items() if not wall_clock(k)} for r in rows]


def final_weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "final" / "model.safetensors"))


def assert_same_run(a: Path, b: Path) -> None:
    assert timeless(a) == timeless(b)
    wa, wb = final_weights(a), final_weights(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def kill_at_checkpoint(monkeypatch, n: int) -> None:
    """Let `n` checkpoints be written, then 'kill' the process as the next one starts."""
    real, calls = loop.save_trainer_checkpoint, []

    def save(run, trainer):
        calls.append(trainer.step_idx)
        if len(calls) > n:
            raise Killed()
        return real(run, trainer)

    monkeypatch.setattr(loop, "save_trainer_checkpoint", save)


@pytest.fixture(scope="module")
def init(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("init") / "policy"
    save_policy(build_tiny_policy(cfg_for(1).model), d)
    return d


@pytest.fixture(scope="module")
def straight(init, tmp_path_factory) -> Path:
    """The reference: 4 steps, uninterrupted."""
    run = tmp_path_factory.mktemp("straight") / "run"
    train(cfg_for(4), run, init_policy=init, log=lambda m: None)
    return run


@pytest.fixture(scope="module")
def extended(init, tmp_path_factory):
    """2 steps, then `--resume rl.steps=4` under a different caller thread count."""
    run = tmp_path_factory.mktemp("extended") / "run"
    train(cfg_for(2), run, init_policy=init, log=lambda m: None)
    threads, real_step = [], Trainer.step

    def step(self):
        threads.append(torch.get_num_threads())
        return real_step(self)

    torch.set_num_threads(2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Trainer, "step", step)
        train(None, run, resume=True, log=lambda m: None, resume_overrides=["rl.steps=4"])
    return run, threads


def test_resume_uses_the_runs_thread_count_and_equals_a_straight_run(extended, straight):
    run, threads = extended
    assert threads == [1, 1]  # run.threads=1 of the run, not the caller's 2
    assert_same_run(run, straight)
    w0 = load_file(str(run / "model" / "model.safetensors"))
    assert not all(torch.equal(w0[k], final_weights(run)[k]) for k in w0)  # training moved them


def test_each_start_and_resume_records_its_machine_and_build(extended):
    from swarmrl.runs.rundir import RunDir
    run, _ = extended
    env = RunDir(run).read_environment()
    assert [e["step"] for e in env] == [0, 2]  # the start, then the resume at step 2
    assert all(e["torch_threads"] == 1 and e["processes"] == 1 for e in env)  # the run's threads
    assert env[0]["versions"]["torch"] == torch.__version__ and env[0]["cpu"]


def test_extending_a_finished_run_persists_the_new_end(extended, tmp_path):
    run, _ = extended
    assert yaml.safe_load((run / "config.yaml").read_text())["rl"]["steps"] == 4
    assert json.loads((run / "final" / "swarmrl_manifest.json").read_text())["step"] == 4
    with pytest.raises(ConfigError, match=r"rl.steps=3 is below step 4"):
        train(None, run, resume=True, log=lambda m: None, resume_overrides=["rl.steps=3"])


def test_resuming_a_finished_run_is_an_error_saying_how_to_extend(extended, capsys):
    run, _ = extended
    before = (run / "metrics.jsonl").read_text()
    with pytest.raises(ConfigError, match=r"already finished \(rl.steps=4\).*rl.steps=8"):
        train(None, run, resume=True, log=lambda m: None)
    assert main(["train", "--resume", str(run)]) == 2
    assert "already finished" in capsys.readouterr().err.replace("\n", "")
    assert (run / "metrics.jsonl").read_text() == before


def test_keep_checkpoints_prunes_after_each_save(straight):
    assert sorted(p.name for p in (straight / "checkpoints").iterdir()) == ["step_3", "step_4"]


def test_killed_after_config_before_first_checkpoint_resumes_from_step_0(init, straight, tmp_path,
                                                                          monkeypatch):
    run = tmp_path / "run"
    kill_at_checkpoint(monkeypatch, 0)
    with pytest.raises(Killed):
        train(cfg_for(4), run, init_policy=init, log=lambda m: None)
    monkeypatch.undo()
    assert [r["step"] for r in timeless(run)] == [0]
    assert not (run / "checkpoints").exists()
    with pytest.raises(FileExistsError, match="--resume"):  # it is a run: never silently redone
        train(cfg_for(4), run, init_policy=init, log=lambda m: None)
    logs = []
    train(None, run, resume=True, log=logs.append)
    assert any("at step 0 from its initial model" in m for m in logs)
    assert_same_run(run, straight)


def test_killed_before_config_yaml_the_directory_is_reused(init, straight, tmp_path):
    run = tmp_path / "run"
    # What an aborted start (or an overwrite cut short) can leave: no config.yaml.
    save_run_policy(build_tiny_policy(cfg_for(1).model, seed=7), run / "model")
    (run / "metrics.jsonl").write_text('{"step": 0}\n')
    (run / "samples").mkdir()
    (run / "samples" / "step_0000.jsonl").write_text("{}\n")
    stale = run / f".config.yaml.tmp_{dead_pid()}"
    stale.write_text("seed: 0\n")
    (run / "notes.txt").write_text("mine")
    with pytest.raises(FileNotFoundError, match="train --out"):
        train(None, run, resume=True, log=lambda m: None)
    train(cfg_for(4), run, init_policy=init, log=lambda m: None)
    assert not stale.exists()
    assert (run / "notes.txt").read_text() == "mine"
    assert_same_run(run, straight)


def test_a_foreign_model_dir_is_never_removed(init, tmp_path):
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "model" / "weights.bin").write_text("not ours")
    with pytest.raises(FileExistsError, match="not written by swarmrl"):
        train(cfg_for(4), run, init_policy=init, log=lambda m: None)
    assert (run / "model" / "weights.bin").read_text() == "not ours"


def test_stale_temp_dirs_of_dead_processes_are_removed_on_resume(init, straight, tmp_path, monkeypatch):
    run = tmp_path / "run"
    kill_at_checkpoint(monkeypatch, 2)
    with pytest.raises(Killed):
        train(cfg_for(4), run, init_policy=init, log=lambda m: None)
    monkeypatch.undo()
    pid = dead_pid()
    stale = [run / "checkpoints" / f".tmp_step_3_{pid}", run / "checkpoints" / f".old_step_2_{pid}",
             run / f".final.tmp_{pid}", run / f".model.old_{pid}"]
    for d in stale:
        d.mkdir()
        (d / "x").write_text("x")
    stale_file = run / "samples" / f".step_0002.jsonl.tmp_{pid}"
    stale_file.write_text("x")
    live = run / "checkpoints" / ".tmp_step_3_1"  # pid 1 is alive: not ours to remove
    live.mkdir()
    train(None, run, resume=True, log=lambda m: None)
    assert [p for p in [*stale, stale_file] if p.exists()] == []
    assert live.exists()
    assert_same_run(run, straight)


def test_corrupt_latest_checkpoint_falls_back_to_the_previous_one(init, straight, tmp_path, monkeypatch):
    run = tmp_path / "run"
    kill_at_checkpoint(monkeypatch, 3)
    with pytest.raises(Killed):
        train(cfg_for(4), run, init_policy=init, log=lambda m: None)
    monkeypatch.undo()
    target = run / "checkpoints" / "step_3" / "policy.safetensors"
    data = bytearray(target.read_bytes())
    data[-3] ^= 0xFF
    target.write_bytes(bytes(data))
    logs = []
    train(None, run, resume=True, log=logs.append)
    assert any(m.startswith("warning: skipping checkpoint step_3") and str(target) in m for m in logs)
    assert any(m.startswith("resuming") and "step_2" in m for m in logs)
    assert_same_run(run, straight)


def test_killed_while_writing_final_resumes_to_write_it(init, straight, tmp_path, monkeypatch):
    run = tmp_path / "run"

    def killed(*a, **k):
        raise Killed()

    monkeypatch.setattr(loop, "save_run_policy", killed)
    with pytest.raises(Killed):
        train(cfg_for(4), run, init_policy=init, log=lambda m: None)
    monkeypatch.undo()
    assert not (run / "final").exists()
    train(None, run, resume=True, log=lambda m: None)
    assert_same_run(run, straight)


def test_byte_flipped_final_is_refused_at_eval(straight, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(straight, run)
    target = run / "final" / "model.safetensors"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="sha256 mismatch") as e:
        load_trained_policy(run / "final")
    assert str(target) in str(e.value)
    capsys.readouterr()
    assert main(["eval", str(run / "final"), "--config", str(TINY), "--problems", "1"]) == 2
    out = capsys.readouterr().err.replace("\n", "")
    assert "error" in out and "model.safetensors" in out


def test_byte_flipped_model_dir_is_refused_for_a_run(straight, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(straight, run)
    target = run / "model" / "tokenizer.json"
    target.write_text(target.read_text().replace('"', "'", 1))
    with pytest.raises(CheckpointError, match=r"tokenizer.json: (size|sha256)"):
        load_trained_policy(run)
    with pytest.raises(CheckpointError, match="tokenizer.json"):
        train(None, run, resume=True, log=lambda m: None, resume_overrides=["rl.steps=5"])


@pytest.mark.parametrize("bad", ["model", "dataset"])
def test_bad_input_leaves_no_run_directory(bad, init, tmp_path):
    out = tmp_path / "new" / "run"
    if bad == "model":
        broken = tmp_path / "broken"
        shutil.copytree(init, broken)
        (broken / "config.json").write_text("{not json")
        cfg, policy = cfg_for(2), broken
    else:
        cfg, policy = cfg_for(2, "task.name=math", f"task.dataset={tmp_path / 'missing.jsonl'}"), init
    with pytest.raises((ValueError, FileNotFoundError)):
        train(cfg, out, init_policy=policy, log=lambda m: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == (["broken"] if bad == "model" else [])
