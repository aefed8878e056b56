"""Self-launch: `learner.processes > 1` makes `train` and `pretrain` (command line and API) start
their own ranks under `torch.distributed.run`, as if the user had typed

    torchrun --standalone --nproc-per-node N -m swarmrl.cli train CONFIG --out DIR ...

Why: on a small CPU machine the tiny model's operations are too small for two threads to
share well; two single-threaded processes, each with half of a step's rollouts and half of
its sequences, do the same work in about 0.7x the time (README: the demo's time). The calling
process waits and then reads the run (or the cache) the ranks wrote.

Each rank gets `run.threads // N` threads (at least 1), so N processes use the cores one
process would. A single-process strategy becomes `ddp`. The numbers equal one process's up to
float rounding: the gradient is summed over ranks in another order.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from swarmrl.config import Config, ConfigError, apply_overrides, config_from_dict
from swarmrl.distributed.torchrun import check_learner, launch_world
from swarmrl.runs.rundir import to_jsonable


def launch_needed(cfg: Config) -> bool:
    """This process should start `learner.processes` ranks rather than train itself: more than
    one is asked for and no launcher started this process."""
    return cfg.learner.processes > 1 and "WORLD_SIZE" not in os.environ


def rank_config(cfg: Config) -> Config:
    """The config each rank runs: its share of the threads, and a multi-process strategy. A
    ConfigError, before anything starts, where that many ranks cannot run here."""
    n = cfg.learner.processes
    overrides = [f"run.threads={max(1, cfg.run.threads // n)}"]
    if cfg.learner.strategy == "single":
        overrides.append("learner.strategy=ddp")
    ranked = config_from_dict(apply_overrides(cfg.to_dict(), overrides))
    try:
        check_learner(ranked, world=n)
    except ConfigError as e:
        raise ConfigError(f"learner.processes={n}: {e} (or learner.processes=1)") from None
    if str(cfg.model.device).startswith("cuda"):
        import torch
        if torch.cuda.device_count() < n:
            raise ConfigError(f"learner.processes={n} puts one rank on each GPU; this machine has "
                              f"{torch.cuda.device_count()}: set learner.processes to at most that")
    return ranked


def launch(cfg: Config, command: list[str], log=print) -> None:
    """Run `swarmrl <command[0]> CONFIG <command[1:]>` on `learner.processes` ranks, CONFIG being
    `rank_config(cfg)` in a temporary file; returns when every rank has exited, raises if one failed."""
    ranked = rank_config(cfg)
    with tempfile.TemporaryDirectory(prefix="swarmrl-launch-") as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(to_jsonable(ranked.to_dict()), sort_keys=False))
        run_ranks([command[0], str(path), *command[1:]], cfg.learner.processes, log)


def launch_resume(cfg: Config, out: Path, overrides: list[str], log=print) -> None:
    """`swarmrl train --resume OUT` on `learner.processes` ranks (each reads the run's config)."""
    rank_config(cfg)
    run_ranks(["train", "--resume", str(out), *overrides], cfg.learner.processes, log)


def run_ranks(command: list[str], n: int, log=print) -> None:
    """`swarmrl COMMAND` on n ranks under torch.distributed.run; waits, and raises a RuntimeError
    with the exit status if a rank failed."""
    if launch_world()[1] > 1:
        raise RuntimeError("already one rank of a launched run: a rank never launches ranks of its own")
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    log(f"starting {n} processes (learner.processes={n}; learner.processes=1 trains in this one)")
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
            "-m", "swarmrl.cli", *command]
    done = subprocess.run(argv, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"a rank of the {n}-process launch failed (exit status {done.returncode}); its error "
                           "is printed above. To rerun in one process: learner.processes=1")
