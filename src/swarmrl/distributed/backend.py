"""Where a step's rollouts run: in the trainer's process (`local`) or on Ray workers (`ray`).

The trainer hands a backend the step number and a function that builds that step's
rollouts (not yet run) and their sampling seed; the function depends on (seed, step) alone,
so a backend may build a step's rollouts ahead of time (asynchronous rollouts) or build a
shard again (a worker died). Both backends split the problem groups into the same
`distributed.rollout_workers` shards and run each shard as one `Runtime.run` call: sampling
is seeded per turn (policy/actor.py `turn_seed`), and identical shards also mean identical
batches, so `local` and `ray` give the same rollouts (token ids, texts, simulated times, scores).
Their floats agree within tolerance, not bit for bit: Ray workers sample with one torch thread,
the local backend with the trainer's `run.threads`, and CPU kernels reduce in a thread-count
dependent order (tests/conftest.py states the tolerances).
"""

from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from swarmrl.config import ConfigError

from swarmrl.collective.state import Rollout

# step -> (the step's rollouts, not yet run; their sampling seed)
RolloutFactory = Callable[[int], tuple[list[Rollout], int]]


class DistributedError(ConfigError):
    """The distributed setup cannot work (unreachable cluster, too few CPUs, lost workers); names the cause."""


class RolloutBackend(Protocol):
    def run(self, step: int, make: RolloutFactory) -> tuple[list[Rollout], dict]:
        """Run step `step`'s rollouts with the current weights -> (finished rollouts in index order,
        `distributed/*` metrics)."""
        ...

    def set_draft_corpus(self, corpus: list) -> None:
        """What the next steps' samplers start their draft tables from (policy/speculative.py)."""
        ...

    def close(self) -> None:
        """Release what the backend started (workers, a cluster, a sampling engine); idempotent."""
        ...


def shard_groups(rollouts: list[Rollout], shards: int) -> list[list[Rollout]]:
    """Contiguous problem groups per shard (a group's rollouts stay together: its advantage
    baseline, and the cost of a shard, follow whole groups). Empty shards are dropped."""
    groups = sorted({r.group for r in rollouts})
    parts = [set(p.tolist()) for p in np.array_split(np.array(groups, dtype=int), shards)]
    return [s for s in ([r for r in rollouts if r.group in part] for part in parts) if s]


def sync_engine(policies, version: int) -> None:
    """Hand the learner's new weights to an external sampling engine (vLLM), if one is in use."""
    if policies.engine is not None:
        policies.engine.load_weights(policies.state_tensors(), version)


class LocalBackend:
    """The trainer's runtime and actor, shard by shard in this process."""

    def __init__(self, cfg):
        self.cfg, self.shards = cfg, cfg.distributed.rollout_workers
        self.runtime = self.actor = self.policies = None
        self.version = -1

    def attach(self, runtime, actor, policies) -> None:
        self.runtime, self.actor, self.policies = runtime, actor, policies
        if self.cfg.sampler.engine == "vllm":  # sampling in this process: the engine lives here
            from swarmrl.policy.vllm_engine import VLLMSampler
            policies.engine = VLLMSampler(self.cfg, policies)

    def set_draft_corpus(self, corpus: list) -> None:
        self.actor.draft_corpus = corpus

    def run(self, step: int, make: RolloutFactory) -> tuple[list[Rollout], dict]:
        if step != self.version:
            sync_engine(self.policies, step)
            self.version = step
        rollouts, seed = make(step)
        for shard in shard_groups(rollouts, self.shards):
            self.runtime.run(shard, self.actor, seed=seed)
        for r in rollouts:
            r.policy_version = step
        return rollouts, idle_metrics(self.shards)

    def close(self) -> None:
        """The vLLM engine `attach` started (GPU memory, its engine process); idempotent."""
        engine = getattr(self.policies, "engine", None)
        if engine is not None:
            self.policies.engine = None
            engine.close()


def idle_metrics(workers: int) -> dict:
    """The `distributed/*` keys every backend logs (the local backend: nothing stale, nothing lost)."""
    return {"distributed/workers": workers, "distributed/worker_restarts": 0, "distributed/staleness_mean": 0.0,
            "distributed/staleness_max": 0, "distributed/rollouts_missing": 0}
