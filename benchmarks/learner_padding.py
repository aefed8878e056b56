"""The learner's padding bound (`rl.max_pad_fraction`): update time against padding waste.

With `rl.length_buckets` the learner fills micro-batches in order of length, but a token budget
(`rl.micro_batch_tokens`) that holds the whole minibatch still pads every sequence to the
longest. `rl.max_pad_fraction` also closes a micro-batch when the next sequence would make more
than that share of its cells padding: less padded work, more (smaller) forward passes. This
script measures which wins, on the sequences of real steps:

1. the single-agent config of `benchmarks/vs_trl.py` (same model: the cached demo warm start)
   runs `--steps` RL steps; the sequences each step trained on are recorded;
2. for each bound, `Updater.update` runs on those sequences (lr 0, so every round sees the same
   weights), rounds interleaved across the bounds, `--rounds` times;
3. it reports the median update time per bound, its ratio to the unbounded (1.0) update, the
   padding share and the micro-batch count, and the loss of each (equal up to float order).

    .venv/bin/python benchmarks/learner_padding.py --json benchmarks/learner_padding.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def record_steps(cfg, policy, steps: int) -> list[list]:
    """The sequences the learner trained on in each of `steps` RL steps."""
    from swarmrl.rl.trainer import Trainer
    trainer = Trainer(cfg, policy)
    seen: list[list] = []
    real = trainer.updater.update
    trainer.updater.update = lambda seqs, *a, **kw: (seen.append(list(seqs)), real(seqs, *a, **kw))[1]
    try:
        for _ in range(steps):
            trainer.step()
    finally:
        trainer.parts.close()
    return seen


def time_bounds(cfg, policy, batches: list[list], bounds: list[float], rounds: int) -> dict:
    """Median update time (s), padding share, micro-batches and loss per bound, rounds interleaved."""
    from swarmrl.build import make_policy_set
    from swarmrl.rl.batch import micro_batches, pad_fraction
    from swarmrl.rl.losses import get_loss
    from swarmrl.rl.update import Updater
    out = {b: {"times": [], "loss": []} for b in bounds}
    for r in range(rounds):
        for b in (bounds if r % 2 == 0 else bounds[::-1]):
            rl = dataclasses.replace(cfg.rl, lr=0.0, max_pad_fraction=b)
            up = Updater(rl, make_policy_set(cfg, policy), get_loss(rl.loss), policy.pad_id, cfg.seed)
            t0 = time.perf_counter()
            losses = [up.update(seqs, k, measure_roles=False)["loss"] for k, seqs in enumerate(batches)]
            out[b]["times"].append(time.perf_counter() - t0)
            out[b]["loss"] = losses
    for b in bounds:
        micro = [micro_batches(s, cfg.rl.micro_batch_tokens, sort=True, max_pad=b) for s in batches]
        out[b].update(median_s=statistics.median(out[b]["times"]),
                      pad_fraction=statistics.mean(pad_fraction(m) for m in micro),
                      micro_batches=statistics.mean(len(m) for m in micro))
    base = out[1.0]["median_s"] if 1.0 in out else None
    for b in bounds:
        out[b]["ratio_to_unbounded"] = out[b]["median_s"] / base if base else None
    return out


def main() -> int:
    from swarmrl.policy.model import load_policy
    from swarmrl.policy.warmstart import warm_start
    from vs_trl import bench_config
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3, help="RL steps whose sequences are recorded")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds per bound (interleaved)")
    ap.add_argument("--bounds", default="1.0,0.5,0.25,0.1", help="rl.max_pad_fraction values")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = bench_config([])
    init = warm_start(cfg)  # the demo's cached warm start (trained first if missing)
    batches = record_steps(cfg, load_policy(init, cfg.model.dtype), args.steps)
    bounds = [float(x) for x in args.bounds.split(",")]
    res = time_bounds(cfg, load_policy(init, cfg.model.dtype), batches, bounds, args.rounds)
    for b, v in res.items():
        print(f"max_pad_fraction {b:<5g} update {v['median_s']:.3f} s (x{v['ratio_to_unbounded']:.2f}) "
              f"pad {v['pad_fraction']:.3f} micro-batches {v['micro_batches']:.1f} loss {v['loss']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "sequences_per_step": [len(b) for b in batches],
                                               "results": {str(b): v for b, v in res.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
