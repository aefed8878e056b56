"""The workflow study's operating point: a task difficulty where the warm start scores 0.3-0.6.

`benchmarks/workflow_sweep/` once ran where no cell could move (base 0.984 at h128, the ceiling;
0.062 at h64, the floor). This probe warm-starts `workflows_arith` (h128, the study's warm
start: demonstrations of every workflow and a solo agent) at each `task.max_step` (operands
1..max_step: the arithmetic the model must learn) and evaluates that one base model, greedy,
under every workflow on `--problems` held-out problems. The study's point is the easiest
difficulty at which every workflow's base lands in [0.3, 0.6]; the learning-rate sweep at it is
`swarmrl sweep configs/sweeps/workflow_lr.yaml`, the grid `configs/sweeps/workflow_grid.yaml`.

    .venv/bin/python benchmarks/operating_point.py --json benchmarks/operating_point.json

Every number in the JSON comes from the warm starts and evaluations it runs (warm starts are
cached in the swarmrl cache, about 75 s each on 2 cores when not).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

CONFIG = "workflows_arith.yaml"
WORKFLOWS = ("single", "voting", "eval_opt", "orch_workers")
COMMON = ["model.hidden_size=128", "run.progress=false", "run.checkpoint_every=0"]


def probe(max_step: int, problems: int) -> dict:
    """Warm-start at this difficulty; -> each workflow's greedy validation accuracy."""
    from swarmrl.config import load_config, resolve_config
    from swarmrl.policy.model import load_policy
    from swarmrl.policy.warmstart import warm_start
    from swarmrl.rl.evaluate import evaluate
    t0 = time.perf_counter()
    ov = COMMON + [f"task.max_step={max_step}"]
    init = warm_start(load_config(resolve_config(CONFIG), ov), log=lambda *a, **k: None)
    acc = {wf: evaluate(load_config(resolve_config(CONFIG), ov + [f"workflow.name={wf}"]), load_policy(init),
                        problems=problems, greedy=True)["score_mean"] for wf in WORKFLOWS}
    return {"max_step": max_step, "base_val_acc": acc, "seconds": time.perf_counter() - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-steps", default="3,4,5,6", help="difficulties to probe, comma-separated")
    ap.add_argument("--problems", type=int, default=32, help="held-out problems per evaluation")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    torch.set_num_threads(2)
    result: dict = {"settings": vars(args), "config": CONFIG, "common": COMMON, "probe": []}
    for ms in (int(x) for x in args.max_steps.split(",")):
        row = probe(ms, args.problems)
        result["probe"].append(row)
        inside = all(0.3 <= a <= 0.6 for a in row["base_val_acc"].values())
        if inside and "operating_point" not in result:
            result["operating_point"] = f"task.max_step={ms}"
        print(f"max_step {ms}: " + ", ".join(f"{w} {a:.3f}" for w, a in row["base_val_acc"].items())
              + f"{'  <- every workflow in [0.3, 0.6]' if inside else ''} ({row['seconds']:.0f} s)", flush=True)
        if args.json:  # an interrupted probe keeps what it measured
            Path(args.json).write_text(json.dumps(result, indent=1))
    print(f"operating point: {result.get('operating_point', 'none in range')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
