"""Where the policy lives and how the learner runs on it (`model.device`, `model.mixed_precision`,
`model.gradient_checkpointing`).

One rule for every tensor swarmrl makes itself: it is created on the device of the model that
reads it (`model_device`), and whatever leaves for Python lists or checkpoints goes back to
the CPU. The sampler, the learner and evaluation follow it, so placing the model is the only
decision: `place_model` (called from build.py for training, Ray workers, evaluation and
scaling).

Mixed precision is autocast of the learner's forward passes only: float32 master weights and
optimizer state, bfloat16 matmuls. The sampler stays in the model's own dtype, so on bf16 the
PPO ratio on the sampling policy is 1 only up to bf16 rounding (as it is with vLLM's engine).
"""

from __future__ import annotations

import contextlib
import re

import torch

from swarmrl.config import ConfigError

_CUDA_SPEC = re.compile(r"^cuda(:\d+)?$")


def resolve_device(spec: str) -> torch.device:
    """`model.device` -> a torch device: `auto` (the current CUDA device if CUDA is available,
    else the CPU), `cpu`, `cuda` (the current CUDA device) or `cuda:N`. The current device is
    cuda:0 in one process; under torchrun it is the process's own GPU (distributed/torchrun.py
    sets it from LOCAL_RANK before the policy is placed). A CUDA device this machine does not
    have, or any other string, is a ConfigError naming the key."""
    spec = str(spec).strip()
    if spec == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if not _CUDA_SPEC.match(spec):
        raise ConfigError(f"model.device={spec!r} is not a device: use auto, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise ConfigError(f"model.device={spec} needs a CUDA GPU and none is visible (torch.cuda.is_available() "
                          "is False); use model.device=cpu or model.device=auto on this machine")
    index = int(spec.split(":")[1]) if ":" in spec else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise ConfigError(f"model.device={spec}: this machine has {torch.cuda.device_count()} CUDA device(s) "
                          f"(cuda:0..cuda:{torch.cuda.device_count() - 1})")
    return torch.device("cuda", index)


def rollout_device(spec: str) -> torch.device:
    """The device of a rollout worker's replica: the configured one where this process can use
    it, else the CPU. Ray workers reserve no GPU (Ray hides CUDA from them), so a learner on
    `cuda` still has workers that sample on the CPU instead of failing."""
    try:
        return resolve_device(spec)
    except ConfigError:
        if spec != "auto" and not _CUDA_SPEC.match(str(spec).strip()):
            raise  # a bad string stays an error everywhere
        return torch.device("cpu")


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of a model's parameters (CPU for a model without any)."""
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def autocast_dtype(device: torch.device, mixed_precision: str) -> torch.dtype | None:
    """The autocast dtype of the learner's forward: bf16 on CUDA under `auto` or `bf16`, on the
    CPU only under an explicit `bf16` (CPU bf16 matmuls are slower than float32 on most CPUs);
    None = no autocast."""
    if mixed_precision not in ("auto", "no", "bf16"):
        raise ConfigError(f"model.mixed_precision={mixed_precision!r}: use auto, no or bf16")
    if mixed_precision == "bf16" or (mixed_precision == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None


def autocast(device: torch.device, mixed_precision: str) -> contextlib.AbstractContextManager:
    """The learner's forward context: `torch.autocast` to bf16 where `autocast_dtype` says so,
    else nothing. Gradients and the optimizer stay in the parameters' dtype."""
    dtype = autocast_dtype(device, mixed_precision)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def enable_gradient_checkpointing(model: torch.nn.Module) -> None:
    """Recompute each decoder block's activations in the backward (HF activation checkpointing,
    non-reentrant: works with frozen bases under LoRA without forcing input gradients).

    HF drops the KV cache in such a block's forward only in train mode with gradients on; the
    sampler decodes in eval mode under inference_mode (policy/sampler.py `DecodeStream.step`),
    so its KV cache is unaffected (tests/policy/test_device.py)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if not getattr(base, "supports_gradient_checkpointing", False):
        raise ConfigError(f"model.gradient_checkpointing=true: {type(base).__name__} does not support "
                          "gradient checkpointing")
    kwargs = {"use_reentrant": False}
    if hasattr(base, "activation_checkpointing_enable"):  # transformers >= 5.2x; the old name warns
        base.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def checkpointing_on(model: torch.nn.Module) -> bool:
    """Whether any block of `model` recomputes its activations in the backward."""
    return any(getattr(m, "gradient_checkpointing", False) for m in model.modules())


def place_model(model: torch.nn.Module, device: torch.device, gradient_checkpointing: bool = False) -> None:
    """Move `model` (in place) to `device` and, if asked, turn on gradient checkpointing."""
    model.to(device)
    if gradient_checkpointing:
        enable_gradient_checkpointing(model)


def cpu_groups(groups: dict[str, dict[str, torch.Tensor]]) -> dict[str, dict[str, torch.Tensor]]:
    """Checkpoint-style tensor groups with every tensor on the CPU (detached): what crosses a
    process boundary (Ray's object store) must load on a machine without the learner's GPU."""
    return {g: {k: v.detach().cpu() for k, v in sd.items()} for g, sd in groups.items()}


def peak_memory_metrics(device: torch.device) -> dict[str, float]:
    """`gpu/peak_mem_gb`: the most CUDA memory torch has held on `device` since the last reset
    (then reset, so each step reports its own peak); empty on the CPU."""
    if device.type != "cuda":
        return {}
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    torch.cuda.reset_peak_memory_stats(device)
    return {"gpu/peak_mem_gb": float(peak)}
