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

from swarmrl.config import Config, ConfigError, apply_overrides, config_from_dict
from swarmrl.policy.model import Policy, load_policy, save_policy
from swarmrl.report.plots import plot_run
from swarmrl.policy.sharing import PolicySet
from swarmrl.rl.trainer import Trainer, make_policy_set
from swarmrl.runs.checkpoint import (CheckpointError, capture_rng, latest_checkpoint, load_checkpoint,
                                     restore_rng, save_checkpoint)
from swarmrl.runs.progress import TrainProgress
from swarmrl.runs.rundir import RunDir

MODEL_DIR = "model"  # architecture + tokenizer + initial weights: makes a run dir self-contained


def _sample_rows(rollouts, k: int) -> list[dict]:
    """The first k rollouts of the step, in full (every turn and message, with times and roles)."""
    return [r.to_json() for r in rollouts[:k]]


def save_trainer_checkpoint(run: RunDir, trainer: Trainer) -> Path:
    """Every slot's weights (the shared model, each role's adapter or model copy) and optimizer."""
    return save_checkpoint(
        run.path, trainer.step_idx,
        tensors=trainer.policies.state_tensors(),
        optimizers={f"optim_{slot}": sd for slot, sd in trainer.updater.state_dict().items()},
        state={"next_step": trainer.step_idx, "rng": capture_rng(), "sharing": trainer.policies.sharing,
               "detectors": trainer.detectors.state_dict()})


def restore_trainer(trainer: Trainer, ckpt_path: Path) -> None:
    ckpt = load_checkpoint(ckpt_path)
    try:
        trainer.policies.load_state_tensors(ckpt.tensors, str(ckpt_path))
    except KeyError as e:
        raise CheckpointError(str(e.args[0])) from e
    for slot, opt in trainer.updater.optimizers.items():
        if f"optim_{slot}" not in ckpt.optimizers:
            raise CheckpointError(f"{ckpt_path}: no optimizer state for '{slot}' (has {sorted(ckpt.optimizers)})")
        opt.load_state_dict(ckpt.optimizers[f"optim_{slot}"])
    trainer.detectors.load_state_dict(ckpt.state.get("detectors", {}))
    trainer.step_idx = int(ckpt.state["next_step"])
    restore_rng(ckpt.state["rng"])


# Keys a resume may change: where rollouts run, not what is trained (checkpoints hold every
# slot's weights whatever the backend, so a run moves between local and Ray freely).
RESUME_OVERRIDABLE = ("distributed.", "run.progress", "run.threads")


def resume_config(run_cfg: dict, overrides: list[str] | None) -> Config:
    bad = [o for o in overrides or [] if not o.split("=", 1)[0].startswith(RESUME_OVERRIDABLE)]
    if bad:
        raise ConfigError(f"--resume can only change {', '.join(RESUME_OVERRIDABLE)} (got {', '.join(bad)})")
    return config_from_dict(apply_overrides(run_cfg, list(overrides or [])))


def train(cfg: Config, out: Path, init_policy: Path | None = None, resume: bool = False,
          log=print, overwrite: bool = False, resume_overrides: list[str] | None = None) -> RunDir:
    """Train from `init_policy` (a warm start or HF model dir) into run dir `out`.

    With resume=True, `out` must be an existing run: its resolved config is used (with
    `resume_overrides`, e.g. `distributed.backend=local`) and training continues after its
    latest complete checkpoint.
    """
    torch.set_num_threads(cfg.run.threads)
    if resume:
        run = RunDir.open_for_resume(out)
        cfg = resume_config(run.read_config(), resume_overrides)
        ckpt = latest_checkpoint(run.path)
        if ckpt is None:
            raise CheckpointError(f"{run.path / 'checkpoints'}: no complete checkpoint to resume from")
        policy = load_policy(run.path / MODEL_DIR, cfg.model.dtype)
        trainer = Trainer(cfg, policy)
        try:
            restore_trainer(trainer, ckpt)
        except BaseException:
            trainer.close()
            raise
        run.truncate_metrics(trainer.step_idx)
        log(f"resuming {run.path} at step {trainer.step_idx} from {ckpt}")
    else:
        if init_policy is None:
            raise ValueError("train needs an initial policy (warm start dir or model path)")
        run = RunDir.create(out, cfg.to_dict(), overwrite=overwrite)
        policy = load_policy(init_policy, cfg.model.dtype)
        save_policy(policy, run.path / MODEL_DIR)
        trainer = Trainer(cfg, policy)
    try:
        _train_steps(cfg, run, trainer)
    finally:
        trainer.close()  # Ray workers (and a cluster the backend started) go away with the run
    if trainer.policies.sharing == "shared":
        save_policy(trainer.policy, run.path / "final")
    else:  # per-role weights: the final checkpoint holds every adapter / model copy
        log(f"final per-role weights ({trainer.policies.sharing}): {latest_checkpoint(run.path)}")
    plot_run(run.path)
    return run


def _train_steps(cfg: Config, run: RunDir, trainer: Trainer) -> None:
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


def load_trained_policy(path: Path, dtype: str = "float32") -> tuple[Policy | PolicySet, dict | None]:
    """A run dir (its latest checkpoint), a checkpoint dir, or a HF model dir -> policy (+ run config).

    Runs with per-role policies come back as a PolicySet with every role's weights loaded.
    """
    path = Path(path)
    if (path / "config.yaml").exists() and (path / MODEL_DIR).exists():  # a run directory
        run_dir, ckpt = path, latest_checkpoint(path)
    elif (path / "manifest.json").exists():  # a checkpoint dir inside a run
        run_dir, ckpt = path.parent.parent, path
    else:
        return load_policy(path, dtype), None
    run_cfg = RunDir(run_dir).read_config()
    policy = load_policy(run_dir / MODEL_DIR, dtype)
    policies = make_policy_set(config_from_dict(run_cfg), policy)
    if ckpt is not None:
        try:
            policies.load_state_tensors(load_checkpoint(ckpt).tensors, str(ckpt))
        except KeyError as e:
            raise CheckpointError(str(e.args[0])) from e
    return (policy if policies.sharing == "shared" else policies), run_cfg
