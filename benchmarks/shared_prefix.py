"""Shared prompt prefixes in the learner (`rl.share_prefixes`): update time with and without.

Every agent of a demo rollout reads the problem first, and a step's 8 rollouts of a problem
read the same one, so most of the tokens the learner runs are repeated prompt prefixes. This
script measures what running each shared prefix once saves, on the sequences of real steps:

1. the demo config (`rlcr_arith`, its cached warm start) runs `--steps` RL steps; the
   sequences each step trained on are recorded;
2. `Updater.update` runs on them with `rl.share_prefixes` off and on (lr 0, so every round sees
   the same weights; the demo's KL term, so the reference forward is timed too), rounds
   interleaved, `--rounds` times;
3. it reports the median update time of each, their ratio, the cells each computed, and the
   largest gap between their losses (equal up to float rounding).

    .venv/bin/python benchmarks/shared_prefix.py --json benchmarks/shared_prefix.json
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


def time_sharing(cfg, policy, batches: list[list], rounds: int) -> dict:
    """Median update time (s), cells per step and losses with sharing off / on, rounds interleaved."""
    from swarmrl.build import make_policy_set
    from swarmrl.rl.losses import get_loss
    from swarmrl.rl.update import Updater
    out = {s: {"times": [], "loss": [], "pad_fraction": []} for s in (False, True)}
    for r in range(rounds):
        for share in ((False, True) if r % 2 == 0 else (True, False)):
            rl = dataclasses.replace(cfg.rl, lr=0.0, share_prefixes=share)
            up = Updater(rl, make_policy_set(cfg, policy), get_loss(rl.loss), policy.pad_id, cfg.seed)
            t0 = time.perf_counter()
            metrics = [up.update(seqs, k, measure_roles=False) for k, seqs in enumerate(batches)]
            out[share]["times"].append(time.perf_counter() - t0)
            out[share]["loss"] = [m["loss"] for m in metrics]
            out[share]["pad_fraction"] = [m.get("learner/pad_fraction", 0.0) for m in metrics]
    for share in (False, True):
        out[share]["median_s"] = statistics.median(out[share]["times"])
    out["ratio_on_to_off"] = out[True]["median_s"] / out[False]["median_s"]
    out["max_loss_gap"] = max(abs(a - b) for a, b in zip(out[True]["loss"], out[False]["loss"]))
    return out


def cells(batches: list[list]) -> dict:
    """Tokens per step the learner runs: whole sequences, and with each shared prefix once."""
    from swarmrl.rl.prefix import prefix_lengths
    whole, shared = [], []
    for seqs in batches:
        cut = prefix_lengths(seqs)
        whole.append(sum(len(s.ids) for s in seqs))
        prefixes = {tuple(s.ids[:c]) for s, c in zip(seqs, cut) if c}
        shared.append(sum(len(s.ids) - c for s, c in zip(seqs, cut)) + sum(len(p) for p in prefixes))
    return {"tokens_per_step": statistics.mean(whole), "shared_tokens_per_step": statistics.mean(shared),
            "token_ratio": statistics.mean(shared) / statistics.mean(whole)}


def main() -> int:
    from learner_padding import record_steps
    from swarmrl.api import config_of
    from swarmrl.policy.model import load_policy
    from swarmrl.policy.warmstart import warm_start
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3, help="RL steps whose sequences are recorded")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds per setting (interleaved)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = config_of("rlcr_arith", ["eval.val_interval=0", "rl.role_grad_interval=0", "run.mfu=false"])
    init = warm_start(cfg)  # the demo's cached warm start (trained first if missing)
    batches = record_steps(cfg, load_policy(init, cfg.model.dtype), args.steps)
    res = time_sharing(cfg, load_policy(init, cfg.model.dtype), batches, args.rounds)
    tok = cells(batches)
    print(f"tokens per step: whole sequences {tok['tokens_per_step']:.0f}, shared prefixes once "
          f"{tok['shared_tokens_per_step']:.0f} (x{tok['token_ratio']:.2f})")
    print(f"update ({args.steps} steps): off {res[False]['median_s']:.2f} s, on {res[True]['median_s']:.2f} s "
          f"(x{res['ratio_on_to_off']:.2f}); largest loss gap {res['max_loss_gap']:.2e}")
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "sequences_per_step": [len(b) for b in batches],
                                               **tok, "results": {str(k): v for k, v in res.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
