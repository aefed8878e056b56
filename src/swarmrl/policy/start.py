"""Where RL starts: a model the user names, the cached warm start (trained first if missing, on
the training's own ranks where they ask for as many), or a randomly initialised tiny model.

Heavy imports (torch, transformers) stay inside the functions: the API and the command line
import this module to decide what to do before anything loads.
"""

from __future__ import annotations

from pathlib import Path

from swarmrl.config import Config, ConfigError


def ranks_warm_start(cfg: Config) -> bool:
    """Training's ranks warm-start first, on the same processes: one start of the ranks instead
    of two (each imports torch and transformers: 7-15 s for 2 ranks on 2 cores,
    benchmarks/rank_start.py). Where training launches learner.processes ranks, the run starts
    from the warm start, it is not cached yet, and the ranks can share one group (`one_group`).
    Where they do, the warm start's own checks run here first: a rank's error would only read as
    "a rank failed"."""
    from swarmrl.distributed.launch import launch_needed
    from swarmrl.policy.warmstart import check_warm_start
    if not (launch_needed(cfg) and needs_warm_start(cfg) and one_group(cfg, cfg.learner.processes)
            and not is_cached(cfg)):
        return False
    check_warm_start(cfg)
    return True


def one_group(cfg: Config, world: int) -> bool:
    """`world` ranks can warm-start and then train in one process group: the warm start asks for
    as many ranks and trains over gloo, which training then keeps, so training must use gloo too
    (a CPU learner; under nccl the warm start runs on ranks of its own)."""
    from swarmrl.distributed.torchrun import dist_backend
    return cfg.warmstart.processes == world and dist_backend(cfg) == "gloo"


def policy_init(cfg: Config, log=print) -> Path:
    """Where RL starts: `model.name_or_path` as it is; else the warm start when
    `warmstart.enabled` asks for one (auto: the tiny model under the compact protocol, which
    knows nothing else); else a randomly initialised tiny model (cached by its config)."""
    from swarmrl.distributed.torchrun import launch_world
    from swarmrl.policy.warmstart import warm_start
    if cfg.model.name_or_path:
        if cfg.warmstart.enabled == "always":
            raise ConfigError("warmstart.enabled=always: the warm start trains the tiny model built from model.*, "
                              f"but model.name_or_path={cfg.model.name_or_path} is set (that model is the prior); "
                              "drop one of them")
        return Path(cfg.model.name_or_path)
    if not needs_warm_start(cfg):
        return random_init(cfg, log)
    world = launch_world()[1]
    if world > 1 and (not one_group(cfg, world) or is_cached(cfg)):
        return cached_warm_start(cfg)
    return warm_start(cfg, log=log, keep_group=world > 1)  # ranks: together, then training on the same group


def needs_warm_start(cfg: Config) -> bool:
    """Whether a run of `cfg` without --init starts from the warm start (`warmstart.enabled`)."""
    if cfg.model.name_or_path or cfg.warmstart.enabled == "never":
        return False
    if cfg.warmstart.enabled == "always":
        return True
    from swarmrl.collective.protocol import resolve_protocol
    from swarmrl.policy.tokenizer import build_tokenizer
    return resolve_protocol(cfg.model, build_tokenizer()) == "compact"


def random_init(cfg: Config, log=print) -> Path:
    """A randomly initialised tiny model, cached by its config (every rank of torchrun reads the
    same one; writing is atomic so ranks racing to create it agree)."""
    import hashlib
    import json
    import os
    import tempfile

    from swarmrl.paths import cache_dir
    from swarmrl.policy.model import build_tiny_policy, save_policy
    key = hashlib.sha256(json.dumps([cfg.model.__dict__, cfg.warmstart.seed], sort_keys=True).encode()).hexdigest()[:16]
    out = cache_dir(cfg.warmstart.cache_dir) / f"random-{key}"
    if not (out / "config.json").exists():
        tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
        save_policy(build_tiny_policy(cfg.model, seed=cfg.warmstart.seed), tmp)
        try:
            os.rename(tmp, out)
        except OSError:  # another process made it first
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
    log(f"no warm start (warmstart.enabled={cfg.warmstart.enabled}, model.protocol={cfg.model.protocol}): "
        f"RL starts from a randomly initialised tiny model ({out})")
    return out


def cached_warm_start(cfg: Config) -> Path:
    """The warm start's cache directory (policy/warmstart.py `warm_start` writes it there), which
    every rank of a sharded learner reads; an error naming the command that fills it if empty."""
    if not is_cached(cfg):
        raise ConfigError("under torchrun every rank starts from the same model: warm-start once first with "
                          "`swarmrl pretrain CONFIG [same overrides]`, set warmstart.processes to the number of "
                          "ranks (with a gloo learner they then warm-start together), or pass --init DIR or "
                          "model.name_or_path")
    return warm_start_path(cfg)


def is_cached(cfg: Config) -> bool:
    """The warm start of `cfg` is complete in the cache (its marker file travels with it)."""
    return (warm_start_path(cfg) / "warmstart.json").exists()


def warm_start_path(cfg: Config) -> Path:
    """Where the warm start of `cfg` is cached (policy/warmstart.py `warm_start` writes it)."""
    from swarmrl.paths import cache_dir
    from swarmrl.policy.warmstart import warmstart_key
    return cache_dir(cfg.warmstart.cache_dir) / f"warmstart-{warmstart_key(cfg)}"
