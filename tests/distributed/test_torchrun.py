"""`torchrun --nproc-per-node 2 -m swarmrl.cli train ... learner.strategy=ddp|fsdp` on this CPU (gloo):
a complete run directory written by rank 0 alone, equal to one process with the same rollout
shards (distributed.rollout_workers=2); checkpoints that resume across strategies; and the
errors of a strategy that does not fit how the processes were launched.

Equality across processes: rollouts exactly, floats within tests/conftest.py's tolerances (the
ranks sum their gradients in another order than one process; tests/distributed/
test_sharded_update.py measures it). Every run uses run.threads=1, as torchrun's ranks do.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from swarmrl.api import random_model
from swarmrl.cli import main
from swarmrl.config import ConfigError, load_config
from swarmrl.distributed.torchrun import check_learner

from dist_helpers import REPO, TINY, TINY_LR, timeless
from test_cli import error_output

SPREAD = f"rl.advantage={REPO / 'tests' / 'distributed' / 'spread_advantage.py'}:spread"
ARGS = [str(TINY), SPREAD, "eval.val_interval=0", "run.progress=false", "run.threads=1",
        "distributed.rollout_workers=2", "rl.steps=2"]
# The padding of each rank's own micro-batches and the prompt prefixes its share has in common
# (fsdp shares none): not training quantities (they differ by design).
DROP = ("learner/pad_fraction", "learner/tokens_run_fraction")


def torchrun(args: list[str], log: Path) -> None:
    """`torchrun --nproc-per-node 2 -m swarmrl.cli ARGS`; fails the test with its output."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "swarmrl.cli", *args]
    with open(log, "w") as f:  # its own session: a hung run is killed with its ranks, not orphaned
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            rc = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    assert rc == 0, log.read_text()[-4000:]


def rows(run: Path) -> list[dict]:
    return [timeless(json.loads(line), DROP) for line in (run / "metrics.jsonl").read_text().splitlines()]


def weights(run: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(run / "checkpoints" / f"step_{step}" / "policy.safetensors")


@pytest.fixture(scope="module")
def init(tmp_path_factory) -> Path:
    return random_model(str(TINY), tmp_path_factory.mktemp("init") / "model")


@pytest.fixture(scope="module")
def straight(init, tmp_path_factory) -> Path:
    """The reference: 2 steps in one process (learner.strategy=single)."""
    run = tmp_path_factory.mktemp("single") / "run"
    assert main(["train", *ARGS, "--out", str(run), "--init", str(init)]) == 0
    return run


def test_torchrun_ddp_run_writes_the_run_directory_and_equals_one_process(straight, init, tmp_path, run_match):
    run = tmp_path / "ddp"
    torchrun(["train", *ARGS, "learner.strategy=ddp", "--out", str(run), "--init", str(init)], tmp_path / "ddp.log")
    assert sorted(p.name for p in run.iterdir()) == sorted(p.name for p in straight.iterdir())
    assert len(rows(run)) == 2 and sorted(os.listdir(run / "checkpoints")) == ["step_1", "step_2"]
    assert (run / "final" / "model.safetensors").is_file()
    assert not list(run.parent.glob(".*"))  # no staging left behind by either rank
    run_match.metrics(rows(run), rows(straight))
    run_match.weights(weights(run, 2), weights(straight, 2), TINY_LR, steps=2)
    for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()):  # how long the ranks waited
        assert 0.0 <= m["perf/rollout_rank_idle"] < 1.0 and 0.0 <= m["perf/update_rank_idle"] < 1.0
        assert m["perf/rollout_rank_busy_max_s"] > 0 and m["perf/update_rank_busy_max_s"] > 0
    assert (run / "samples" / "step_0000.jsonl").read_text() == (straight / "samples" / "step_0000.jsonl").read_text()


@pytest.fixture(scope="module")
def fsdp_step1(init, tmp_path_factory) -> Path:
    """One fsdp step (checkpoints/step_1); tests resume copies of it."""
    run = tmp_path_factory.mktemp("fsdp1") / "run"
    torchrun(["train", *ARGS, "rl.steps=1", "learner.strategy=fsdp", "--out", str(run), "--init", str(init)],
             run.parent / "fsdp.log")
    return run


def test_an_fsdp_checkpoint_resumes_in_one_process(straight, fsdp_step1, tmp_path, run_match):
    run = shutil.copytree(fsdp_step1, tmp_path / "fsdp_then_single")
    assert main(["train", "--resume", str(run), "rl.steps=2", "learner.strategy=single"]) == 0
    run_match.metrics(rows(run), rows(straight))
    run_match.weights(weights(run, 2), weights(straight, 2), TINY_LR, steps=2)


def test_an_fsdp_resume_under_fsdp_is_bit_exact(init, fsdp_step1, tmp_path):
    """Same strategy, same world size: the full-state checkpoint loses nothing (weights, AdamW
    moments, RNG), so "2 steps" equals "1 step, stop, resume, 1 step" exactly."""
    straight_fsdp, run = tmp_path / "fsdp2", shutil.copytree(fsdp_step1, tmp_path / "fsdp_resumed")
    torchrun(["train", *ARGS, "learner.strategy=fsdp", "--out", str(straight_fsdp), "--init", str(init)],
             tmp_path / "straight.log")
    torchrun(["train", "--resume", str(run), "rl.steps=2"], tmp_path / "resume.log")
    assert rows(run) == rows(straight_fsdp)
    a, b = weights(run, 2), weights(straight_fsdp, 2)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    oa, ob = (torch.load(r / "checkpoints" / "step_2" / "optim_optim_shared.pt", weights_only=False)["state"]
              for r in (run, straight_fsdp))
    assert all(torch.equal(oa[i][k], ob[i][k]) for i in ob for k in ob[i] if isinstance(ob[i][k], torch.Tensor))


def test_a_single_process_checkpoint_resumes_under_fsdp(straight, init, tmp_path, run_match):
    run = tmp_path / "single_then_fsdp"
    assert main(["train", *ARGS, "rl.steps=1", "--out", str(run), "--init", str(init)]) == 0
    torchrun(["train", "--resume", str(run), "rl.steps=2", "learner.strategy=fsdp"], tmp_path / "fsdp.log")
    run_match.metrics(rows(run), rows(straight))
    run_match.weights(weights(run, 2), weights(straight, 2), TINY_LR, steps=2)
    assert (run / "final" / "model.safetensors").is_file()  # gathered from the sharded model's checkpoint


def test_lora_adapters_under_fsdp_equal_one_process(init, tmp_path, run_match):
    """policy.sharing=isolated: every role's adapter sampled in one batch from the gathered FSDP
    model, trained in lockstep, checkpointed whole (each adapter group) by rank 0."""
    single, sharded = tmp_path / "single", tmp_path / "fsdp"
    lora = [*ARGS, "policy.sharing=isolated"]
    assert main(["train", *lora, "--out", str(single), "--init", str(init)]) == 0
    torchrun(["train", *lora, "learner.strategy=fsdp", "--out", str(sharded), "--init", str(init)],
             tmp_path / "fsdp.log")
    run_match.metrics(rows(sharded), rows(single))
    for group in ("adapter_ceo", "adapter_expert"):
        run_match.weights(load_file(sharded / "checkpoints" / "step_2" / f"{group}.safetensors"),
                          load_file(single / "checkpoints" / "step_2" / f"{group}.safetensors"), TINY_LR, steps=2)


def test_a_sharded_strategy_in_one_process_is_an_error_before_anything_is_written(init, tmp_path, capsys):
    for strategy in ("ddp", "fsdp"):
        assert main(["train", *ARGS, f"learner.strategy={strategy}", "--out", str(tmp_path / "r"),
                     "--init", str(init)]) == 2
        assert f"learner.strategy={strategy} needs >= 2 processes: launch with torchrun --nproc-per-node N" \
            in error_output(capsys)
    assert not (tmp_path / "r").exists()


def test_single_under_torchrun_is_an_error(init, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert main(["train", *ARGS, "--out", str(tmp_path / "r"), "--init", str(init)]) == 2
    assert "torchrun started 2 processes but learner.strategy=single" in error_output(capsys)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("overrides,fragment", [
    (["learner.strategy=fsdp", "policy.sharing=isolated_full"], "policy.sharing shared or isolated"),
    (["learner.strategy=fsdp", "rl.logprob_chunk_tokens=256"], "rl.logprob_chunk_tokens"),
    (["learner.strategy=fsdp", "rl.kl_coef=0.1"], "rl.kl_coef"),
    (["learner.strategy=ddp", "distributed.backend=ray"], "distributed.backend=local"),
    (["learner.strategy=ddp", "sampler.engine=vllm"], "sampler.engine=vllm"),
])
def test_sharded_strategies_refuse_what_they_cannot_run(overrides, fragment):
    cfg = load_config(TINY, overrides)
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        check_learner(cfg, world=2)
    check_learner(load_config(TINY, [overrides[0]]), world=2)  # the strategy alone is fine with 2 processes


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a machine without CUDA")
def test_nccl_without_cuda_is_an_error():
    with pytest.raises(ConfigError, match="nccl needs CUDA"):
        check_learner(load_config(TINY, ["learner.strategy=ddp", "learner.dist_backend=nccl"]), world=2)


def test_under_torchrun_the_warm_start_must_be_cached_first(tmp_path, capsys, monkeypatch):
    """Ranks would each train and write the same warm start: they read the cache instead."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert main(["train", *ARGS, "learner.strategy=ddp", f"warmstart.cache_dir={tmp_path / 'cache'}",
                 "--out", str(tmp_path / "r")]) == 2
    assert "warm-start once first with `swarmrl pretrain CONFIG" in error_output(capsys)
    assert not (tmp_path / "r").exists()
