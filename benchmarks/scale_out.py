"""Rollout throughput of the backends: local, and Ray with 1 and 2 rollout workers.

Same config, same initial policy, same run (one process, back to back, one local Ray
cluster). Each mode collects `--steps` steps of rollouts through `backend.run` exactly as
`Trainer.step` does (weights published every step), after one warm-up step; no update runs
in between, so the rollouts of every mode are the same work (the same tokens: sampling is
seeded per turn) and only the wall time differs.

    .venv/bin/python benchmarks/scale_out.py [--init DIR] [--steps 3] [--cpus 2] [key=value ...]

Without --init the demo config's cached warm start is used if present, else an untrained
tiny model (whose turns mostly run to the token cap: more tokens per rollout).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from swarmrl.cli import DEMO_CONFIG, resolve_config
from swarmrl.config import load_config
from swarmrl.policy.model import build_tiny_policy, load_policy
from swarmrl.rl.trainer import Trainer


def measure(cfg, policy_fn, steps: int) -> dict:
    trainer = Trainer(cfg, policy_fn())
    try:
        trainer.backend.run(0, trainer.step_rollouts)  # warm-up: worker start-up, first weights
        t0 = time.perf_counter()
        n = tokens = 0
        for s in range(1, steps + 1):
            rollouts, _ = trainer.backend.run(s, trainer.step_rollouts)
            n += len(rollouts)
            tokens += sum(t.generated_tokens for r in rollouts for t in r.turns)
        wall = time.perf_counter() - t0
    finally:
        trainer.close()
    return {"rollouts": n, "wall_s": round(wall, 2), "rollouts_per_s": round(n / wall, 3),
            "generated_tokens_per_s": round(tokens / wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", help="initial policy dir (default: cached warm start, else untrained tiny model)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--cpus", type=int, default=os.cpu_count())
    ap.add_argument("--out", default="benchmarks/scale_out.json")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    base = ["run.progress=false", "eval.val_interval=0", f"rl.steps={args.steps + 1}", *args.overrides]
    cfg = load_config(resolve_config(DEMO_CONFIG), base)
    init = Path(args.init) if args.init else None
    if init is None:
        from swarmrl.paths import cache_dir
        cached = sorted(cache_dir(cfg.warmstart.cache_dir, create=False).glob("warmstart-*"))
        init = cached[-1] if cached else None
    policy_fn = (lambda: load_policy(init, cfg.model.dtype)) if init else (lambda: build_tiny_policy(cfg.model))

    import ray
    from swarmrl.distributed.ray_backend import init_ray
    init_ray("", num_cpus=args.cpus)
    torch.set_num_threads(cfg.run.threads)
    modes = {"local": ["distributed.backend=local"],
             "ray_1_worker": ["distributed.backend=ray", "distributed.rollout_workers=1"],
             "ray_2_workers": ["distributed.backend=ray", "distributed.rollout_workers=2"]}
    results = {"config": DEMO_CONFIG, "init": str(init) if init else "untrained tiny model", "steps": args.steps,
               "rollouts_per_step": cfg.rl.problems_per_step * cfg.rl.rollouts_per_problem, "cpus": args.cpus,
               "torch_threads_local": cfg.run.threads, "torch_threads_per_worker": 1, "modes": {}}
    try:
        for name, extra in modes.items():
            results["modes"][name] = measure(load_config(resolve_config(DEMO_CONFIG), base + extra), policy_fn, args.steps)
            print(name, results["modes"][name], flush=True)
    finally:
        ray.shutdown()
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
