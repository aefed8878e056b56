"""Draft tokens (sampler.draft_tokens, policy/speculative.py): one RL step's rollouts with and without.

Each arm samples the demo config's rollouts (or the overrides') through its own actor, all arms
on the same model, arms interleaved within each repeat (the order rotating), after one untimed
warm-up step per arm; each step's draft tables start from the arm's previous step's turns, as in
training (rl/trainer.py). Per arm and repeat:
wall time of the rollouts, decode calls, generated tokens, draft tokens fed and kept, and whether
every rollout's replies equal the first arm's (draft tokens change the calls, not the tokens, up
to float rounding). The summary: per arm the median wall and its median ratio to the first arm.

    .venv/bin/python benchmarks/draft_tokens.py [--init DIR] [--ks 0,1,2,4] [--repeats 5]
        [--threads 1] [--json F] [key=value ...]

`workflow.name=single rl.smaller_caps_fraction=0 rl.problems_per_step=2` is one rank's share of
benchmarks/vs_trl.py's swarmrl side (16 rows).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from swarmrl.build import make_runtime, max_experts_for
from swarmrl.cli import DEMO_CONFIG, resolve_config
from swarmrl.config import load_config
from swarmrl.policy.actor import LLMActor
from swarmrl.policy.model import load_policy
from swarmrl.policy.sharing import make_policy_set
from swarmrl.policy.speculative import draft_corpus
from swarmrl.policy.warmstart import warm_start


class Arm:
    """One setting of sampler.draft_tokens: its config, actor (own sampler and draft table) and counts."""

    def __init__(self, k: int, policy, overrides: list[str]):
        self.k = k
        self.cfg = load_config(resolve_config(DEMO_CONFIG), overrides + [f"sampler.draft_tokens={k}"])
        policies = make_policy_set(policy, "shared", ["any"], temperature=self.cfg.sampler.temperature)
        self.actor = LLMActor.from_config(self.cfg.sampler, policies)
        self.streams: list = []
        open_stream = self.actor.open_stream
        self.actor.open_stream = lambda: self._counted(open_stream())

    def _counted(self, stream):
        self.streams.append(stream.stream)
        step, inner = stream.step, stream.stream
        inner.calls = 0

        def counting_step():
            inner.calls += bool(inner.rows) or bool(inner.queue)
            return step()

        stream.step = counting_step
        return stream

    def run(self, policy, seed: int) -> tuple[dict, list]:
        cfg = self.cfg
        runtime, task = make_runtime(cfg, policy.tokenizer)
        problems = task.sample(np.random.default_rng([cfg.seed, seed]), cfg.rl.problems_per_step)
        rollouts = [runtime.new_rollout(g * cfg.rl.rollouts_per_problem + j, g, p, cfg.time_limit.end,
                                        max_experts_for(cfg))
                    for g, p in enumerate(problems) for j in range(cfg.rl.rollouts_per_problem)]
        self.streams.clear()
        tokens0 = self.actor.generated_tokens
        t0 = time.perf_counter()
        runtime.run(rollouts, self.actor, seed=seed)
        wall = time.perf_counter() - t0
        if self.k:  # the next step's tables start from this step's turns, as in training (rl/trainer.py)
            self.actor.draft_corpus = draft_corpus(rollouts)
        s = self.streams
        row = {"wall_s": wall, "generated_tokens": self.actor.generated_tokens - tokens0,
               "decode_calls": sum(x.calls for x in s), "drafted": sum(x.drafted for x in s),
               "accepted": sum(x.accepted for x in s)}
        row["tokens_per_call"] = row["generated_tokens"] / max(1, row["decode_calls"])
        return row, [[t.reply for t in r.turns] for r in rollouts]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", help="policy dir (default: the config's cached warm start, trained if missing)")
    ap.add_argument("--ks", default="0,1,2,4", help="sampler.draft_tokens per arm; the first is the reference")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="write results here")
    args, overrides = ap.parse_known_args()
    torch.set_num_threads(args.threads)
    ks = [int(k) for k in args.ks.split(",")]
    cfg = load_config(resolve_config(DEMO_CONFIG), overrides)
    policy = load_policy(args.init or warm_start(cfg))
    arms = [Arm(k, policy, overrides) for k in ks]
    for arm in arms:  # warm-up: compiled kernels, and a draft table as after one training step
        arm.run(policy, seed=10_000)
    rows: dict[int, list] = {k: [] for k in ks}
    for rep in range(args.repeats):
        replies = {}
        for i in range(len(arms)):
            arm = arms[(rep + i) % len(arms)]
            row, replies[arm.k] = arm.run(policy, seed=rep)
            rows[arm.k].append(row)
        for k in ks:
            rows[k][-1]["same_replies"] = sum(a == b for a, b in zip(replies[k], replies[ks[0]]))
            rows[k][-1]["rollouts"] = len(replies[k])
        print(f"repeat {rep}: " + " | ".join(
            f"k={k} {rows[k][-1]['wall_s']:.2f} s, {rows[k][-1]['decode_calls']} calls, "
            f"{rows[k][-1]['tokens_per_call']:.1f} tok/call, same {rows[k][-1]['same_replies']}/{len(replies[k])}"
            for k in ks), flush=True)
    summary = {}
    for k in ks:
        ratios = [r["wall_s"] / r0["wall_s"] for r, r0 in zip(rows[k], rows[ks[0]])]
        acc = sum(r["accepted"] for r in rows[k]) / max(1, sum(r["drafted"] for r in rows[k]))
        summary[k] = {"median_wall_s": statistics.median(r["wall_s"] for r in rows[k]),
                      "median_ratio_to_first": statistics.median(ratios),
                      "median_decode_calls": statistics.median(r["decode_calls"] for r in rows[k]),
                      "median_tokens_per_call": statistics.median(r["tokens_per_call"] for r in rows[k]),
                      "accepted_fraction_of_drafted": acc,
                      "rollouts_with_same_replies": f"{sum(r['same_replies'] for r in rows[k])}/"
                                                    f"{sum(r['rollouts'] for r in rows[k])}"}
        print(f"k={k}: median wall {summary[k]['median_wall_s']:.3f} s, ratio {summary[k]['median_ratio_to_first']:.3f}, "
              f"calls {summary[k]['median_decode_calls']}, tokens/call {summary[k]['median_tokens_per_call']:.2f}, "
              f"kept {acc:.0%} of drafts, same replies {summary[k]['rollouts_with_same_replies']}")
    if args.json:
        settings = {"ks": ks, "repeats": args.repeats, "threads": args.threads, "overrides": overrides,
                    "model": args.init or "the config's warm start", "torch": torch.__version__}
        Path(args.json).write_text(json.dumps({"settings": settings, "summary": summary, "repeats": rows}, indent=2))


if __name__ == "__main__":
    main()
