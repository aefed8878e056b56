"""Shared prompts in the sampler (sampler.share_prompts): rollout wall time on and off, interleaved.

One RL step's rollouts of the demo config (4 problems x 8 rollouts, final deadline, the cached
warm start), run by the collective runtime with `share_prompts` on and off in alternating order,
`--rounds` times each, every round on new problems. Reported per round and as medians: wall
time, prompt tokens the sampler ran (prefill), tokens served from the pool, and whether both
runs sampled the same tokens (sharing changes logits only by float rounding; a near-tie can
still flip a sampled token, after which the rollouts differ).

    .venv/bin/python benchmarks/prompt_sharing.py [--rounds 5] [--json benchmarks/prompt_sharing.json] [key=value ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from swarmrl.build import make_runtime, max_experts_for
from swarmrl.cli import DEMO_CONFIG, resolve_config
from swarmrl.config import load_config
from swarmrl.policy import sampler as sampler_module
from swarmrl.policy.actor import LLMActor
from swarmrl.policy.model import load_policy
from swarmrl.policy.warmstart import warm_start


def run(cfg, policy, seed: int, share: bool) -> dict:
    runtime, task = make_runtime(cfg, policy.tokenizer)
    problems = task.sample(np.random.default_rng([cfg.seed, seed]), cfg.rl.problems_per_step)
    rollouts = [runtime.new_rollout(g * cfg.rl.rollouts_per_problem + j, g, p, cfg.time_limit.end, max_experts_for(cfg))
                for g, p in enumerate(problems) for j in range(cfg.rl.rollouts_per_problem)]
    actor = LLMActor.from_config(cfg.sampler, policy)
    actor.share_prompts = share
    ran, pools = [0], []
    prefill, open_stream = sampler_module.DecodeStream._prefill_part, actor.open_stream

    def counting_prefill(stream, part):
        ran[0] += sum(len(x) for _, x, _ in part)
        return prefill(stream, part)

    def keeping_stream():
        s = open_stream()
        pools.append(s.stream)
        return s

    actor.open_stream = keeping_stream
    sampler_module.DecodeStream._prefill_part = counting_prefill
    try:
        t0 = time.perf_counter()
        runtime.run(rollouts, actor, seed=seed)
        wall = time.perf_counter() - t0
    finally:
        sampler_module.DecodeStream._prefill_part = prefill
    pool = pools[0].pool if pools else None
    return {"wall_s": wall, "prefill_tokens": ran[0], "pooled_tokens": pool.shared_tokens if pool else 0,
            "pool_hits": pool.hits if pool else 0, "generated_tokens": actor.generated_tokens,
            "peak_kv_mib": pools[0].peak_cached_bytes / 2**20 if pools else 0.0,
            "tokens": [[t.generated_tokens for t in r.turns] for r in rollouts],
            "score_mean": float(np.mean([r.score for r in rollouts]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--init", help="model directory (default: the cached warm start of the demo config)")
    ap.add_argument("--json")
    args, overrides = ap.parse_known_args()
    cfg = load_config(resolve_config(DEMO_CONFIG), overrides)
    torch.set_num_threads(cfg.run.threads)
    policy = load_policy(args.init or warm_start(cfg), cfg.model.dtype)
    run(cfg, policy, 999, True)  # warm-up: first calls allocate and pick kernels
    rounds = []
    for i in range(args.rounds):
        order = [True, False] if i % 2 == 0 else [False, True]
        res = {("on" if s else "off"): run(cfg, policy, 1000 + i, s) for s in order}
        on, off = res["on"], res["off"]
        same = on.pop("tokens") == off.pop("tokens")
        rounds.append({"on": on, "off": off, "same_tokens": same, "ratio_wall": on["wall_s"] / off["wall_s"]})
        print(f"round {i}: on {on['wall_s']:.2f}s ({on['prefill_tokens']} prefill tokens, {on['pooled_tokens']} "
              f"from the pool), off {off['wall_s']:.2f}s ({off['prefill_tokens']}); ratio "
              f"{rounds[-1]['ratio_wall']:.3f}; same tokens: {same}", flush=True)
    med = lambda side, k: statistics.median(r[side][k] for r in rounds)  # noqa: E731
    summary = {"median_ratio_wall": statistics.median(r["ratio_wall"] for r in rounds),
               "median_wall_s": {s: med(s, "wall_s") for s in ("on", "off")},
               "median_prefill_tokens": {s: med(s, "prefill_tokens") for s in ("on", "off")},
               "median_peak_kv_mib": {s: med(s, "peak_kv_mib") for s in ("on", "off")},
               "rounds_with_same_tokens": sum(r["same_tokens"] for r in rounds)}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": {"config": DEMO_CONFIG, "overrides": overrides,
                                                            "rounds": args.rounds, "threads": cfg.run.threads,
                                                            "cpus": os.cpu_count()},
                                               **summary, "rounds": rounds}, indent=1) + "\n")


if __name__ == "__main__":
    main()
