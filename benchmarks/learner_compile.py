"""The learner's forward and backward eager against `torch.compile` (inductor), at its micro-batch shapes.

Would compiling the model speed the update, which the demo spends more time in than in rollouts?
A random tiny Qwen3 of the demo's size (or `--init`), one thread (a rank of the demo's learner),
right-padded micro-batches of the shapes the update runs (`--shapes`, rows x tokens). For each
shape: one compiled copy (`torch.compile(model, dynamic=False)`: every shape compiles once,
timed apart; with `--dynamic`, one copy compiled with symbolic shapes serves them all, as the
update's ever-changing lengths would need), then `--rounds` rounds that time `--reps` forward+backward passes of the update's
loss (`rl/batch.py` `token_logprobs`, a masked token mean) each way, eager and compiled
alternating. Reported per shape: the median ratio compiled / eager, the compile seconds, and
the largest difference of the two ways' log-probs (compiled kernels fuse and reorder float
operations, so equality is not expected).

    .venv/bin/python benchmarks/learner_compile.py [--shapes 8x400,16x150,4x700] [--rounds 5] [--dynamic] [--json F]

Inductor caches compiled graphs on disk (under the system's temp directory), so a second run
compiles faster than the first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from swarmrl.config import ModelConfig
from swarmrl.policy.model import build_tiny_policy, load_policy
from swarmrl.rl.batch import token_logprobs
from swarmrl.runs.environment import cpu_model


def batch(vocab: int, rows: int, tokens: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids [rows, tokens] and an attention mask with the rows right-padded to lengths
    between half and all of `tokens`, as length buckets leave them."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (rows, tokens), generator=g)
    lengths = torch.randint(tokens // 2, tokens + 1, (rows,), generator=g)
    attn = (torch.arange(tokens)[None, :] < lengths[:, None]).long()
    return ids, attn


def step(model, ids: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
    """One forward and backward of a masked token-mean log-likelihood; -> the log-probs [B, T]."""
    logp, _ = token_logprobs(model, ids, attn, with_entropy=False)
    (-(logp * attn).sum() / attn.sum()).backward()
    return logp.detach()


def timed(model, ids, attn, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        step(model, ids, attn)
    return (time.perf_counter() - t0) / reps


def measure(model, compiled, shape: tuple[int, int], rounds: int, reps: int) -> dict:
    """`compiled`: a compiled copy of `model` to reuse (--dynamic), or None: one for this shape."""
    ids, attn = batch(model.config.vocab_size, *shape, seed=shape[0] * 1000 + shape[1])
    t0 = time.perf_counter()
    compiled = torch.compile(model, dynamic=False) if compiled is None else compiled
    step(compiled, ids, attn)  # compiles the forward and the backward of this shape
    compile_s = time.perf_counter() - t0
    diff = float(((step(compiled, ids, attn) - step(model, ids, attn)) * attn).abs().max())
    step(model, ids, attn)
    ratios, eager_s, compiled_s = [], [], []
    for _ in range(rounds):
        e, c = timed(model, ids, attn, reps), timed(compiled, ids, attn, reps)
        eager_s.append(e)
        compiled_s.append(c)
        ratios.append(c / e)
    model.zero_grad(set_to_none=True)
    return {"rows": shape[0], "tokens": shape[1], "compile_s": compile_s, "eager_s": statistics.median(eager_s),
            "compiled_s": statistics.median(compiled_s), "median_ratio": statistics.median(ratios),
            "ratios": ratios, "max_abs_logprob_diff": diff}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="8x400,16x150,4x700", help="micro-batches, rows x tokens")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=4, help="forward+backward passes per timing")
    ap.add_argument("--dynamic", action="store_true", help="one copy compiled with symbolic shapes for all")
    ap.add_argument("--init", help="a model directory (default: a random model of the demo's size)")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.init:
        model = load_policy(args.init).model
    else:
        model = build_tiny_policy(ModelConfig(hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2,
                                              intermediate_size=384)).model
    model.train()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    rows = []
    compiled = torch.compile(model, dynamic=True) if args.dynamic else None
    for shape in shapes:
        row = measure(model, compiled, shape, args.rounds, args.reps)
        rows.append(row)
        print(f"{row['rows']} x {row['tokens']}: eager {row['eager_s'] * 1e3:.0f} ms, compiled "
              f"{row['compiled_s'] * 1e3:.0f} ms ({row['median_ratio']:.2f}x; rounds "
              f"{min(row['ratios']):.2f}-{max(row['ratios']):.2f}), compiled in {row['compile_s']:.0f} s, "
              f"log-probs within {row['max_abs_logprob_diff']:.1e}")
    if args.json:
        settings = {"shapes": args.shapes, "rounds": args.rounds, "reps": args.reps, "threads": 1,
                    "dynamic": args.dynamic, "cpu": cpu_model(),
                    "model": args.init or "random, the demo's size", "torch": torch.__version__}
        Path(args.json).write_text(json.dumps({"settings": settings, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
