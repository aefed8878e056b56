"""Model FLOPs utilisation (MFU) of generation and of the update, against the measured peak.

MFU = (the FLOPs the model's math needs) / (wall time) / (the device's peak), as in PaLM
(Chowdhery et al. 2022, appendix B): work the model must do, not the work the kernels did, so
padding, recomputation and idle time all count against it.

FLOPs, with N the parameters that take part in a matmul (every parameter except the input
embedding table, whose lookup is not a matmul; a tied LM head counts once, as the head), L
layers, d the hidden size, and multiply-adds counted as 2 FLOPs:

- **update** of a sequence of T tokens: 6 N T (forward 2 N T, backward 4 N T) plus attention
  12 L d T^2 (QK^T and AV, 2 L d T^2 each forward, x3 with backward; no causal halving, PaLM's
  convention);
- **generation**, per turn: 2 N per token processed (its new prompt tokens and its generated
  tokens) plus attention 4 L d per token per context position, with the turn's context length
  standing in for each token's (an upper estimate by at most the turn's own length).

Unlike pretraining, RL needs the output head (N_h of the N parameters) only where a token is
predicted: in the update at the G positions the loss reads, in generation once per generated
token. Given N_h, the head counts there alone: the update's 6 N T becomes 6 (N - N_h) T + 6 N_h G,
and generation's head 2 N_h per generated token. At Qwen3-0.6B's vocabulary the head is a quarter
of N, and an agent's context is mostly prompt, so counting it at every position would overstate
the work a learner that skips it (`rl.logprob_chunk_tokens`, rl/batch.py `keep`) must do.

The peak is measured, not looked up: the best of a few square matmuls in the dtype the model
computes in, with the current torch thread count, once per process; the cache directory keeps
the best seen per (device: a GPU's name, a CPU's model and usable cores; dtype; threads), so a
measurement taken on shared cores cannot stick.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

import torch

from swarmrl.runs.environment import cpu_model, usable_cores

_PEAKS: dict[str, float] = {}  # in-process cache of measure_peak_flops


def matmul_params(model: torch.nn.Module) -> int:
    """N: the parameters that take part in a matmul (module docstring)."""
    total = sum(p.numel() for p in model.parameters())
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    tied = head is not None and head.weight.data_ptr() == emb.data_ptr()
    return total if tied else total - emb.numel()


def model_shape(model: torch.nn.Module) -> tuple[int, int]:
    """(layers, hidden size) from the model's Hugging Face config."""
    cfg = model.config
    return int(cfg.num_hidden_layers), int(cfg.hidden_size)


def update_flops(lengths: list[int], n_params: int, layers: int, hidden: int, head_params: int = 0,
                 loss_tokens: list[int] | None = None) -> float:
    """FLOPs of one forward + backward over sequences of `lengths` tokens, of which the loss
    reads `loss_tokens` (needed with `head_params` > 0; module docstring)."""
    loss_tokens = loss_tokens if loss_tokens is not None else lengths
    return float(sum(6 * (n_params - head_params) * t + 6 * head_params * g + 12 * layers * hidden * t * t
                     for t, g in zip(lengths, loss_tokens, strict=True)))


def generation_flops(turns: list[tuple[int, int, int]], n_params: int, layers: int, hidden: int,
                     head_params: int = 0) -> float:
    """FLOPs of sampling `turns`: (context tokens, new prompt tokens, generated tokens) each."""
    body = n_params - head_params
    return float(sum((2 * body + 4 * layers * hidden * ctx) * (new + gen) + 2 * head_params * gen
                     for ctx, new, gen in turns))


def head_params(model: torch.nn.Module) -> int:
    """N_h: the output head's parameters (module docstring); 0 where the model has no plain head."""
    head = model.get_output_embeddings()
    return sum(p.numel() for p in head.parameters()) if head is not None else 0


def measure_peak_flops(device: torch.device, dtype: torch.dtype, cache: Path | None = None,
                       size: int | None = None, reps: int = 5) -> float:
    """The device's matmul peak in FLOP/s: the best of `reps` [size, size] x [size, size] matmuls
    (after one warm-up), measured once per process and kept in `cache / peak_flops.json` as the
    best ever seen there. A peak is a maximum, and one measurement taken while another job shared
    the cores reads low (on 2 cores, half), so a stored value is a floor that each new process may
    raise, never the answer by itself. `size` None: 2048 on a CPU (about 0.1 s a matmul on 2
    cores), 8192 on a GPU (smaller ones measure launch overhead)."""
    size = size or (8192 if device.type == "cuda" else 2048)
    key = peak_key(device, dtype, size)
    if key in _PEAKS:
        return _PEAKS[key]
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(reps + 1):
        _sync(device)
        t0 = time.perf_counter()
        torch.mm(a, b)
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    path = cache / "peak_flops.json" if cache is not None else None
    stored = _read(path)
    peak = max(2.0 * size ** 3 / best, stored.get(key, 0.0))
    if path is not None and peak > stored.get(key, 0.0):
        path.write_text(json.dumps(stored | {key: peak}, indent=1))
    _PEAKS[key] = peak
    return peak


def peak_key(device: torch.device, dtype: torch.dtype, size: int) -> str:
    """The entry of `peak_flops.json` for this device, dtype, matmul size and torch thread count."""
    return f"{device.type}:{_device_name(device)}|{dtype}|threads={torch.get_num_threads()}|n={size}"


def mfu_metrics(update_fl: float, update_s: float, gen_fl: float, gen_s: float, peak: float) -> dict[str, float]:
    """The `perf/...` metrics of one step (FLOPs, seconds, and the peak in FLOP/s)."""
    out = {"perf/peak_tflops": peak / 1e12, "perf/update_s": update_s}
    if update_s > 0:
        out["perf/update_tflops"] = update_fl / update_s / 1e12
        out["perf/mfu_update"] = update_fl / update_s / peak
    if gen_s > 0:
        out["perf/generation_tflops"] = gen_fl / gen_s / 1e12
        out["perf/mfu_generation"] = gen_fl / gen_s / peak
    return out


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name()


@functools.cache
def _cpu_name() -> str:
    """The CPU model and the cores this process may use: a cache directory in a home shared by
    several machines keeps each machine's own peak (it keeps the best ever seen)."""
    return f"{cpu_model()} x{usable_cores()}"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _read(path: Path | None) -> dict[str, float]:
    try:
        return json.loads(path.read_text()) if path is not None and path.exists() else {}
    except (OSError, ValueError):  # a torn or foreign file: measure again
        return {}
