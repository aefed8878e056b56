"""One sharded update on a fixed batch, in spawned processes (tests/distributed/test_sharded_update.py).

`one_update(strategy, sharing)` builds the same tiny policy set and the same sequences in any
process; `update_in_processes` runs it under ddp / fsdp on `world` gloo ranks and saves what
rank 0 gathers (full weights, optimizer states, metrics) to a file the test reads.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from swarmrl.build import make_policy_set
from swarmrl.policy.model import build_tiny_policy
from swarmrl.rl.batch import TrainSeq, pad, token_logprobs
from swarmrl.rl.losses import get_loss
from swarmrl.rl.update import Updater

from dist_helpers import tiny_cfg

# Small micro-batches (several per rank, unequal counts), two minibatches, a clip that bites,
# per-role gradient norms on the step: every path of the sharded update. rl.lr: the default.
OVERRIDES = ("rl.micro_batch_tokens=96", "rl.minibatches_per_step=2", "rl.grad_clip=0.05", "rl.role_grad_interval=1")


def setup(sharing: str, n: int = 12):
    """(cfg, policy set, sequences): the same in every process. LoRA runs with the KL term: its
    reference is the base model with the adapters off, one more forward per micro-batch. The
    sequences start with one of three 18-token prompts, so micro-batches share prefixes."""
    kl = ["rl.kl_coef=0.05"] if sharing == "isolated" else []
    cfg = tiny_cfg(f"policy.sharing={sharing}", *OVERRIDES, *kl)
    policy = build_tiny_policy(cfg.model, seed=3)
    policies = make_policy_set(cfg, policy)
    g = np.random.default_rng(7)
    roles = ["ceo", "expert"]
    problems = [g.integers(0, 200, 18).tolist() for _ in range(3)]  # prompt prefixes the learner shares
    seqs = []
    for i in range(n):
        length = 18 + int(g.integers(6, 30))
        prompt = 18 + int(g.integers(2, length - 19))
        ids = problems[i % 3] + g.integers(0, 200, length - 18).tolist()
        seqs.append(TrainSeq(ids, [0] * prompt + [1] * (length - prompt), [0.0] * length, float(g.normal()),
                             roles[i % 3 == 0], i, i // 2))
    with torch.no_grad():  # behaviour log-probs: the initial policy's (on-policy), plus noise so the clip bites
        for s in seqs:
            t = pad([s], policy.pad_id)
            lp, _ = token_logprobs(policy.model, t["ids"], t["attn"], with_entropy=False)  # [1, T]
            s.old_logp = (lp[0] + torch.from_numpy(g.normal(0, 0.3, len(s.ids))).float()).tolist()
    return cfg, policies, seqs


def one_update(sharing: str, sharding=None) -> tuple[dict, Updater, object]:
    cfg, policies, seqs = setup(sharing)
    if sharding is not None:
        sharding.wrap(policies)
    upd = Updater(cfg.rl, policies, get_loss(cfg.rl.loss), policies.base.pad_id, cfg.seed,
                  temperature=cfg.sampler.temperature, sharding=sharding)
    metrics = upd.update(seqs, 0, measure_roles=True)
    return metrics, upd, policies


def _worker(rank: int, world: int, cases: list[tuple[str, str]], out: str) -> None:
    torch.set_num_threads(1)
    import torch.distributed as dist
    from swarmrl.distributed.sharding import ShardedLearner
    # A file rendezvous, not env:// on a probed free port: another process can take a probed
    # port before rank 0 binds it (seen as a rare bind error right after a full test run).
    dist.init_process_group("gloo", init_method=f"file://{out}/rendezvous", rank=rank, world_size=world)
    learner = None
    try:
        for strategy, sharing in cases:
            learner = ShardedLearner(strategy, "gloo", rank, world)  # the process group is made once
            metrics, upd, policies = one_update(sharing, learner)
            tensors, optims = learner.full_state(policies, upd.optimizers)
            if rank == 0:
                torch.save({"metrics": metrics, "tensors": tensors, "optims": optims},
                           Path(out) / f"{strategy}-{sharing}.pt")
    finally:
        if learner is not None:
            learner.close()


def update_in_processes(cases: list[tuple[str, str]], out: Path, world: int = 2) -> dict:
    """Run every (strategy, sharing) case on `world` spawned gloo ranks -> {case: rank 0's result}."""
    import torch.multiprocessing as mp
    mp.spawn(_worker, args=(world, cases, str(out)), nprocs=world, join=True)
    return {case: torch.load(Path(out) / f"{case[0]}-{case[1]}.pt", weights_only=False) for case in cases}
