"""Where one RL step's rollouts spend their time: the model's operators, and everything else.

Runs the demo config's rollouts for a few steps (`Trainer.step_rollouts`, one process, the run's
threads) under `torch.profiler`, after one unprofiled warm-up step, and reports:

- the wall time of the steps, and the share of it spent inside the model's forward calls
  (decode and prefill) against the rest (sampling, the org runtime, the bus, scoring, Python);
- the operators with the most self time over the profiled steps, each as a share of all the
  operators' time (most of it runs inside the model's calls: the attention kernel, the
  matmuls, the copies of the KV cache, the elementwise tail);
- the number of forward calls and their mean time.

    .venv/bin/python benchmarks/rollout_profile.py [--steps 3] [--init DIR] [--config NAME] [--top 12] [--json F] [key=value ...]

The profiler adds its own cost per operator (a few microseconds), which inflates the many small
ones; read the shares, not the absolute times, and the wall-time split from the unprofiled
`--steps` run that precedes the profiled one.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from swarmrl.cli import DEMO_CONFIG, resolve_config
from swarmrl.config import load_config
from swarmrl.policy.model import load_policy
from swarmrl.policy.warmstart import warm_start
from swarmrl.rl.trainer import Trainer


class ForwardTimer:
    """Times every forward call of a model through hooks, which leave its type and signature
    as they are (the sampler reads both to choose its decode path)."""

    def __init__(self, model: torch.nn.Module):
        self.calls, self.seconds, self._t0 = 0, 0.0, 0.0
        model.register_forward_pre_hook(self._start)
        model.register_forward_hook(self._stop)

    def _start(self, module, args) -> None:
        self._t0 = time.perf_counter()

    def _stop(self, module, args, out) -> None:
        self.seconds += time.perf_counter() - self._t0
        self.calls += 1


def run_steps(trainer: Trainer, first: int, steps: int) -> float:
    t0 = time.perf_counter()
    for i in range(steps):
        trainer.backend.run(first + i, trainer.step_rollouts)
    return time.perf_counter() - t0


def operator_shares(prof, top: int) -> list[dict]:
    """The `top` operators by self CPU time (aten ops only), as shares of all aten self time."""
    ops = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    total = sum(e.self_cpu_time_total for e in ops) or 1.0
    ops.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return [{"op": e.key, "share": e.self_cpu_time_total / total, "calls": e.count} for e in ops[:top]]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=3, help="RL steps' rollouts per measurement")
    ap.add_argument("--init", help="model directory (default: the cached warm start of --config)")
    ap.add_argument("--config", default=DEMO_CONFIG, help="a preset name or YAML path (default: the demo's)")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--json")
    args, overrides = ap.parse_known_args(argv)
    cfg = load_config(resolve_config(args.config), ["learner.processes=1", *overrides])
    torch.set_num_threads(cfg.run.threads)
    policy = load_policy(args.init or warm_start(cfg), cfg.model.dtype)
    timed = ForwardTimer(policy.model)
    trainer = Trainer(cfg, policy)
    first = cfg.rl.steps // 2  # mid-curriculum deadlines
    run_steps(trainer, first, 1)  # warm-up: allocator, kernels, caches
    timed.calls, timed.seconds = 0, 0.0
    wall = run_steps(trainer, first + 1, args.steps)
    calls, in_model = timed.calls, timed.seconds
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run_steps(trainer, first + 1, args.steps)
    trainer.close()
    summary = {"wall_s": wall, "model_forward_s": in_model, "model_share_of_wall": in_model / wall,
               "forward_calls": calls, "mean_forward_ms": 1e3 * in_model / max(calls, 1),
               "operators": operator_shares(prof, args.top)}
    print(f"{args.steps} steps' rollouts: {wall:.2f} s wall, {in_model:.2f} s ({in_model / wall:.0%}) in "
          f"{calls} model calls ({summary['mean_forward_ms']:.2f} ms each)")
    for o in summary["operators"]:
        print(f"  {o['share']:6.1%}  {o['op']}  ({o['calls']} calls)")
    if args.json:
        settings = {"config": args.config, "overrides": overrides, "steps": args.steps, "threads": cfg.run.threads,
                    "cpus": os.cpu_count(), "init": args.init or "the config's warm start"}
        Path(args.json).write_text(json.dumps({"settings": settings, **summary}, indent=1) + "\n")
    return summary


if __name__ == "__main__":
    main()
