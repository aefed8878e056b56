"""A rollout worker: a policy replica, a runtime, and the weights version it holds.

Plain Python; distributed/ray_backend.py runs it as a Ray actor. Rollouts travel in and
out by pickle (plain dataclasses); weights arrive as an object-store reference, boxed in a
list so that Ray does not fetch them for a call whose version the worker already holds.
"""

from __future__ import annotations

import os
import time

import torch

from swarmrl.collective.state import Rollout
from swarmrl.config import config_from_dict


class RolloutWorker:
    def __init__(self, cfg_dict: dict, policy, index: int, build, threads: int = 1):
        """`build(cfg, policy) -> (runtime, policy set)`: the composition root's `rollout_parts`,
        passed in (by reference) so the worker builds its replica exactly as the trainer does."""
        from swarmrl.policy.actor import LLMActor

        # One core per worker: workers share the machine with the learner. Their floats therefore differ
        # in the last bits from a learner sampling with more threads (tolerances: tests/conftest.py).
        torch.set_num_threads(threads)
        cfg = config_from_dict(cfg_dict)
        self.index = index
        self.runtime, self.policies = build(cfg, policy)
        self.task = self.runtime.task
        if cfg.sampler.engine == "vllm":
            from swarmrl.policy.vllm_engine import VLLMSampler
            self.policies.engine = VLLMSampler(cfg, self.policies)
        self.actor = LLMActor.from_config(cfg.sampler, self.policies)
        self.version = -1

    def ready(self) -> int:
        return os.getpid()

    def run(self, rollouts: list[Rollout], seed: int, version: int, weights_box: list,
            die: bool = False) -> tuple[list[Rollout], int, float]:
        """Run the rollouts with weights `version` -> (rollouts, the version that produced them, seconds).
        `weights_box`: object refs of the weights and of the draft corpus published with them."""
        if die:  # test-only fault injection (RayBackend.inject_failure): the process dies mid-step
            os._exit(1)
        if version != self.version:
            import ray
            self.policies.load_state_tensors(ray.get(weights_box[0]), f"weights v{version}")
            self.actor.draft_corpus = ray.get(weights_box[1])
            if self.policies.engine is not None:
                # a replacement worker may get an older resubmitted shard after a newer one: rewind on purpose
                self.policies.engine.load_weights(self.policies.state_tensors(), version,
                                                  rewind=version < self.version)
            self.version = version
        t0 = time.perf_counter()
        self.runtime.run(rollouts, self.actor, seed=seed)
        for r in rollouts:
            r.policy_version = self.version
        return rollouts, self.version, time.perf_counter() - t0

    def close(self) -> None:
        """Release the task's sandbox pool and the sampling engine before the actor is killed
        (a kill skips both: the engine's own process and in-flight sandboxes would be orphaned)."""
        from swarmrl.tasks import close_task
        engine, self.policies.engine = self.policies.engine, None
        try:
            if engine is not None:
                engine.close()
        finally:
            close_task(self.task)
