"""Processes launched by torchrun for a sharded learner: launch checks, the process group, and
the rollout backend that spreads a step's rollouts over the ranks.

    torchrun --nproc-per-node N -m swarmrl.cli train CONFIG --out DIR learner.strategy=fsdp ...

Every rank runs the whole training loop. `TorchrunBackend` gives each rank a contiguous share
of the step's problem groups (groups stay whole, so group-normalised advantages need no
communication), runs it, and all-gathers the finished rollouts, so every rank holds the whole
step: the same rewards, advantages, metrics and detector state on every rank, and the same
per-token weights for the sharded update (distributed/sharding.py). Rank 0 alone writes the
run directory (rl/loop.py asks `is_writer`).

The shards are those of `LocalBackend` with max(N, distributed.rollout_workers) workers, and
sampling is seeded per turn, so N ranks sample the same tokens as one process with that many
rollout workers.
"""

from __future__ import annotations

import os
import time

import torch

from swarmrl.config import Config, ConfigError
from swarmrl.distributed.backend import RolloutFactory, idle_metrics, shard_groups
from swarmrl.distributed.sharding import ShardedLearner
from swarmrl.rl.sharded import contiguous_share, rank_idle

LAUNCH = "torchrun --nproc-per-node N -m swarmrl.cli train CONFIG --out DIR ..."


def launch_world() -> tuple[int, int]:
    """(rank, world size) as torchrun set them in the environment; (0, 1) in a plain process."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def is_writer() -> bool:
    """This process writes the run directory: rank 0, or the only process."""
    return launch_world()[0] == 0


def check_learner(cfg: Config, world: int | None = None) -> None:
    """The learner strategy fits how the processes were launched and the rest of the config;
    a ConfigError naming the key otherwise, before any model is loaded."""
    world = launch_world()[1] if world is None else world
    lc = cfg.learner
    if lc.strategy == "single":
        if world > 1:
            raise ConfigError(f"torchrun started {world} processes but learner.strategy=single trains in one: "
                              "set learner.strategy=ddp or fsdp, or run without torchrun")
        return
    checks = [
        (world >= 2, f"learner.strategy={lc.strategy} needs >= 2 processes: launch with {LAUNCH} "
                     f"(this process is alone, WORLD_SIZE={world})"),
        (cfg.distributed.backend == "local", f"learner.strategy={lc.strategy} spreads rollouts over its own ranks: "
                                             f"set distributed.backend=local (got {cfg.distributed.backend})"),
        (cfg.sampler.engine == "hf", f"learner.strategy={lc.strategy} samples with the HF sampler on each rank: "
                                     f"sampler.engine={cfg.sampler.engine} is not supported with it"),
        (lc.dist_backend != "nccl" or torch.cuda.is_available(),
         "learner.dist_backend=nccl needs CUDA GPUs; this machine has none (use gloo or auto)"),
    ]
    if lc.strategy == "fsdp":
        checks += [
            (cfg.policy.sharing in ("shared", "isolated"), "learner.strategy=fsdp shards one model: policy.sharing "
                                                          f"shared or isolated (got {cfg.policy.sharing}; use ddp)"),
            (cfg.rl.logprob_chunk_tokens == 0, "rl.logprob_chunk_tokens > 0 calls the model's body and head "
                                               "apart, past FSDP's root hooks: set it to 0 with learner.strategy=fsdp"),
            (cfg.rl.kl_coef == 0 or cfg.policy.sharing != "shared",
             "rl.kl_coef > 0 under policy.sharing=shared keeps a full reference copy of the model, which "
             "learner.strategy=fsdp cannot shard: use ddp, or kl_coef=0"),
        ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def dist_backend(cfg: Config) -> str:
    """`learner.dist_backend`, with auto = nccl where the model is on CUDA, else gloo."""
    if cfg.learner.dist_backend != "auto":
        return cfg.learner.dist_backend
    return "nccl" if torch.cuda.is_available() and not str(cfg.model.device).startswith("cpu") else "gloo"


def open_learner(cfg: Config) -> ShardedLearner | None:
    """The process group of a sharded learner (None under learner.strategy=single). Each rank
    computes on its own GPU (LOCAL_RANK) under nccl."""
    check_learner(cfg)
    if cfg.learner.strategy == "single":
        return None
    backend = dist_backend(cfg)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    rank, world = launch_world()
    return ShardedLearner(cfg.learner.strategy, backend, rank, world)


class TorchrunBackend:
    """Each rank runs its contiguous share of the step's shards, then all ranks exchange them."""

    def __init__(self, cfg: Config, learner: ShardedLearner):
        self.cfg, self.learner = cfg, learner
        self.shards = max(learner.world, cfg.distributed.rollout_workers)
        self.runtime = self.actor = self.policies = None

    def attach(self, runtime, actor, policies) -> None:
        self.runtime, self.actor, self.policies = runtime, actor, policies

    def set_draft_corpus(self, corpus: list) -> None:
        self.actor.draft_corpus = corpus  # every rank holds every rollout: the same corpus everywhere

    def run(self, step: int, make: RolloutFactory) -> tuple[list, dict]:
        self.learner.gather()  # fsdp: full weights on every rank, so sampling needs no collective
        rollouts, seed = make(step)
        shards = shard_groups(rollouts, self.shards)
        mine = [shards[k] for k in contiguous_share(len(shards), self.learner.rank, self.learner.world)]
        t0 = time.perf_counter()
        for shard in mine:
            self.runtime.run(shard, self.actor, seed=seed)
        done = [r for shard in mine for r in shard]
        parts = self.learner.all_gather((done, time.perf_counter() - t0))  # with each rank's busy seconds
        merged = sorted((r for part, _ in parts for r in part), key=lambda r: r.index)
        if [r.index for r in merged] != [r.index for r in rollouts]:
            raise RuntimeError(f"step {step}: the ranks returned rollouts {[r.index for r in merged]}, "
                               f"expected {[r.index for r in rollouts]}")
        for r in merged:
            r.policy_version = step
        return merged, {**idle_metrics(self.learner.world), **rank_idle("rollout", [[busy] for _, busy in parts])}

    def close(self) -> None:
        """Nothing of its own: the process group belongs to the learner (build.py closes it)."""
