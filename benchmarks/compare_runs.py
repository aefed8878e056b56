"""Compare two runs' metrics.jsonl value by value, leaving out wall-clock keys.

Used to check that a refactor leaves training unchanged: train the same config from the same
initial model on the same machine and thread count, before and after, then

    python benchmarks/compare_runs.py RUN_BEFORE RUN_AFTER

Exit 0 when every non-wall-clock value is identical (exact equality: same machine, same
threads), 1 otherwise, listing the first differences. Where the runs' `environment.jsonl`
records differ in what changes floats (library versions, CPU, GPUs, threads, processes), it says
so first: runs on two machines are two draws, not copies (README "Guarantees").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from swarmrl.runs.environment import differences
from swarmrl.runs.rundir import RunDir, wall_clock


def load(run: str) -> list[dict]:
    return [json.loads(line) for line in (Path(run) / "metrics.jsonl").read_text().splitlines() if line.strip()]


def compare(a: list[dict], b: list[dict]) -> tuple[int, list[tuple]]:
    """(values compared, differences as (step, key, before, after))."""
    compared, diffs = 0, []
    if len(a) != len(b):
        diffs.append(("-", "steps", len(a), len(b)))
    for x, y in zip(a, b):
        for k in sorted(set(x) | set(y)):
            if wall_clock(k):
                continue
            compared += 1
            if x.get(k) != y.get(k):
                diffs.append((x.get("step"), k, x.get(k), y.get(k)))
    return compared, diffs


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    envs = [RunDir(Path(r)).read_environment() for r in sys.argv[1:]]
    if all(envs) and (apart := differences(envs[0][0], envs[1][0])):
        print(f"the runs started on other machines or builds ({', '.join(apart)} differ): "
              "expect float-level differences that compound, not equality")
    compared, diffs = compare(load(sys.argv[1]), load(sys.argv[2]))
    print(f"compared {compared} values; {len(diffs)} differ")
    for d in diffs[:20]:
        print("  step {}: {} {!r} -> {!r}".format(*d))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
