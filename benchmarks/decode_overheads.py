"""Three exact cuts in the decode loop, measured against the loop without them, interleaved.

  masks        : a decode step hands a transformers SDPA model its 4-D mask ready-made
                 (`kvcache.decode_mask`) instead of the [A, W] padding mask that transformers
                 turns into the same 4-D mask at every step;
  index_select : rows that finish leave the KV cache by `index_select` (a block copy per row)
                 instead of indexing with a tensor (the generic gather), in
                 `ReservedLayer.batch_select_indices` and `kvcache.row_columns`;
  one_copy     : admitted rows join the running batch's cache in one copy of every key and value
                 (`ReservedLayer.stacked`) instead of three (pad, concatenate, copy into the
                 reserved buffer).
Variants: `before` (none of them, the code as it was), `masks`, `all`. Each round runs one RL step's
rollouts (the same problems and sampling seed for every variant: `Trainer.step_rollouts`) once per
variant, in a rotating order, with the same weights. Reported: each variant's median wall time, the
per-round ratios to `before` (median and quartiles), and whether every variant sampled the same
tokens with the same log-probs (both cuts are exact: the same mask bits, the same copied values).

    .venv/bin/python benchmarks/decode_overheads.py [--rounds 12] [--init DIR] [--json F] [key=value ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from pathlib import Path

import torch

from swarmrl.cli import DEMO_CONFIG, resolve_config
from swarmrl.config import load_config
from swarmrl.policy import kvcache, sampler
from swarmrl.policy.model import load_policy
from swarmrl.policy.warmstart import warm_start
from swarmrl.rl.trainer import Trainer

VARIANTS = ("before", "masks", "all")
NEW = (kvcache.ReservedLayer.batch_select_indices, kvcache.row_columns, kvcache.prepared_decode_masks,
       kvcache.ReservedLayer.__dict__["stacked"])


def _gather_select(layer, indices):  # the loop before: indexing with a tensor
    layer._k, layer._v = layer._k[indices], layer._v[indices]
    layer._expose()


def _gather_columns(cache, row, cols):
    return [(layer.keys[row][:, cols], layer.values[row][:, cols]) for layer in cache.layers]


@classmethod
def _three_copies(cls, parts, reserve):
    width = max(k.shape[-2] for k, _ in parts)
    pad = lambda t: torch.nn.functional.pad(t, (0, 0, width - t.shape[-2], 0))  # noqa: E731
    keys, values = torch.cat([pad(k) for k, _ in parts]), torch.cat([pad(v) for _, v in parts])
    layer = cls()
    layer.lazy_initialization(keys, values)
    b, h, w, d = keys.shape
    layer._k, layer._v = keys.new_empty(b, h, w + reserve, d), values.new_empty(b, h, w + reserve, d)
    layer._k[..., :w, :], layer._v[..., :w, :] = keys, values
    layer._len = w
    layer._expose()
    return layer


def use(variant: str) -> None:
    """Patch the sampler to run `variant` (module attributes: nothing else changes)."""
    select, columns, masks, stacked = NEW
    kvcache.ReservedLayer.batch_select_indices = select if variant == "all" else _gather_select
    kvcache.ReservedLayer.stacked = stacked if variant == "all" else _three_copies
    sampler.row_columns = columns if variant == "all" else _gather_columns
    sampler.prepared_decode_masks = masks if variant != "before" else (lambda model: False)


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
    orders = list(itertools.permutations(VARIANTS))
    walls = {v: [] for v in VARIANTS}
    same = 0
    for i in range(args.rounds):
        step = cfg.rl.steps // 2 + i % 10  # mid-curriculum deadlines
        got = {}
        for v in orders[i % len(orders)]:
            use(v)
            t0 = time.perf_counter()
            rollouts, _ = trainer.backend.run(step, trainer.step_rollouts)
            walls[v].append(time.perf_counter() - t0)
            got[v] = sampled(rollouts)
        same += got["before"] == got["masks"] == got["all"]
        print(f"round {i}: " + ", ".join(f"{v} {walls[v][-1]:.3f}s" for v in VARIANTS), flush=True)
    use("all")
    trainer.close()
    ratios = {v: [a / b for a, b in zip(walls[v], walls["before"])] for v in VARIANTS[1:]}
    summary = {"median_wall_s": {v: statistics.median(w) for v, w in walls.items()},
               "median_ratio_to_before": {v: statistics.median(r) for v, r in ratios.items()},
               "quartiles_ratio_to_before": {v: statistics.quantiles(r, n=4)[::2] for v, r in ratios.items()},
               "rounds_with_the_same_samples": f"{same} of {args.rounds}"}
    print(json.dumps(summary, indent=1))
    if args.json:
        settings = {"config": DEMO_CONFIG, "overrides": overrides, "rounds": args.rounds, "threads": cfg.run.threads,
                    "cpus": os.cpu_count()}
        Path(args.json).write_text(json.dumps({"settings": settings, **summary, "walls_s": walls}, indent=1) + "\n")


if __name__ == "__main__":
    main()
