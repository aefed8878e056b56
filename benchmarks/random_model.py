"""A model directory of a real architecture with random weights, for machines without a hub.

The GPU machines this project is checked on reach no model hub, so `benchmarks/gpu_check.sh`
cannot download Qwen3. What its check is about (every part runs on the GPU at the real model's
size: the bf16 learner, gradient checkpointing, peak memory, step time, the chat protocol) does
not depend on trained weights, so this writes a Hugging Face directory with:

* Qwen3's published dimensions for the named size (config.json of Qwen/Qwen3-0.6B, -1.7B, -4B:
  layers, hidden, MLP, heads, KV heads, head_dim 128, vocab 151,936, tied embeddings at 0.6B-4B,
  rope_theta 1e6, rms_norm_eps 1e-6);
* weights from transformers' own initialisation (normal, std 0.02), seeded, saved in bf16;
* Qwen's real BPE vocabulary and a ChatML chat template (`swarmrl.policy.qwen_vocab`).

A random model samples random tokens, so every turn runs to its token cap: step times measure the
cap, not what a trained model would write. It scores 0; learning is not what such a run checks.

    python benchmarks/random_model.py Qwen3-0.6B runs/models/qwen3-0.6b-random [--device cuda]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from swarmrl.policy.qwen_vocab import QWEN_MODEL_VOCAB_SIZE, build_qwen_tokenizer

# name: (layers, hidden, intermediate, attention heads, KV heads), from each model's config.json.
QWEN3_SIZES = {
    "Qwen3-0.6B": (28, 1024, 3072, 16, 8),
    "Qwen3-1.7B": (28, 2048, 6144, 16, 8),
    "Qwen3-4B": (36, 2560, 9728, 32, 8),
    "Qwen3-tiny": (2, 128, 256, 2, 1),  # not published: Qwen3's vocabulary and layout, for a CPU dry run
}


def qwen3_config(name: str, tokenizer) -> Qwen3Config:
    """The published Qwen3 config of `name` (a key of QWEN3_SIZES), with this tokenizer's ids."""
    if name not in QWEN3_SIZES:
        raise SystemExit(f"random_model: unknown architecture {name!r}; choose one of {', '.join(QWEN3_SIZES)}")
    layers, hidden, inter, heads, kv = QWEN3_SIZES[name]
    return Qwen3Config(vocab_size=QWEN_MODEL_VOCAB_SIZE, hidden_size=hidden, intermediate_size=inter,
                       num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv, head_dim=128,
                       max_position_embeddings=40960, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
                       tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
                       eos_token_id=tokenizer.eos_token_id, bos_token_id=None)


def write_random_model(name: str, out: Path, device: str = "cpu", seed: int = 0) -> int:
    """Write the directory; returns the parameter count."""
    tokenizer = build_qwen_tokenizer()
    cfg = qwen3_config(name, tokenizer)
    torch.manual_seed(seed)
    with torch.device(device):  # initialising 4B parameters on a GPU takes seconds, on a CPU minutes
        model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", help=f"architecture: {', '.join(QWEN3_SIZES)}")
    p.add_argument("out", type=Path, help="the model directory to write")
    p.add_argument("--device", default="cpu", help="where to initialise the weights (cpu, cuda)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    n = write_random_model(a.name, a.out, a.device, a.seed)
    print(f"random_model: {a.name} ({n / 1e9:.2f}B parameters, random, bf16) -> {a.out} "
          f"in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
