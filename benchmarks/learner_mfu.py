"""Where the learner's time goes on the tiny model, and the MFU it could reach (issue 17).

`perf/mfu_update` counts only the model's own training FLOPs (6 N T plus attention,
diagnostics/mfu.py) against the machine's square-matmul peak. This script counts the output head
at every position, as the demo's full-logits learner computes it; the trainer's metric now counts
it only where the loss reads a token (the chunked learner skips the rest). On the demo's model the
head is 4.4% of N, so the two conventions differ by less than that. On the demo's model (hidden 128,
4 layers, 283-token vocabulary) that number is capped well below 1 by three things this script
measures on the sequences of real demo steps:

1. **work that MFU does not count**: the KL term's reference forward (2 N T more matmul FLOPs,
   with `rl.kl_coef` > 0) and the padded cells of each micro-batch;
2. **non-matmul time**: attention (SDPA), RMSNorm, rotary embeddings, SiLU, log-softmax and the
   elementwise ops of the backward, grouped from a `torch.profiler` trace of one update;
3. **the matmul rate at the model's shapes**: every matmul has an inner or outer size of 128
   (the hidden size) or 64 (key/value heads); timed alone at the micro-batch's token count, and
   as the profile's matmul FLOPs over its matmul time.

It reports the measured MFU, and two ceilings: `ceiling_if_only_matmuls` (every non-matmul op
free, matmuls as fast as measured in the update) and `ceiling_at_peak_matmuls` (matmuls at the
square peak too, so only the uncounted work remains). It also times the update under bf16
autocast (`model.mixed_precision=bf16`), interleaved with float32, since this CPU has bf16
matmul units (`avx512_bf16`).

Finally (`--widths`) it runs the same update on the first `--width-sequences` sequences of the
first recorded step through random models of the same architecture and depth but wider
(hidden size h, 3h intermediate, h/32 heads): per token the matmul FLOPs grow as h^2 and the
elementwise work as h, so if the non-matmul time is what caps the tiny model, MFU rises with h.

    .venv/bin/python benchmarks/learner_mfu.py --json benchmarks/learner_mfu.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

MATMUL_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm")
ATTENTION_PREFIX = "aten::_scaled_dot_product"


def make_updater(cfg, policy, precision: str, kl_coef: float):
    """An `Updater` on the demo's settings with lr 0, so every timed round sees the same weights."""
    from swarmrl.build import make_policy_set
    from swarmrl.rl.losses import get_loss
    from swarmrl.rl.update import Updater
    rl = dataclasses.replace(cfg.rl, lr=0.0, kl_coef=kl_coef)
    up = Updater(rl, make_policy_set(cfg, policy), get_loss(rl.loss), policy.pad_id, cfg.seed)
    up.mixed_precision = precision
    return up


def time_updates(updaters: dict[str, object], batches: list[list], rounds: int) -> dict[str, list[float]]:
    """Seconds per update (mean over the recorded batches) per variant, rounds interleaved with
    the order reversed every other round."""
    names = list(updaters)
    out: dict[str, list[float]] = {n: [] for n in names}
    for n in names:  # warm-up: allocator and oneDNN kernels
        updaters[n].update(batches[0], 0, measure_roles=False)
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            for k, seqs in enumerate(batches):
                updaters[n].update(seqs, k, measure_roles=False)
            out[n].append((time.perf_counter() - t0) / len(batches))
    return out


def profile_update(updater, batches: list[list]) -> dict[str, float]:
    """Self CPU seconds per update, grouped into matmul / attention / other, and the matmul FLOPs."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        for k, seqs in enumerate(batches):
            updater.update(seqs, k, measure_roles=False)
    groups = {"matmul_s": 0.0, "attention_s": 0.0, "other_s": 0.0, "matmul_flops": 0.0}
    for ev in prof.key_averages():
        s = ev.self_cpu_time_total / 1e6
        if ev.key in MATMUL_OPS:
            groups["matmul_s"] += s
            groups["matmul_flops"] += float(ev.flops or 0)
        elif ev.key.startswith(ATTENTION_PREFIX):
            groups["attention_s"] += s
        else:
            groups["other_s"] += s
    return {k: v / len(batches) for k, v in groups.items()}


def shape_rates(tokens: int, hidden: int, kv: int, inter: int, vocab: int, reps: int = 10) -> dict[str, float]:
    """GFLOP/s of the model's linear layers at `tokens` rows (forward shapes), float32, alone."""
    def rate(m: int, k: int, n: int) -> float:
        a, b = torch.randn(m, k), torch.randn(k, n)
        torch.mm(a, b)
        best = min(_timed(lambda: torch.mm(a, b)) for _ in range(reps))
        return 2.0 * m * k * n / best / 1e9
    return {f"[{tokens},{k}]x[{k},{n}]": rate(tokens, k, n)
            for k, n in ((hidden, hidden), (hidden, kv), (hidden, inter), (inter, hidden), (hidden, vocab))}


def width_sweep(cfg, seqs: list, widths: list[int], rounds: int, peak: float) -> dict[str, dict]:
    """MFU of the update on `seqs` through random models of each width, with the configured KL
    term and without it (best of `rounds`)."""
    from swarmrl.diagnostics.mfu import matmul_params, model_shape, update_flops
    from swarmrl.policy.model import build_tiny_policy
    out = {}
    for h in widths:
        mcfg = dataclasses.replace(cfg.model, hidden_size=h, intermediate_size=3 * h, num_heads=h // 32,
                                   num_kv_heads=max(1, h // 64))
        policy = build_tiny_policy(mcfg, seed=cfg.seed)
        n, layers, hidden = matmul_params(policy.model), *model_shape(policy.model)
        fl = update_flops([len(s.ids) for s in seqs], n, layers, hidden)
        row = {"params": n}
        for name, kl in (("kl", cfg.rl.kl_coef), ("no_kl", 0.0)):
            up = make_updater(cfg, policy, "no", kl)
            up.update(seqs, 0, measure_roles=False)  # warm-up
            best = min(_timed(lambda: up.update(seqs, 0, measure_roles=False)) for _ in range(rounds))
            row |= {f"update_s_{name}": best, f"mfu_{name}": fl / best / peak}
        out[str(h)] = row
    return out


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> int:
    from learner_padding import record_steps
    from swarmrl.config import load_config, resolve_config
    from swarmrl.diagnostics.mfu import matmul_params, measure_peak_flops, model_shape, update_flops
    from swarmrl.policy.model import load_policy
    from swarmrl.policy.warmstart import warm_start
    from swarmrl.rl.batch import micro_batches, pad_fraction
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="rlcr_arith")
    ap.add_argument("--steps", type=int, default=2, help="RL steps whose sequences are recorded")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds per variant (interleaved)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--widths", default="128,256,512", help="hidden sizes of the width sweep ('' = none)")
    ap.add_argument("--width-sequences", type=int, default=48, help="sequences the width sweep trains on")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_config(resolve_config(args.config), [])
    init = warm_start(cfg)  # the demo's cached warm start (trained first if missing)
    batches = record_steps(cfg, load_policy(init, cfg.model.dtype), args.steps)
    policy = load_policy(init, cfg.model.dtype)
    n, layers, hidden = matmul_params(policy.model), *model_shape(policy.model)
    mc = policy.model.config
    peak = measure_peak_flops(torch.device("cpu"), torch.float32)
    peak_bf16 = measure_peak_flops(torch.device("cpu"), torch.bfloat16)
    tokens = statistics.mean(sum(len(s.ids) for s in b) for b in batches)
    model_fl = statistics.mean(update_flops([len(s.ids) for s in b], n, layers, hidden) for b in batches)
    micro = [micro_batches(b, cfg.rl.micro_batch_tokens, sort=cfg.rl.length_buckets, max_pad=cfg.rl.max_pad_fraction)
             for b in batches]
    pad = statistics.mean(pad_fraction(m) for m in micro)
    res_micro = statistics.mean(len(m) for m in micro)

    kl = cfg.rl.kl_coef
    variants = {"fp32": ("no", kl), "bf16": ("bf16", kl), "fp32_no_kl": ("no", 0.0)}
    ups = {name: make_updater(cfg, policy, p, k) for name, (p, k) in variants.items()}
    times = time_updates(ups, batches, args.rounds)
    med = {name: statistics.median(v) for name, v in times.items()}
    prof = profile_update(ups["fp32"], batches)
    prof_total = prof["matmul_s"] + prof["attention_s"] + prof["other_s"]
    matmul_rate = prof["matmul_flops"] / max(prof["matmul_s"], 1e-9)
    counted_matmul_fl = 6.0 * n * tokens  # of the matmul FLOPs, those MFU counts (no attention, no reference)
    res = {
        "tokens_per_update": tokens, "pad_fraction": pad, "micro_batches": res_micro,
        "model_flops_per_update": model_fl, "peak_gflops_fp32": peak / 1e9, "peak_gflops_bf16": peak_bf16 / 1e9,
        "update_s": med, "update_s_rounds": times,
        "mfu": {name: model_fl / s / peak for name, s in med.items()},
        "profile_fp32": {**prof, "matmul_share": prof["matmul_s"] / prof_total,
                         "attention_share": prof["attention_s"] / prof_total,
                         "matmul_gflops": matmul_rate / 1e9, "matmul_rate_vs_peak": matmul_rate / peak,
                         "matmul_flops_vs_counted": prof["matmul_flops"] / counted_matmul_fl},
        "ceiling_if_only_matmuls": model_fl / max(prof["matmul_s"], 1e-9) / peak,
        "ceiling_at_peak_matmuls": model_fl / (prof["matmul_flops"] / peak) / peak,
        "shape_gflops_fp32": shape_rates(int(tokens / res_micro), hidden,
                                         mc.num_key_value_heads * mc.head_dim, mc.intermediate_size, mc.vocab_size),
        "width_sweep": width_sweep(cfg, batches[0][:args.width_sequences],
                                   [int(w) for w in args.widths.split(",") if w], 3, peak),
        "settings": vars(args) | {"kl_coef": kl, "micro_batch_tokens": cfg.rl.micro_batch_tokens},
    }
    report(res)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


def report(res: dict) -> None:
    p = res["profile_fp32"]
    print(f"update of {res['tokens_per_update']:.0f} tokens (padding {res['pad_fraction']:.3f}, "
          f"{res['micro_batches']:.1f} micro-batches); peak fp32 {res['peak_gflops_fp32']:.0f} GFLOP/s, "
          f"bf16 {res['peak_gflops_bf16']:.0f}")
    for name, s in res["update_s"].items():
        print(f"  {name:<11} {s:.3f} s  MFU {res['mfu'][name]:.3f}")
    print(f"  profile (fp32): matmul {p['matmul_share']:.0%}, attention {p['attention_share']:.0%}, other "
          f"{1 - p['matmul_share'] - p['attention_share']:.0%} of op time; matmuls at {p['matmul_gflops']:.0f} GFLOP/s "
          f"({p['matmul_rate_vs_peak']:.0%} of peak), {p['matmul_flops_vs_counted']:.2f}x the FLOPs MFU counts")
    print(f"  ceilings: only matmuls {res['ceiling_if_only_matmuls']:.2f}; matmuls at peak "
          f"{res['ceiling_at_peak_matmuls']:.2f}")
    for h, v in res["width_sweep"].items():
        print(f"  width {h:>4} ({v['params'] / 1e6:.1f}M matmul params): MFU {v['mfu_kl']:.3f} with the KL term, "
              f"{v['mfu_no_kl']:.3f} without")
    print("  shapes alone (GFLOP/s): " + ", ".join(f"{k} {v:.0f}" for k, v in res["shape_gflops_fp32"].items()))


if __name__ == "__main__":
    sys.exit(main())
