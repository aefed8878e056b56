"""The sampler's optional paths against the plain ones, interleaved, on one RL step's rollouts.

  --path fast_decode       FastDecode (policy/fast_decode.py): decode steps without transformers'
                           module machinery, against `model(...)`. Bitwise the same: every round
                           must sample the same tokens with the same log-probs.
  --path batched_adapters  AdapterBatch (policy/lora_batch.py): an isolated policy's mixed adapters
                           in one pass (and so, inside it, FastDecode's decode steps),
                           against PEFT's loop over the adapters (through `model(...)`). The same up
                           to float rounding: a sampled token may flip where two are nearly tied.

Variants `off` and `on`. Each round runs one RL step's rollouts (the same problems and sampling
seed for both: `Trainer.step_rollouts`) once per variant, in alternating order, with the same
weights. Reported: each variant's median wall time, the per-round ratios on / off (median and
quartiles), and in how many rounds both sampled the same tokens with the same log-probs.

    .venv/bin/python benchmarks/sampler_paths.py --path fast_decode [--rounds 12] [--init DIR] [--json F] [key=value ...]
    .venv/bin/python benchmarks/sampler_paths.py --path batched_adapters --config workflows_arith policy.sharing=isolated

key=value overrides go to the config (default: the demo's), e.g. the single agent of
benchmarks/vs_trl.py: `workflow.name=single rl.smaller_caps_fraction=0`.
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
from swarmrl.policy import fast_decode, lora_batch
from swarmrl.policy.model import load_policy
from swarmrl.policy.warmstart import warm_start
from swarmrl.rl.trainer import Trainer

VARIANTS = ("off", "on")
PATHS = {"fast_decode": fast_decode.FastDecode, "batched_adapters": lora_batch.AdapterBatch}
FOR_MODEL = {name: cls.__dict__["for_model"] for name, cls in PATHS.items()}


def use(path: str, variant: str) -> None:
    """Switch one path of the sampler (its class's `for_model`: nothing else changes)."""
    PATHS[path].for_model = FOR_MODEL[path] if variant == "on" else classmethod(lambda cls, model: None)


def sampled(rollouts) -> list:
    """Every agent's tokens and behaviour log-probs, rollout by rollout."""
    return [[(name, a.ids, a.logprobs) for name, a in r.agents.items()] for r in rollouts]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", choices=list(PATHS), required=True)
    ap.add_argument("--config", default=DEMO_CONFIG)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--init", help="model directory (default: the config's warm start, trained if not cached)")
    ap.add_argument("--json")
    args, overrides = ap.parse_known_args()
    cfg = load_config(resolve_config(args.config), ["learner.processes=1", *overrides])
    torch.set_num_threads(cfg.run.threads)
    trainer = Trainer(cfg, load_policy(args.init or warm_start(cfg), cfg.model.dtype))
    walls = {v: [] for v in VARIANTS}
    same = 0
    for i in range(args.rounds):
        step = cfg.rl.steps // 2 + i % 10  # mid-curriculum deadlines
        got = {}
        for v in VARIANTS if i % 2 == 0 else VARIANTS[::-1]:
            use(args.path, v)
            t0 = time.perf_counter()
            rollouts, _ = trainer.backend.run(step, trainer.step_rollouts)
            walls[v].append(time.perf_counter() - t0)
            got[v] = sampled(rollouts)
        same += got["off"] == got["on"]
        print(f"round {i}: " + ", ".join(f"{v} {walls[v][-1]:.3f}s" for v in VARIANTS), flush=True)
    use(args.path, "on")
    trainer.close()
    ratios = [a / b for a, b in zip(walls["on"], walls["off"])]
    summary = {"median_wall_s": {v: statistics.median(w) for v, w in walls.items()},
               "median_ratio_on_to_off": statistics.median(ratios),
               "quartiles_ratio": statistics.quantiles(ratios, n=4)[::2],
               "rounds_with_the_same_samples": f"{same} of {args.rounds}",
               "fast_decode_verdicts": {str(k[1:-1]): v for k, v in fast_decode._VERDICTS.items()}}
    print(json.dumps(summary, indent=1))
    if args.json:
        settings = {"path": args.path, "config": args.config, "overrides": overrides, "rounds": args.rounds, "threads": cfg.run.threads,
                    "cpus": os.cpu_count()}
        Path(args.json).write_text(json.dumps({"settings": settings, **summary, "walls_s": walls}, indent=1) + "\n")


if __name__ == "__main__":
    main()
