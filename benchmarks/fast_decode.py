"""The sampler's fast decode step (policy/fast_decode.py) against the model's own forward, interleaved.

Variants: `forward` (every decode step through `model(...)`) and `fast` (`FastDecode`, the same
tensor operations without the module machinery). Each round runs one RL step's rollouts (the same
problems and sampling seed for both: `Trainer.step_rollouts`) once per variant, in alternating
order, with the same weights. Reported: each variant's median wall time, the per-round ratios
fast / forward (median and quartiles), and in how many rounds both sampled the same tokens with the
same log-probs (they must in all: the step is bitwise the forward's).

    .venv/bin/python benchmarks/fast_decode.py [--rounds 12] [--init DIR] [--json F] [key=value ...]

key=value overrides go to the demo config, e.g. the single agent of benchmarks/vs_trl.py:
`workflow.name=single rl.smaller_caps_fraction=0`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

from swarmrl.cli import DEMO_CONFIG, resolve_config
from swarmrl.config import load_config
from swarmrl.policy import fast_decode
from swarmrl.policy.model import load_policy
from swarmrl.policy.warmstart import warm_start
from swarmrl.rl.trainer import Trainer

VARIANTS = ("forward", "fast")
FOR_MODEL = fast_decode.FastDecode.__dict__["for_model"]


def use(variant: str) -> None:
    """Patch the sampler's choice of decode step (a class attribute: nothing else changes)."""
    fast_decode.FastDecode.for_model = FOR_MODEL if variant == "fast" else classmethod(lambda cls, model: None)


def sampled(rollouts) -> list:
    """Every agent's tokens and behaviour log-probs, rollout by rollout."""
    return [[(name, a.ids, a.logprobs) for name, a in r.agents.items()] for r in rollouts]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--init", help="model directory (default: the cached warm start of the demo config)")
    ap.add_argument("--json")
    args, overrides = ap.parse_known_args()
    cfg = load_config(resolve_config(DEMO_CONFIG), ["learner.processes=1", *overrides])
    torch.set_num_threads(cfg.run.threads)
    trainer = Trainer(cfg, load_policy(args.init or warm_start(cfg), cfg.model.dtype))
    walls = {v: [] for v in VARIANTS}
    same = 0
    for i in range(args.rounds):
        step = cfg.rl.steps // 2 + i % 10  # mid-curriculum deadlines
        got = {}
        for v in VARIANTS if i % 2 == 0 else VARIANTS[::-1]:
            use(v)
            t0 = time.perf_counter()
            rollouts, _ = trainer.backend.run(step, trainer.step_rollouts)
            walls[v].append(time.perf_counter() - t0)
            got[v] = sampled(rollouts)
        same += got["forward"] == got["fast"]
        print(f"round {i}: " + ", ".join(f"{v} {walls[v][-1]:.3f}s" for v in VARIANTS), flush=True)
    use("fast")
    trainer.close()
    ratios = [a / b for a, b in zip(walls["fast"], walls["forward"])]
    summary = {"median_wall_s": {v: statistics.median(w) for v, w in walls.items()},
               "median_ratio_fast_to_forward": statistics.median(ratios),
               "quartiles_ratio": statistics.quantiles(ratios, n=4)[::2],
               "rounds_with_the_same_samples": f"{same} of {args.rounds}",
               "verdicts": {str(k[1:]): v for k, v in fast_decode._VERDICTS.items()}}
    print(json.dumps(summary, indent=1))
    if args.json:
        settings = {"config": DEMO_CONFIG, "overrides": overrides, "rounds": args.rounds, "threads": cfg.run.threads,
                    "cpus": os.cpu_count()}
        Path(args.json).write_text(json.dumps({"settings": settings, **summary, "walls_s": walls}, indent=1) + "\n")


if __name__ == "__main__":
    main()
