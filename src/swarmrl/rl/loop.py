"""The training loop around `Trainer.step`: run directory, checkpoints, resume, progress.

Kept apart from the trainer so the step stays one readable page.

Resume is exact (invariant 7): every source of randomness of step s is derived from
(seed, s) — the problems, the sampler seeds, the minibatch order — and the checkpoint
holds weights, optimizer state and RNG states, so "N steps" and "N/2, stop, resume, N/2"
produce the same metrics and weights on the same machine.

Crash safety: a run killed at any moment resumes with `train --resume`. The run dir is
created only after everything that can fail on bad input (the initial policy, the task and
its data, the backend) has been built; config.yaml is written after model/, so a run with a
config always has what step 0 needs; a corrupt newest checkpoint falls back to an older one;
final/ is written last and marks the run finished.
"""

from __future__ import annotations

import copy
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import torch

from swarmrl.config import Config, ConfigError, apply_overrides, config_from_dict
from swarmrl.policy.model import (Policy, load_policy, load_run_policy, save_run_policy,
                                   stage_run_policy, verify_run_policy)
from swarmrl.report.samples import sample_row
from swarmrl.policy.sharing import PolicySet, SharedPolicies
from swarmrl.build import check_hardware, make_policy_set
from swarmrl.distributed.launch import callers_key, launch, launch_needed, launch_resume
from swarmrl.distributed.torchrun import is_writer, launch_world
from swarmrl.rl.batch import chunking_hint
from swarmrl.rl.trainer import Trainer
from swarmrl.runs.loggers import Loggers, parse_loggers
from swarmrl.runs.checkpoint import (Checkpoint, CheckpointError, capture_rng, latest_checkpoint,
                                     load_checkpoint, newest_valid_checkpoint, prune_checkpoints,
                                     restore_rng, save_checkpoint)
from swarmrl.policy.speculative import corpus_from_tensors, corpus_tensors
from swarmrl.runs.environment import environment
from swarmrl.runs.manifest import POLICY_MANIFEST, move_into_place, remove_stale_temps
from swarmrl.runs.progress import TrainProgress
from swarmrl.runs.rundir import CONFIG, RunDir

DRAFT_CORPUS = "draft_corpus"  # checkpoint group: the last step's turns (sampler.draft_tokens)
MODEL_DIR = "model"  # architecture + tokenizer + initial weights: makes a run dir self-contained
FINAL_DIR = "final"


def _sample_rows(trainer: Trainer, rollouts, cfg: Config) -> list[dict]:
    """The step's rollouts for samples/ (all with `run.samples_keep_all`, else the first
    `run.samples_per_step`), in full: every turn and message, each agent's first context,
    item labels as agents saw them (report/samples.py)."""
    k = len(rollouts) if cfg.run.samples_keep_all else cfg.run.samples_per_step
    tok = trainer.policy.tokenizer
    decode = lambda ids: tok.decode(ids, skip_special_tokens=False)  # noqa: E731
    return [sample_row(r, decode, trainer.task.parse_item) for r in rollouts[:k]]


def save_trainer_checkpoint(run: RunDir, trainer: Trainer) -> Path | None:
    """Every slot's weights (the shared model, each role's adapter or model copy) and optimizer.
    A sharded learner gathers them whole (every rank calls this); only rank 0 writes (else None)."""
    learner = trainer.parts.learner
    if learner is None:
        tensors, optims = trainer.policies.state_tensors(), trainer.updater.state_dict()
    else:
        tensors, optims = learner.full_state(trainer.policies, trainer.updater.optimizers)
    if not is_writer():
        return None
    if trainer.draft_corpus:  # the next step's draft tables start from it (policy/speculative.py)
        tensors = {**tensors, DRAFT_CORPUS: corpus_tensors(trainer.draft_corpus)}
    return save_checkpoint(
        run.path, trainer.step_idx,
        tensors=tensors,
        optimizers={f"optim_{slot}": sd for slot, sd in optims.items()},
        state={"next_step": trainer.step_idx, "rng": capture_rng(), "sharing": trainer.policies.sharing,
               "detectors": trainer.detectors.state_dict()})


def restore_trainer(trainer: Trainer, ckpt: Path | Checkpoint) -> None:
    ckpt = ckpt if isinstance(ckpt, Checkpoint) else load_checkpoint(ckpt)
    ckpt_path = ckpt.path
    for slot in trainer.updater.optimizers:
        if f"optim_{slot}" not in ckpt.optimizers:
            raise CheckpointError(f"{ckpt_path}: no optimizer state for '{slot}' (has {sorted(ckpt.optimizers)})")
    optims = {slot: ckpt.optimizers[f"optim_{slot}"] for slot in trainer.updater.optimizers}
    try:
        if trainer.parts.learner is None:
            trainer.policies.load_state_tensors(ckpt.tensors, str(ckpt_path))
            for slot, opt in trainer.updater.optimizers.items():
                opt.load_state_dict(optims[slot])
        else:  # every rank reads the whole checkpoint and keeps its shard (any strategy wrote it)
            trainer.parts.learner.load_full_state(trainer.policies, trainer.updater.optimizers, ckpt.tensors,
                                                  optims, str(ckpt_path))
    except KeyError as e:
        raise CheckpointError(str(e.args[0])) from e
    trainer.detectors.load_state_dict(ckpt.state.get("detectors", {}))
    if DRAFT_CORPUS in ckpt.tensors:
        trainer.set_draft_corpus(corpus_from_tensors(ckpt.tensors[DRAFT_CORPUS]))
    trainer.step_idx = int(ckpt.state["next_step"])
    restore_rng(ckpt.state["rng"])


# Keys a resume may change: where rollouts run, not what is trained (checkpoints hold every
# slot's weights whatever the backend, so a run moves between local and Ray freely), and
# rl.steps, which only moves the end: step s does not depend on it; model.device: a checkpoint
# holds CPU tensors and loads onto any device (runs/checkpoint.py); learner.*: a checkpoint holds
# the full weights and optimizer state whatever the strategy (distributed/sharding.py).
# run.loggers, run.wandb_* and run.samples_* change what is recorded, never what is trained;
# warmstart.threads, like run.threads, is how a rank computes (launch.py pins it in every rank).
RESUME_OVERRIDABLE = ("distributed.", "run.progress", "run.threads", "rl.steps", "model.device", "learner.",
                      "run.loggers", "run.wandb_", "run.samples_", "warmstart.threads")


def resume_config(run_cfg: dict, overrides: list[str] | None) -> Config:
    bad = [o for o in overrides or [] if not o.split("=", 1)[0].startswith(RESUME_OVERRIDABLE)]
    if bad:
        raise ConfigError(f"--resume can only change {', '.join(RESUME_OVERRIDABLE)} (got {', '.join(bad)})")
    return config_from_dict(apply_overrides(copy.deepcopy(run_cfg), list(overrides or [])))


def train(cfg: Config, out: Path, init_policy: Path | None = None, resume: bool = False,
          log=print, overwrite: bool = False, resume_overrides: list[str] | None = None) -> RunDir:
    """Train from `init_policy` (a warm start or HF model dir) into run dir `out`.

    With resume=True, `out` must be an existing run: its resolved config is used (with
    `resume_overrides`, e.g. `distributed.backend=local` or a larger `rl.steps`) and training
    continues after its newest valid checkpoint (from step 0 if there is none yet).
    Under torchrun (learner.strategy ddp | fsdp) every rank trains; rank 0 alone writes and logs.
    """
    log = log if is_writer() else (lambda *a, **k: None)
    if Path(out).is_symlink():  # a link, dangling or not, names where the run goes; mkdir on it fails
        out = Path(out).resolve()
    if _launch_ranks(cfg, Path(out), init_policy, resume, overwrite, resume_overrides, log):
        return RunDir(Path(out))
    if resume:
        run, trainer = _open_resumed(Path(out), log, resume_overrides)
    else:
        parse_loggers(cfg.run.loggers)  # a bad sink name fails before the run dir exists
        run, trainer = _open_new(cfg, Path(out), init_policy, overwrite)
    hint = chunking_hint(trainer.policy.model.config.vocab_size, trainer.cfg.rl.logprob_chunk_tokens)
    if hint:
        log(hint)
    try:
        _train_steps(trainer.cfg, run, trainer)
    finally:
        trainer.close()  # Ray workers (and a cluster the backend started) go away with the run
    if not is_writer():
        return run
    from swarmrl.report.plots import plot_run  # here: matplotlib adds about 0.5 s to every rank's start
    plot_run(run.path)
    if isinstance(trainer.policies, SharedPolicies):  # last: a complete final/ marks a finished run
        # A sharded learner's model may be sharded: its last checkpoint holds the whole of it.
        final = (trainer.policy if trainer.parts.learner is None
                 else load_trained_policy(run.path, trainer.cfg.model.dtype)[0])
        save_run_policy(final, run.final_dir, step=trainer.step_idx)
    else:  # per-role weights: the final checkpoint holds every adapter / model copy
        log(f"final per-role weights ({trainer.policies.sharing}): {_write_role_final(run)}")
    return run


def _launch_ranks(cfg: Config, out: Path, init_policy: Path | None, resume: bool, overwrite: bool,
                  resume_overrides: list[str] | None, log) -> bool:
    """learner.processes > 1 (distributed/launch.py): train on that many ranks started here, and
    return True once they have finished; False where this process trains itself."""
    if resume:
        if not (out / CONFIG).is_file():
            return False  # not a run to resume: _open_resumed says so
        cfg = resume_config(RunDir(out).read_config(), resume_overrides)
    if not launch_needed(cfg):
        return False
    if resume:
        launch_resume(cfg, out, list(resume_overrides or []), log)
        return True
    from swarmrl.policy.warmstart import warmstart_key
    # without --init the ranks warm-start first, into the cache entry this process looked up
    env = callers_key(warmstart_key(cfg)) if init_policy is None else None
    launch(cfg, ["train", "--out", str(out), *(["--init", str(init_policy)] if init_policy is not None else []),
                 *(["--overwrite"] if overwrite else [])], log, env=env)
    # The run records the caller's config, from which a resume derives the ranks' again (and with
    # learner.processes=1 resumes in one process with the caller's threads).
    RunDir(out).write_config(cfg.to_dict())
    return True


def _write_role_final(run: RunDir) -> Path:
    """final/ of a run with per-role weights: a copy of its last checkpoint (every adapter or
    model copy, verified by the checkpoint's manifest), so final/ marks a finished run whatever
    the sharing and `load_trained_policy(run / "final")` loads every role."""
    ckpt = latest_checkpoint(run.path)
    if ckpt is None:
        raise CheckpointError(f"{run.path}: no checkpoint to write final/ from")
    staged = run.path / f".{FINAL_DIR}.tmp_{os.getpid()}"
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(ckpt, staged)
    move_into_place(staged, run.final_dir)
    return run.final_dir


def _open_new(cfg: Config, out: Path, init_policy: Path | None, overwrite: bool) -> tuple[RunDir, Trainer]:
    if init_policy is None:
        raise ValueError("train needs an initial policy (warm start dir or model path)")
    torch.set_num_threads(cfg.run.threads)
    if not is_writer():  # another rank of a sharded learner: rank 0 creates the run directory
        return RunDir(out), Trainer(cfg, load_policy(init_policy, cfg.model.dtype))
    policy = load_policy(init_policy, cfg.model.dtype)
    made = [p for p in (out.parent, *out.parent.parents) if not p.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out.parent, prefix=f".{out.name}.{MODEL_DIR}.tmp_")
    # Staged beside the run dir, before the Trainer: isolated sharing wraps policy.model in
    # adapters, and the run dir itself must not exist until the Trainer has been built.
    staged = out.parent / f".{out.name}.{MODEL_DIR}.tmp_{os.getpid()}"
    trainer = None
    try:
        stage_run_policy(policy, staged)
        trainer = Trainer(cfg, policy)
        run = RunDir.create(out, cfg.to_dict(), overwrite=overwrite,
                            before_config=lambda rd: move_into_place(staged, rd.model_dir))
    except BaseException:
        if trainer is not None:
            trainer.close()
        shutil.rmtree(staged, ignore_errors=True)
        for p in made:  # innermost first; only if still empty
            try:
                p.rmdir()
            except OSError:
                break
        raise
    return run, trainer


def _open_resumed(out: Path, log, overrides: list[str] | None) -> tuple[RunDir, Trainer]:
    run = RunDir.open_for_resume(out) if is_writer() else RunDir(out)
    run_cfg = run.read_config()
    cfg = resume_config(run_cfg, overrides)
    torch.set_num_threads(cfg.run.threads)  # the run's own, not the caller's default
    check_hardware(cfg)  # a device this machine lacks fails before the model loads
    trainer = Trainer(cfg, load_run_policy(run.model_dir, cfg.model.dtype))
    try:
        ckpt = newest_valid_checkpoint(run.path, log=log)
        if ckpt is not None:
            restore_trainer(trainer, ckpt)
        _check_not_finished(run, cfg, trainer)
        if is_writer() and run_cfg.get("rl", {}).get("steps") != cfg.rl.steps:  # later resumes keep the new end
            run.write_config({**run_cfg, "rl": {**run_cfg.get("rl", {}), "steps": cfg.rl.steps}})
        if is_writer():
            run.truncate_metrics(trainer.step_idx)
    except BaseException:
        trainer.close()
        raise
    log(f"resuming {run.path} at step {trainer.step_idx} from "
        f"{ckpt.path if ckpt is not None else 'its initial model (no checkpoint yet)'}")
    return run, trainer


def _check_not_finished(run: RunDir, cfg: Config, trainer: Trainer) -> None:
    step, end = trainer.step_idx, cfg.rl.steps
    if step > end:
        raise ConfigError(f"rl.steps={end} is below step {step}, which {run.path} has already reached; "
                          "a resume can only keep or raise rl.steps")
    if isinstance(trainer.policies, SharedPolicies):
        finished = _final_step(run) == end
    else:  # no final/: the last checkpoint holds the result
        finished = step == end
    if finished:
        raise ConfigError(f"{run.path} is already finished (rl.steps={end}); to train it further, "
                          f"raise rl.steps: swarmrl train --resume {run.path} rl.steps={2 * end}")


def _final_step(run: RunDir) -> int | None:
    """The step final/ holds, or None if it is absent or fails verification (then a resume
    writes it again)."""
    if not run.final_dir.exists():
        return None
    try:
        return verify_run_policy(run.final_dir).get("step")
    except CheckpointError:
        return None


def _checkpoint_due(cfg: Config, trainer: Trainer) -> bool:
    return trainer.step_idx == cfg.rl.steps or bool(cfg.run.checkpoint_every and
                                                    trainer.step_idx % cfg.run.checkpoint_every == 0)


def _train_steps(cfg: Config, run: RunDir, trainer: Trainer) -> None:
    if not is_writer():  # a sharded learner's other ranks: the same steps and collectives, no writes
        while trainer.step_idx < cfg.rl.steps:
            trainer.step()
            if _checkpoint_due(cfg, trainer):
                save_trainer_checkpoint(run, trainer)
        return
    run.append_environment({"step": trainer.step_idx, "utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                            **environment(threads=cfg.run.threads, processes=launch_world()[1])})
    sinks = Loggers.open(cfg.run.loggers, run.path, cfg.to_dict(), start_step=trainer.step_idx,
                         wandb_project=cfg.run.wandb_project, wandb_mode=cfg.run.wandb_mode)
    with sinks, TrainProgress(cfg.rl.steps, enabled=cfg.run.progress, start_step=trainer.step_idx) as progress:
        while trainer.step_idx < cfg.rl.steps:
            metrics, rollouts = trainer.step()
            step = metrics["step"]
            run.append_metrics(metrics)
            samples = _sample_rows(trainer, rollouts, cfg)
            run.write_samples(step, samples)
            sinks.log(step, metrics, samples)
            progress.update(step + 1, metrics)
            if _checkpoint_due(cfg, trainer):
                save_trainer_checkpoint(run, trainer)
                if cfg.run.keep_checkpoints:
                    prune_checkpoints(run.path, cfg.run.keep_checkpoints)


def _trained_parts(path: Path) -> tuple[Path | None, Path | None]:
    """(run dir, checkpoint) that `load_trained_policy(path)` reads; (None, None) for a plain
    model directory (a run's final/ or model/, or a Hugging Face one), read as it is."""
    if (path / "config.yaml").exists() and (path / MODEL_DIR).exists():  # a run directory
        return path, latest_checkpoint(path)
    if path.name == FINAL_DIR and (path / "manifest.json").exists():  # final/ of a per-role run
        return path.parent, path
    if (path / "manifest.json").exists():  # a checkpoint dir inside a run
        return path.parent.parent, path
    return None, None


def trained_weights_dirs(path: Path) -> list[Path]:
    """The directories whose weights `load_trained_policy(path)` reads (for provenance digests)."""
    run_dir, ckpt = _trained_parts(Path(path))
    if run_dir is None:
        return [Path(path)]
    return [run_dir / MODEL_DIR] + ([ckpt] if ckpt is not None else [])


def load_trained_policy(path: Path, dtype: str = "float32") -> tuple[Policy | PolicySet, dict | None]:
    """A run dir (its latest checkpoint), a checkpoint dir, or a HF model dir -> policy (+ run config).

    Runs with per-role policies come back as a PolicySet with every role's weights loaded.
    Whatever comes from a run (model/, final/, a checkpoint) is verified against its manifest.
    """
    path = Path(path)
    run_dir, ckpt = _trained_parts(path)
    if run_dir is None:
        is_run_part = (path / POLICY_MANIFEST).exists() or (path.parent / "config.yaml").exists()  # final/, model/
        return (load_run_policy(path, dtype) if is_run_part else load_policy(path, dtype)), None
    run_cfg = RunDir(run_dir).read_config()
    policy = load_run_policy(run_dir / MODEL_DIR, dtype)
    policies = make_policy_set(config_from_dict(run_cfg), policy)
    if ckpt is not None:
        try:
            policies.load_state_tensors(load_checkpoint(ckpt).tensors, str(ckpt))
        except KeyError as e:
            raise CheckpointError(str(e.args[0])) from e
    return (policy if isinstance(policies, SharedPolicies) else policies), run_cfg
