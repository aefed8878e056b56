"""What one start of the ranks costs: the imports of training's modules in one process alone,
against the same imports in N ranks under torch.distributed.run (each then opens a gloo group),
in interleaved rounds. Why: the demo from nothing cached used to start its ranks twice (warm
start, then training); it now starts them once (policy/start.py `ranks_warm_start`), and this
measures what that saves. Run it alone on the machine.

    .venv/bin/python benchmarks/rank_start.py --rounds 3 --json benchmarks/rank_start.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODULES = ("swarmrl.rl.loop", "swarmrl.policy.warmstart")  # what a training rank imports


def probe() -> None:
    """One process's part (alone, or a rank under torch.distributed.run): import, then join the
    group if there is one; write its seconds to $RANK_START_DIR/rankR.json."""
    t0 = time.perf_counter()
    import importlib
    for name in MODULES:
        importlib.import_module(name)
    imported = time.perf_counter() - t0
    out = {"rank": int(os.environ.get("RANK", "0")), "import_s": imported}
    if "WORLD_SIZE" in os.environ:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        dist.barrier()
        out["group_s"] = time.perf_counter() - t0 - imported
        dist.destroy_process_group()
    (Path(os.environ["RANK_START_DIR"]) / f"rank{out['rank']}.json").write_text(json.dumps(out))


def timed(argv: list[str]) -> tuple[float, list[dict]]:
    """Wall seconds of a command, and what each of its processes wrote (rank order)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "RANK_START_DIR": tmp}
        t0 = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        return wall, [json.loads(p.read_text()) for p in sorted(Path(tmp).glob("rank*.json"))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of (alone, ranks)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--json", default="", help="write the results here")
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.probe:
        probe()
        return 0
    me = [sys.executable, str(Path(__file__).resolve()), "--probe"]
    launched = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.ranks}", *me[1:]]
    alone, ranks = [], []
    for i in range(args.rounds):
        wall, rows = timed(me)
        alone.append({"wall_s": wall, "import_s": rows[0]["import_s"]})
        wall, rows = timed(launched)
        ranks.append({"wall_s": wall, "import_s": [r["import_s"] for r in rows], "group_s": [r["group_s"] for r in rows]})
        print(f"round {i + 1}: alone {alone[-1]['wall_s']:.2f} s (imports {alone[-1]['import_s']:.2f} s); "
              f"{args.ranks} ranks under torchrun {wall:.2f} s (imports "
              f"{', '.join(f'{s:.2f}' for s in ranks[-1]['import_s'])} s)", flush=True)
    result = {
        "modules": MODULES, "ranks": args.ranks, "alone": alone, "launched": ranks,
        "median_alone_import_s": statistics.median(r["import_s"] for r in alone),
        "median_rank_import_s": statistics.median(s for r in ranks for s in r["import_s"]),
        "median_launch_wall_s": statistics.median(r["wall_s"] for r in ranks),
        "cpus": os.cpu_count(),
    }
    print(f"median: one process imports in {result['median_alone_import_s']:.2f} s; a rank of {args.ranks} in "
          f"{result['median_rank_import_s']:.2f} s; a launch of {args.ranks} ranks takes {result['median_launch_wall_s']:.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
