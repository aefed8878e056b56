"""One decode call of the demo-sized model: `model(...)` against FastDecode (policy/fast_decode.py).

A random tiny Qwen3 of the demo's size, 16 rows with prompts of 180-200 tokens (left padded, so
the steps are masked) prefilled into the sampler's cache layout (`kvcache.stack_left_padded`),
then `--steps` decode calls each way from copies of the same cache, alternating, one thread.
Reported: the median milliseconds per call each way, and whether the logits of every call and
the keys/values written were equal with `torch.equal`.

    .venv/bin/python benchmarks/decode_step.py [--steps 60] [--repeats 5] [--json F]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch

from swarmrl.config import ModelConfig
from swarmrl.policy.fast_decode import FastDecode
from swarmrl.policy.kvcache import cache_keyword, decode_mask, stack_left_padded
from swarmrl.policy.model import build_tiny_policy

ROWS = 16


def prefilled(model, ids, attn):
    from transformers import DynamicCache
    cache = DynamicCache()
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1,
                   **{cache_keyword(model): cache}).logits[:, -1]
    return stack_left_padded([cache], 128), logits


def run(step, cache, tok, attn, steps):
    """`steps` greedy decode calls; -> (seconds per call, every call's logits)."""
    pos = attn.sum(-1, keepdim=True)  # [A, 1] the next position of each row
    out, t0 = [], time.perf_counter()
    for _ in range(steps):
        attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)
        logits = step(tok, decode_mask(attn), pos, cache)
        out.append(logits)
        tok, pos = logits.argmax(-1, keepdim=True), pos + 1
    return (time.perf_counter() - t0) / steps, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = build_tiny_policy(ModelConfig(hidden_size=128, num_layers=4, num_heads=4, num_kv_heads=2,
                                          intermediate_size=384, max_context_tokens=2048)).model.eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 250, (ROWS, 200), generator=g)
    attn = torch.ones(ROWS, 200, dtype=torch.long)
    for r in range(ROWS):
        attn[r, :r % 4 * 6] = 0  # left padding of 0-18 columns
    fast_step = FastDecode.for_model(model)
    fast = lambda t, m, p, c: fast_step(t, m, p, c)[:, -1]  # noqa: E731 - [A, Q, V] -> the last column's
    kw = cache_keyword(model)
    forward = lambda t, m, p, c: model(input_ids=t, attention_mask=m, position_ids=p, use_cache=True,  # noqa: E731
                                       logits_to_keep=1, **{kw: c}).logits[:, -1]
    ms = {"forward": [], "fast": []}
    same = True
    with torch.inference_mode():
        cache, logits = prefilled(model, ids, attn)
        tok = logits.argmax(-1, keepdim=True)
        fast(tok, decode_mask(torch.cat([attn, attn[:, :1]], 1)), attn.sum(-1, keepdim=True),
             copy.deepcopy(cache))  # the one-time check of this kind of step
        for i in range(args.repeats):
            got = {}
            for name in ("forward", "fast") if i % 2 == 0 else ("fast", "forward"):
                c = copy.deepcopy(cache)
                sec, got[name] = run(forward if name == "forward" else fast, c, tok, attn.clone(), args.steps)
                got[name + "_kv"] = [layer.keys for layer in c.layers]
                ms[name].append(sec * 1e3)
            same &= all(torch.equal(a, b) for a, b in zip(got["forward"], got["fast"]))
            same &= all(torch.equal(a, b) for a, b in zip(got["forward_kv"], got["fast_kv"]))
    summary = {"median_ms_per_call": {k: statistics.median(v) for k, v in ms.items()},
               "ratio_fast_to_forward": statistics.median(ms["fast"]) / statistics.median(ms["forward"]),
               "bitwise_equal": bool(same)}
    print(json.dumps(summary, indent=1))
    if args.json:
        settings = {"rows": ROWS, "prompt_tokens": 200, "steps": args.steps, "repeats": args.repeats, "threads": 1}
        Path(args.json).write_text(json.dumps({"settings": settings, **summary, "ms": ms}, indent=1) + "\n")


if __name__ == "__main__":
    main()
