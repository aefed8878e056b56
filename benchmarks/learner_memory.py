"""Peak CPU memory of one learner update step: full logits vs chunked log-probs.

One step = forward + backward of the masked log-prob loss -(logp * mask).sum() / n through
`rl/batch.py token_logprobs`, at Qwen3's vocabulary (151,936) and T = 2,048 tokens per row, on a
tiny random Qwen3 (1 layer, hidden 64, tied embeddings: the model weighs ~40 MB, so the logits
are what the step's memory is about). `naive` = chunk_tokens 0 (full [B, T-1, V] float32
logits), `chunked` = chunk_tokens --chunk (default 1024 (row, position) pairs per chunk).

Each (variant, micro-batch, repeat) runs in a fresh subprocess, interleaved. The subprocess
builds the model and inputs, reads its RSS (the baseline), resets the kernel's peak-RSS mark
(/proc/self/clear_refs = 5) and runs the step; the step's peak is VmHWM - baseline (and
ru_maxrss - baseline as a cross-check; ru_maxrss is never reset, so it is an upper bound).

Safety: before each naive run the parent reads MemAvailable and skips the run (recorded as
skipped, never extrapolated) unless it has the predicted need (batch x the largest measured
naive peak per row, 6 GB a row before any is measured) plus 3 GB margin, and at micro-batch 4
at least 20 GB; a watchdog thread in each child
exits it if MemAvailable falls under 1.5 GB.

    .venv/bin/python benchmarks/learner_memory.py            # micro-batches 1 2 4, 3 repeats
    .venv/bin/python benchmarks/learner_memory.py --batches 1 2 --repeats 2
Writes benchmarks/learner_memory.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

VOCAB = 151_936
GB = 1024 ** 3
HERE = Path(__file__).resolve().parent


def meminfo(key: str) -> int:
    """Bytes of a /proc/meminfo field."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def status(key: str) -> int:
    """Bytes of a /proc/self/status field (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def watchdog(floor: int) -> None:
    while True:
        if meminfo("MemAvailable") < floor:
            print(json.dumps({"error": "aborted: MemAvailable under the floor"}), flush=True)
            os._exit(99)
        time.sleep(0.02)


def child(variant: str, batch: int, seq: int, chunk: int, threads: int) -> None:
    threading.Thread(target=watchdog, args=(int(1.5 * GB),), daemon=True).start()
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from swarmrl.rl.batch import token_logprobs

    torch.set_num_threads(threads)
    cfg = Qwen3Config(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=32, intermediate_size=128,
                      max_position_embeddings=seq, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg).float().train()
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=gen)  # [B, T]
    attn = torch.ones_like(ids)  # [B, T]
    mask = torch.ones(batch, seq)  # [B, T]
    mask[:, :16] = 0  # a prompt: no gradient
    n_params = sum(p.numel() for p in model.parameters())
    base = status("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        reset = status("VmHWM") <= base + 64 * 1024 ** 2
    except OSError:
        reset = False
    t0 = time.perf_counter()
    logp, _ = token_logprobs(model, ids, attn, with_entropy=False, chunk_tokens=chunk if variant == "chunked" else 0)
    loss = -(logp * mask).sum() / mask.sum()
    loss.backward()
    secs = time.perf_counter() - t0
    hwm = status("VmHWM")
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    grad_norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters() if p.grad is not None)))
    print(json.dumps({"variant": variant, "batch": batch, "seq": seq, "chunk": chunk if variant == "chunked" else 0,
                      "params": n_params, "baseline_rss_gb": base / GB, "hwm_reset": reset,
                      "peak_gb": (hwm - base) / GB if reset else None, "maxrss_peak_gb": (maxrss - base) / GB,
                      "seconds": secs, "loss": float(loss), "grad_norm": grad_norm}), flush=True)


def run_child(variant: str, batch: int, args) -> dict:
    cmd = [sys.executable, __file__, "--child", variant, "--batches", str(batch), "--seq", str(args.seq),
           "--chunk", str(args.chunk), "--threads", str(args.threads)]
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"variant": variant, "batch": batch, "error": f"rc {p.returncode}: "
                + (lines[-1] if lines else p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "")}
    return json.loads(lines[-1])


def peak(r: dict) -> float | None:
    return r.get("peak_gb") if r.get("peak_gb") is not None else r.get("maxrss_peak_gb")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", choices=["naive", "chunked"])
    ap.add_argument("--out", default=str(HERE / "learner_memory.json"))
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.batches[0], args.seq, args.chunk, args.threads)

    runs, naive_per_row = [], None
    start_avail = meminfo("MemAvailable")
    print(f"MemAvailable at start: {start_avail / GB:.1f} GB", flush=True)
    for rep in range(args.repeats):
        for batch in args.batches:
            for variant in (("naive", "chunked") if rep % 2 == 0 else ("chunked", "naive")):
                avail = meminfo("MemAvailable")
                if variant == "naive":
                    need = ((naive_per_row or 6.0) * batch + 3) * GB  # 6 GB a row until measured
                    if batch >= 4:
                        need = max(need, 20 * GB)
                    if avail < need:
                        r = {"variant": variant, "batch": batch, "repeat": rep, "mem_available_gb": avail / GB,
                             "skipped": f"MemAvailable {avail / GB:.1f} GB < {need / GB:.1f} GB needed"}
                        print(json.dumps(r), flush=True)
                        runs.append(r)
                        continue
                r = run_child(variant, batch, args)
                r.update(repeat=rep, mem_available_gb=avail / GB)
                print(json.dumps(r), flush=True)
                runs.append(r)
                if variant == "naive" and peak(r) is not None:
                    naive_per_row = max(naive_per_row or 0.0, peak(r) / batch)

    table = []
    for batch in args.batches:
        row = {"batch": batch}
        for variant in ("naive", "chunked"):
            ok = [r for r in runs if r["variant"] == variant and r["batch"] == batch and peak(r) is not None]
            row[variant] = {"n": len(ok),
                            "peak_gb_min": min(map(peak, ok)) if ok else None,
                            "peak_gb_max": max(map(peak, ok)) if ok else None,
                            "seconds_median": sorted(r["seconds"] for r in ok)[len(ok) // 2] if ok else None,
                            "loss": ok[0]["loss"] if ok else None}
        n, c = row["naive"]["peak_gb_max"], row["chunked"]["peak_gb_max"]
        row["chunked_over_naive"] = c / row["naive"]["peak_gb_min"] if n and c else None
        table.append(row)
    out = {"command": " ".join([".venv/bin/python", "benchmarks/learner_memory.py"] + sys.argv[1:]),
           "vocab": VOCAB, "seq": args.seq, "chunk_tokens": args.chunk, "threads": args.threads,
           "model": "Qwen3ForCausalLM, 1 layer, hidden 64, heads 2/1 kv, intermediate 128, tied embeddings, float32",
           "step": "token_logprobs(with_entropy=False) + (-(logp*mask).sum()/n).backward(), train mode",
           "measure": "VmHWM after reset (clear_refs 5) minus RSS after building model and inputs, fresh subprocess",
           "mem_available_gb_at_start": start_avail / GB, "table": table, "runs": runs}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"\n{'micro-batch':>11} | {'naive peak GB':>15} | {'chunked peak GB':>15} | {'chunked/naive':>13} | "
          f"{'naive s':>7} | {'chunked s':>9}")
    for row in table:
        def fmt(v):
            d = row[v]
            if d["peak_gb_min"] is None:
                return "skipped"
            return f"{d['peak_gb_min']:.2f}-{d['peak_gb_max']:.2f}"
        ratio = f"{row['chunked_over_naive']:.1%}" if row["chunked_over_naive"] else "-"
        ns = f"{row['naive']['seconds_median']:.1f}" if row["naive"]["seconds_median"] else "-"
        cs = f"{row['chunked']['seconds_median']:.1f}" if row["chunked"]["seconds_median"] else "-"
        print(f"{row['batch']:>11} | {fmt('naive'):>15} | {fmt('chunked'):>15} | {ratio:>13} | {ns:>7} | {cs:>9}")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
