"""Scale-out: where rollouts run (local | Ray workers) and how the learner's weights reach them."""

from __future__ import annotations

from swarmrl.distributed.backend import DistributedError, LocalBackend, RolloutBackend, shard_groups


def make_backend(cfg, policy, build, learner=None) -> RolloutBackend:
    """Checks the engine and the cluster before anything trains; call before the policy set
    wraps `policy` in adapters (Ray workers build their replicas from the plain model).
    `build(cfg, policy) -> (runtime, policy set)` builds a Ray worker's replica (build.py
    `rollout_parts`). The backend still needs `attach(runtime, actor, policies)`.
    `learner`: the process group of a sharded learner (distributed/torchrun.py), whose ranks
    share the rollouts among themselves."""
    from swarmrl.policy.vllm_engine import check_engine
    check_engine(cfg)
    if learner is not None:
        from swarmrl.distributed.torchrun import TorchrunBackend
        return TorchrunBackend(cfg, learner)
    if cfg.distributed.backend == "ray":
        from swarmrl.distributed.ray_backend import RayBackend
        return RayBackend(cfg, policy, build)
    return LocalBackend(cfg)


__all__ = ["DistributedError", "LocalBackend", "RolloutBackend", "make_backend", "shard_groups"]
