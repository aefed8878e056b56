"""The warm start on one process (2 threads) against two single-threaded ranks, interleaved.

The ranks share each batch's micro-batches and add the gradients in one process's order
(policy/warmstart.py `ranked_backward`), so they end with the weights of one process at their own
thread count (one each; tests/distributed/test_launch.py checks that bit for bit). Against 2
threads that holds where 1 and 2 threads round alike: each pair compares the weights tensor by
tensor (`torch.equal`) and reports the largest difference (0 on the first two CPUs measured,
3.6e-7 on an Intel Xeon with AVX-512 and AMX, whose warm starts therefore take separate cache
entries: `warmstart.threads`). The time is
the supervised loop's own clock over the first `--batches` batches of the demo's
demonstrations (process start-up and the demonstrations are not in it: the demo's wall time
shows those). Run it alone on the machine.

    .venv/bin/python benchmarks/warmstart_ranks.py --batches 80 --pairs 3 --json benchmarks/warmstart_ranks.json

`--one-threads 1` gives the one process a single thread, as each rank has: the pair the ranks must
equal bit for bit on any CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch


def side(args) -> None:
    """One side's run (`--side one` in this process, `--side ranks` under torch.distributed.run)."""
    from swarmrl.api import config_of
    from swarmrl.distributed.sharding import ShardedLearner
    from swarmrl.policy.model import build_tiny_policy
    from swarmrl.policy.warmstart import demonstrations, supervised
    from swarmrl.scenarios import make_scenario
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cfg = config_of(args.config)
    torch.set_num_threads(cfg.run.threads // world if world > 1 else args.one_threads or cfg.run.threads)
    learner = ShardedLearner("ddp", "gloo", int(os.environ["RANK"]), world) if world > 1 else None
    policy = build_tiny_policy(cfg.model, seed=cfg.warmstart.seed)
    n = make_scenario(cfg).demo_count(cfg.warmstart.demos_per_strategy)
    seqs, _ = demonstrations(cfg, policy, n, cfg.warmstart.seed)
    seqs = seqs[:args.batches * cfg.warmstart.batch_sequences]
    t0 = time.perf_counter()
    losses = supervised(policy, seqs, 1, cfg.warmstart.lr, cfg.warmstart.batch_sequences, cfg.rl.micro_batch_tokens,
                        cfg.warmstart.seed, log=lambda *a: None, max_pad=cfg.rl.max_pad_fraction, learner=learner)
    seconds = time.perf_counter() - t0
    if learner is None or learner.rank == 0:
        torch.save(policy.model.state_dict(), args.out / f"{args.side}.pt")
        (args.out / f"{args.side}.json").write_text(json.dumps({"seconds": seconds, "losses": losses}))
    if learner is not None:
        learner.close()


def run_side(args, name: str, out: Path) -> dict:
    me = [str(Path(__file__).resolve()), "--side", name, "--batches", str(args.batches), "--config", args.config,
          "--out", str(out), "--one-threads", str(args.one_threads)]
    cmd = ([sys.executable, *me] if name == "one" else
           [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *me])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / f"{name}.json").read_text())


def pair(args, i: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="warmstart-ranks-") as tmp:
        out = Path(tmp)
        order = ["one", "ranks"] if i % 2 == 0 else ["ranks", "one"]
        got = {name: run_side(args, name, out) for name in order}
        a, b = (torch.load(out / f"{name}.pt") for name in ("one", "ranks"))
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    return {"order": order, "one_s": got["one"]["seconds"], "ranks_s": got["ranks"]["seconds"],
            "ratio": got["ranks"]["seconds"] / got["one"]["seconds"],
            "weights_equal": all(torch.equal(a[k], b[k]) for k in a), "max_abs_diff": diff,
            "losses_equal": got["one"]["losses"] == got["ranks"]["losses"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="rlcr_arith")
    ap.add_argument("--batches", type=int, default=80, help="batches of the first pass to train (the demo trains 816)")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--one-threads", type=int, default=0,
                    help="threads of the one process (default 0: the config's run.threads, 2 in the demo's)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--side", choices=["one", "ranks"], help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side:
        side(args)
        return 0
    pairs = []
    for i in range(args.pairs):
        pairs.append(pair(args, i))
        p = pairs[-1]
        print(f"pair {i + 1}: one process {p['one_s']:.1f} s, two ranks {p['ranks_s']:.1f} s ({p['ratio']:.2f}x); "
              f"weights equal: {p['weights_equal']} (max |diff| {p['max_abs_diff']:.1e}), "
              f"losses equal: {p['losses_equal']}", flush=True)
    ratios = sorted(p["ratio"] for p in pairs)
    summary = {"config": args.config, "batches": args.batches, "cpus": os.cpu_count(), "one_threads": args.one_threads,
               "median_ratio": ratios[len(ratios) // 2], "all_weights_equal": all(p["weights_equal"] for p in pairs),
               "pairs": pairs, "command": " ".join(["benchmarks/warmstart_ranks.py", *(argv or sys.argv[1:])])}
    print(f"median two ranks / one process: {summary['median_ratio']:.2f}x; "
          f"weights equal in every pair: {summary['all_weights_equal']}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
