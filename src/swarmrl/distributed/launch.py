"""Self-launch: `learner.processes > 1` makes `train`, and `warmstart.processes > 1` makes the warm
start (`pretrain`, and any command that fills its cache), start their own ranks under
`torch.distributed.run`, as if the user had typed

    torchrun --standalone --nproc-per-node N -m swarmrl.cli train CONFIG --out DIR ...

Why: on a small CPU machine the tiny model's operations are too small for two threads to
share well; two single-threaded processes, each with half of a step's rollouts and half of
its sequences, do the same work in 0.8-0.85x the time (README: the demo's time). The calling
process waits and then reads the run (or the cache) the ranks wrote.

Each rank gets `run.threads // N` threads (at least 1), so N processes use the cores one
process would; for training, a single-process strategy becomes `ddp`. Training's numbers equal
one process's up to float rounding: the gradient is summed over ranks in another order. The warm
start's ranks add their micro-batches' gradients in one process's order (policy/warmstart.py
`ranked_backward`), so its weights are one process's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import yaml

from swarmrl.config import Config, ConfigError, apply_overrides, config_from_dict
from swarmrl.distributed.torchrun import check_learner, launch_world
from swarmrl.runs.rundir import to_jsonable


LEARNER, WARMSTART = "learner.processes", "warmstart.processes"  # who asks for ranks


def processes(cfg: Config, key: str = LEARNER) -> int:
    """The ranks `key` asks for: learner.processes (training) or warmstart.processes."""
    return cfg.learner.processes if key == LEARNER else cfg.warmstart.processes


def thread_share(cfg: Config, n: int) -> int:
    """Each of n ranks' share of run.threads (at least 1)."""
    return max(1, cfg.run.threads // n)


def warm_start_threads(cfg: Config) -> int:
    """The torch threads each process training the warm start computes with: warmstart.threads,
    else its rank's share of run.threads."""
    return cfg.warmstart.threads or thread_share(cfg, cfg.warmstart.processes)


def launch_needed(cfg: Config, key: str = LEARNER) -> bool:
    """This process should start ranks rather than train itself: `key` asks for more than one
    and no launcher started this process."""
    return processes(cfg, key) > 1 and "WORLD_SIZE" not in os.environ


def rank_overrides(cfg: Config, key: str = LEARNER) -> list[str]:
    """What a rank changes in the caller's config: its share of the threads, and for training a
    multi-process strategy. The warm start's threads are pinned to the caller's reading, so every
    rank names the warm start by the caller's cache key (a rank's own run.threads is its share)."""
    out = [f"run.threads={thread_share(cfg, processes(cfg, key))}",
           f"warmstart.threads={warm_start_threads(cfg)}"]
    if key == LEARNER and cfg.learner.strategy == "single":
        out.append("learner.strategy=ddp")
    return out


def rank_config(cfg: Config, key: str = LEARNER) -> Config:
    """The config each rank runs: its share of the threads, and for training a multi-process
    strategy. A ConfigError, before anything starts, where that many ranks cannot run here."""
    n = processes(cfg, key)
    ranked = config_from_dict(apply_overrides(cfg.to_dict(), rank_overrides(cfg, key)))
    if key == LEARNER:
        try:
            check_learner(ranked, world=n)
        except ConfigError as e:
            raise ConfigError(f"{key}={n}: {e} (or {key}=1)") from None
    if key == LEARNER:  # the warm start trains on the CPU
        import torch
        device = str(cfg.model.device)
        on_gpu = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
        if on_gpu and torch.cuda.device_count() < n:
            raise ConfigError(f"{key}={n} puts one rank on each GPU; this machine has "
                              f"{torch.cuda.device_count()}: set {key} to at most that"
                              + (", or model.device=cpu" if device == "auto" else ""))
    return ranked


def launch(cfg: Config, command: list[str], log=print, key: str = LEARNER, env: dict[str, str] | None = None) -> None:
    """Run `swarmrl <command[0]> CONFIG <command[1:]>` on the ranks `key` asks for, CONFIG being
    `rank_config(cfg, key)` in a temporary file, with `env` added to their environment; returns
    when every rank has exited, raises if one failed."""
    ranked = rank_config(cfg, key)
    with tempfile.TemporaryDirectory(prefix="swarmrl-launch-") as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(to_jsonable(ranked.to_dict()), sort_keys=False))
        run_ranks([command[0], str(path), *command[1:]], processes(cfg, key), log, key, env)


CALLERS_KEY = "SWARMRL_WARMSTART_KEY"  # the warm start's key the process that started the ranks looked up


def callers_key(key: str) -> dict[str, str]:
    """The environment that tells ranks started here which warm-start cache entry this process waits for."""
    return {CALLERS_KEY: key}


def check_callers_key(key: str) -> None:
    """On a rank: refuse to train a warm start under another key than the process that started it
    waits for. The key hashes the demonstrations' source as it is on disk, so an edit between the
    caller's lookup and the ranks' start would have them fill an entry nobody reads."""
    expected = os.environ.get(CALLERS_KEY)
    if expected and expected != key and launch_world()[1] > 1:
        raise ConfigError(f"the warm start's cache key on this rank ({key}) is not the one the process that "
                          f"started the ranks looked up ({expected}): the source it hashes (the scenario's, "
                          "task's and warm start's code) changed in between. Run again once the edits are done")


def launch_resume(cfg: Config, out: Path, overrides: list[str], log=print) -> None:
    """`swarmrl train --resume OUT` on `learner.processes` ranks: each reads the run's config (the
    caller's, `train` records it) with the caller's overrides and its own (`rank_overrides`)."""
    rank_config(cfg)
    run_ranks(["train", "--resume", str(out), *overrides, *rank_overrides(cfg)], cfg.learner.processes, log, LEARNER)


def run_ranks(command: list[str], n: int, log=print, key: str = LEARNER, env: dict[str, str] | None = None) -> None:
    """`swarmrl COMMAND` on n ranks under torch.distributed.run (`env` added to this process's
    environment); waits, and raises a RuntimeError with the exit status if a rank failed."""
    if launch_world()[1] > 1:
        raise RuntimeError("already one rank of a launched run: a rank never launches ranks of its own")
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), **(env or {})}
    log(f"starting {n} processes ({key}={n}; {key}=1 trains in this one)")
    # torchrun's own log directory, removed after: by default it leaves a torchelastic_* in /tmp per launch
    with tempfile.TemporaryDirectory(prefix="swarmrl-ranks-") as logs:
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
                f"--log-dir={logs}", "-m", "swarmrl.cli", *command]
        status = wait_stopping_on_signals(subprocess.Popen(argv, env=env))
    if status != 0:
        raise RuntimeError(f"a rank of the {n}-process launch failed (exit status {status}); its error "
                           f"is printed above. To rerun in one process: {key}=1")


def wait_stopping_on_signals(launcher: subprocess.Popen, grace_s: float = 30.0) -> int:
    """The launcher's exit status. If this process is told to stop (Ctrl-C, SIGTERM from `kill`,
    a scheduler or `timeout`, SIGHUP from a closed terminal), the launcher gets SIGTERM first,
    which it passes on to the ranks; only if it is still there after `grace_s` is it killed.
    Killing it at once (what `subprocess.run` does) would leave the ranks training on with
    nobody waiting for them. SIGTERM and SIGHUP then end this process with status 128 + signal,
    as their default action would."""
    def _stop(signum, frame):
        raise SystemExit(128 + signum)

    watched = (signal.SIGTERM, signal.SIGHUP)
    main = threading.current_thread() is threading.main_thread()  # handlers can only be set there
    previous = {sig: signal.signal(sig, _stop) for sig in watched} if main else {}
    try:
        return launcher.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if launcher.poll() is None:
            launcher.terminate()
            try:
                launcher.wait(grace_s)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.wait()
