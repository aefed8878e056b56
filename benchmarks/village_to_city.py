"""Village to city: a checkpoint trained with at most 9 agents, evaluated with teams up to 65.

Runs `swarmrl scale` on a run (or model) directory for team sizes 1, 8, 16, 32 and 64 on
problems that grow with the team (`--items`, default 64 items per problem), and records the
scaling table, its wall time and the process's peak resident memory.

    python benchmarks/village_to_city.py RUN [--items 64] [--problems 8] [--greedy] [--out benchmarks/village_to_city.json]
    python benchmarks/village_to_city.py MODEL_DIR --config rlcr_arith [...]   # a warm start: no run config

The model's context must hold a 64-item problem: the tiny model's 1,024 tokens do not, so the
script raises `model.max_context_tokens` for the evaluation (positions past the trained length
are extrapolated by the rotary embedding: part of what this measures).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from swarmrl.api import scale


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--team-sizes", default="1,8,16,32,64")
    ap.add_argument("--items", type=int, default=64)
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--time-limits", default="4,6,8,12,16,24,32")
    ap.add_argument("--context", type=int, default=4096, help="model.max_context_tokens for the evaluation")
    ap.add_argument("--turns", type=int, default=24, help="sampler.max_turns_per_agent for the evaluation")
    ap.add_argument("--greedy", action="store_true", help="decode the most likely token (swarmrl scale --greedy)")
    ap.add_argument("--out", default="benchmarks/village_to_city.json")
    ap.add_argument("--config", help="the config for a bare model directory (a warm start), e.g. rlcr_arith")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a further config override, e.g. workflow.manager_hires=8 (experts may hire: a hierarchy)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    res = scale(args.run, team_sizes=[int(x) for x in args.team_sizes.split(",")],
                time_limits_s=[float(x) for x in args.time_limits.split(",")], problems=args.problems,
                items=args.items, greedy=args.greedy, config=args.config, overrides=[f"model.max_context_tokens={args.context}",
                                             f"sampler.max_turns_per_agent={args.turns}"] + args.set)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    keys = ("score_mean", "useful_work", "team_size_mean", "team_hired_by_experts_per_rollout", "messages_per_rollout", "critical_steps",
            "idle_agents_per_rollout", "total_tokens_per_rollout")
    rows = [{"team_size": r["team_size"], "time_limit_s": r["time_limit_s"], **{k: r.get(k) for k in keys}}
            for r in res.rows]
    out = {"run": str(args.run), "config": args.config, "overrides": args.set, "items": args.items, "problems": args.problems,
           "greedy": args.greedy, "wall_s": wall,
           "peak_rss_mb": peak_mb, "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wall {wall:.0f} s, peak RSS {peak_mb:.0f} MB -> {args.out}")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
