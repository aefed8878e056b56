"""The sampler alone on a mixed-adapter batch: PEFT's loop against batched adapters, interleaved.

A tiny Qwen3 of the demo's size (random weights; `--model DIR`: a Hugging Face model directory,
e.g. from benchmarks/random_model.py), 4 LoRA adapters of rank 8 on every projection (B drawn at
random so that the adapters matter), 16 prompts of 100-200 tokens, rows on the 4 adapters in turn,
40 new tokens each, per-row seeds, one CPU thread (`--device cuda`: on the GPU). Variants, each repeat in a
rotating order: `no_adapters` (the base model alone: the floor), `peft_loop`
(`sampler.batched_adapters=false`) and `batched` (policy/lora_batch.py, with the fast decode step
inside). Reported: each variant's median wall time, and how far `batched` sampled from
`peft_loop` (tokens equal? the largest log-prob difference).

    .venv/bin/python benchmarks/mixed_adapters.py [--repeats 7] [--json F] [--model DIR --device cuda]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model

from swarmrl.config import ModelConfig
from swarmrl.policy.model import _wrap, build_tiny_policy, load_policy
from swarmrl.policy.sampler import HFSampler

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ADAPTERS = 4
ROWS = 16


def policies(model: str | None, device: str):
    base = (load_policy(model) if model else
            build_tiny_policy(ModelConfig(hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2,
                                          intermediate_size=384, max_context_tokens=2048)))
    base.model.to(device).eval()
    lcfg = LoraConfig(r=8, lora_alpha=16, target_modules=TARGETS)
    peft = get_peft_model(copy.deepcopy(base.model), lcfg, adapter_name="r0")
    for i in range(1, ADAPTERS):
        peft.add_adapter(f"r{i}", lcfg)
    with torch.no_grad():
        for n, p in peft.named_parameters():
            if "lora_B" in n:
                p.normal_(0.0, 0.05)
    return base, _wrap(peft.to(device).eval(), base.tokenizer)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json")
    ap.add_argument("--model", help="a Hugging Face model directory (default: the demo-sized tiny Qwen3)")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    base, lora = policies(args.model, args.device)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 250, (int(n),), generator=g).tolist() for n in torch.randint(100, 200, (ROWS,), generator=g)]
    adapters = [f"r{i % ADAPTERS}" for i in range(ROWS)]
    variants = {"no_adapters": (base, None, True), "peft_loop": (lora, adapters, False), "batched": (lora, adapters, True)}
    walls, out = {v: [] for v in variants}, {}
    for i in range(args.repeats):
        names = list(variants)
        for v in names[i % 3:] + names[:i % 3]:
            policy, ads, batched = variants[v]
            sampler = HFSampler(policy, temperature=1.0, batched_adapters=batched)
            _sync(args.device)
            t0 = time.perf_counter()
            out[v] = sampler.generate(prompts, 40, seed=0, adapters=ads, row_seeds=list(range(ROWS)))
            _sync(args.device)
            walls[v].append(time.perf_counter() - t0)
        print(f"repeat {i}: " + ", ".join(f"{v} {walls[v][-1]:.3f}s" for v in variants), flush=True)
    a, b = out["peft_loop"], out["batched"]
    summary = {"median_wall_s": {v: statistics.median(w) for v, w in walls.items()},
               "median_ratio_batched_to_peft_loop": statistics.median(x / y for x, y in zip(walls["batched"],
                                                                                           walls["peft_loop"])),
               "same_tokens": [s.ids for s in a] == [s.ids for s in b],
               "max_logprob_diff": max(abs(p - q) for s, t in zip(a, b) for p, q in zip(s.logprobs, t.logprobs)),
               "generated_tokens": sum(len(s.ids) for s in b)}
    print(json.dumps(summary, indent=1))
    if args.json:
        settings = {"rows": ROWS, "adapters": ADAPTERS, "rank": 8, "new_tokens": 40, "threads": 1,
                    "repeats": args.repeats, "model": args.model or "tiny (demo size)", "device": args.device}
        Path(args.json).write_text(json.dumps({"settings": settings, **summary, "walls_s": walls}, indent=1) + "\n")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
