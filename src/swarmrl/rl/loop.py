"""The training loop around `Trainer.step`: run directory, checkpoints, resume, progress.

Kept apart from the trainer so the step stays one readable page.

Resume is exact (invariant 7): every source of randomness of step s is derived from
(seed, s) — the problems, the sampler seeds, the minibatch order — and the checkpoint
holds weights, optimizer state and RNG states, so "N steps" and "N/2, stop, resume, N/2"
produce the same metrics and weights on the same machine.
"""

from __future__ import annotations

from pathlib import Path

import torch

from swarmrl.config import Config, config_from_dict
from swarmrl.policy.model import Policy, load_policy, save_policy
from swarmrl.report.plots import plot_run
from swarmrl.rl.trainer import Trainer
from swarmrl.runs.checkpoint import (CheckpointError, capture_rng, latest_checkpoint, load_checkpoint,
                                     restore_rng, save_checkpoint)
from swarmrl.runs.progress import TrainProgress
from swarmrl.runs.rundir import RunDir

MODEL_DIR = "model"  # architecture + tokenizer + initial weights: makes a run dir self-contained


def _sample_rows(rollouts, k: int) -> list[dict]:
    """The first k rollouts of the step, in full (every turn and message, with times and roles)."""
    return [r.to_json() for r in rollouts[:k]]


def save_trainer_checkpoint(run: RunDir, trainer: Trainer) -> Path:
    return save_checkpoint(
        run.path, trainer.step_idx,
        tensors={"policy": trainer.policy.model.state_dict()},
        optimizers={"policy": trainer.optimizer.state_dict()},
        state={"next_step": trainer.step_idx, "rng": capture_rng()})


def restore_trainer(trainer: Trainer, ckpt_path: Path) -> None:
    ckpt = load_checkpoint(ckpt_path)
    missing, unexpected = trainer.policy.model.load_state_dict(ckpt.tensors["policy"], strict=False)
    # Tied embeddings are stored once; anything else missing means the wrong checkpoint.
    real_missing = [k for k in missing if "lm_head" not in k]
    if real_missing or unexpected:
        raise CheckpointError(f"{ckpt_path}: weights do not match the model "
                              f"(missing {real_missing[:3]}, unexpected {unexpected[:3]})")
    trainer.optimizer.load_state_dict(ckpt.optimizers["policy"])
    trainer.step_idx = int(ckpt.state["next_step"])
    restore_rng(ckpt.state["rng"])


def train(cfg: Config, out: Path, init_policy: Path | None = None, resume: bool = False,
          log=print, overwrite: bool = False) -> RunDir:
    """Train from `init_policy` (a warm start or HF model dir) into run dir `out`.

    With resume=True, `out` must be an existing run: its resolved config is used and
    training continues after its latest complete checkpoint.
    """
    torch.set_num_threads(cfg.run.threads)
    if resume:
        run = RunDir.open_for_resume(out)
        cfg = config_from_dict(run.read_config())
        policy = load_policy(run.path / MODEL_DIR, cfg.model.dtype)
        trainer = Trainer(cfg, policy)
        ckpt = latest_checkpoint(run.path)
        if ckpt is None:
            raise CheckpointError(f"{run.path / 'checkpoints'}: no complete checkpoint to resume from")
        restore_trainer(trainer, ckpt)
        run.truncate_metrics(trainer.step_idx)
        log(f"resuming {run.path} at step {trainer.step_idx} from {ckpt}")
    else:
        if init_policy is None:
            raise ValueError("train needs an initial policy (warm start dir or model path)")
        run = RunDir.create(out, cfg.to_dict(), overwrite=overwrite)
        policy = load_policy(init_policy, cfg.model.dtype)
        save_policy(policy, run.path / MODEL_DIR)
        trainer = Trainer(cfg, policy)
    with TrainProgress(cfg.rl.steps, enabled=cfg.run.progress, start_step=trainer.step_idx) as progress:
        while trainer.step_idx < cfg.rl.steps:
            metrics, rollouts = trainer.step()
            step = metrics["step"]
            run.append_metrics(metrics)
            run.write_samples(step, _sample_rows(rollouts, cfg.run.samples_per_step))
            progress.update(step + 1, metrics)
            last = trainer.step_idx == cfg.rl.steps
            if last or (cfg.run.checkpoint_every and trainer.step_idx % cfg.run.checkpoint_every == 0):
                save_trainer_checkpoint(run, trainer)
    save_policy(trainer.policy, run.path / "final")
    plot_run(run.path)
    return run


def load_trained_policy(path: Path, dtype: str = "float32") -> tuple[Policy, dict | None]:
    """A run dir (its latest checkpoint), a checkpoint dir, or a HF model dir -> policy (+ run config)."""
    path = Path(path)
    if (path / "config.yaml").exists() and (path / MODEL_DIR).exists():  # a run directory
        run = RunDir(path)
        policy = load_policy(path / MODEL_DIR, dtype)
        ckpt = latest_checkpoint(path)
        if ckpt is not None:
            policy.model.load_state_dict(load_checkpoint(ckpt).tensors["policy"], strict=False)
        return policy, run.read_config()
    if (path / "manifest.json").exists():  # a checkpoint dir inside a run
        run_dir = path.parent.parent
        policy = load_policy(run_dir / MODEL_DIR, dtype)
        policy.model.load_state_dict(load_checkpoint(path).tensors["policy"], strict=False)
        return policy, RunDir(run_dir).read_config()
    return load_policy(path, dtype), None
