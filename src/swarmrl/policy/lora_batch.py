"""Mixed-adapter LoRA batches in two batched matmuls per layer instead of PEFT's loop over adapters.

Why: isolated policies (policy/sharing.py `LoraPolicies`) sample every role in one batch, each row
through its own adapter. PEFT's `adapter_names` path loops over the adapters in every LoRA layer
(gather the rows, two matmuls, scale, scatter back): about ten operations per adapter and layer,
so with 4 adapters a decode step of the tiny model runs over a thousand more operations than the
same step without adapters, 3-4x its time on a CPU (on an H200, 134 ms against 29 ms a step for
Qwen3-0.6B). Here every LoRA layer adds each row's own update at once,

    out[i] = base(x)[i] + (x[i] @ A[a_i]^T) @ (s[a_i] B[a_i])^T        (a_i: row i's adapter)

from the adapters' A and scaled B stacked once per weight version and gathered per row.

Not bitwise PEFT's: batched matmuls sum in another order and the scale multiplies B first (the
logits differ by about 1e-7 relative; tested to 1e-5). The behaviour log-probs are this
computation's own, so the PPO ratio starts at 1 up to that rounding, as between any sampler and
learner that batch differently. `sampler.batched_adapters=false` keeps PEFT's loop.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch


class AdapterBatch:
    """`AdapterBatch.for_model(model)`: batched mixed-adapter forwards for a PEFT model, or None
    where its layers are not plain LoRA Linear layers with every adapter on every layer."""

    def __init__(self, layers: list[torch.nn.Module], names: list[str]):
        self.layers, self.names = layers, names
        self.index = {n: i for i, n in enumerate(names)}
        self.version: tuple | None = None
        self.stacks: list[tuple[torch.Tensor, torch.Tensor]] = []  # per layer: A [n, r, in], s*B [n, out, r]
        self.rows_key: tuple | None = None  # the adapters of the rows `forwards` were built for
        self.forwards: list = []  # per layer: its forward for those rows

    @classmethod
    def for_model(cls, model: torch.nn.Module) -> "AdapterBatch | None":
        try:
            from peft import PeftModel
            from peft.tuners.lora.layer import Linear as LoraLinear
            from peft.tuners.lora.layer import LoraLayer
        except ImportError:
            return None
        if not isinstance(model, PeftModel):
            return None
        layers = [m for m in model.modules() if isinstance(m, LoraLayer)]
        if not layers or any(type(m) is not LoraLinear or m.lora_variant or m.merged for m in layers):
            return None
        names = sorted(layers[0].lora_A)
        if any(sorted(m.lora_A) != names or any(m.lora_A[n].bias is not None or m.lora_B[n].bias is not None
                                                 for n in names) for m in layers):
            return None
        return cls(layers, names)

    def _weights(self) -> tuple:
        return tuple(p._version for m in self.layers for n in self.names
                     for p in (m.lora_A[n].weight, m.lora_B[n].weight))

    def _stack(self) -> None:
        """Restack when any adapter weight changed in place since the last stack (an update)."""
        version = self._weights()
        if version == self.version:
            return
        self.stacks = []
        for m in self.layers:
            rank = max(m.r[n] for n in self.names)  # adapters of lower rank: zero rows add exactly nothing
            a = torch.zeros(len(self.names), rank, m.in_features, dtype=m.lora_A[self.names[0]].weight.dtype,
                            device=m.lora_A[self.names[0]].weight.device)  # [n, r, in]
            b = torch.zeros(len(self.names), m.out_features, rank, dtype=a.dtype, device=a.device)  # [n, out, r]
            for i, n in enumerate(self.names):
                a[i, :m.r[n]] = m.lora_A[n].weight.detach()
                b[i, :, :m.r[n]] = m.lora_B[n].weight.detach() * m.scaling[n]
            self.stacks.append((a, b))
        self.version = version

    @contextmanager
    def rows(self, adapters: list[str]) -> Iterator[None]:
        """Within: the model's LoRA layers run row i through adapter `adapters[i]` (a forward of
        batch len(adapters), [B, T, in] inputs). Eval mode only: no dropout is applied.

        The per-row weights are gathered again only when the rows change (a decode step usually
        keeps them), and the weights restacked only if an adapter changed since: a stream lives
        within one rollout step, and updates come between steps."""
        if any(m.training and any(float(getattr(d, "p", 0.0)) > 0 for d in m.lora_dropout.values())
               for m in self.layers):
            raise RuntimeError("batched adapters skip LoRA dropout: run the model in eval mode")
        if tuple(adapters) != self.rows_key:
            self._stack()
            idx = torch.tensor([self.index[a] for a in adapters], device=self.stacks[0][0].device)  # [B]
            self.forwards = [_batched(m, a.index_select(0, idx).transpose(1, 2), b.index_select(0, idx).transpose(1, 2))
                             for m, (a, b) in zip(self.layers, self.stacks)]
            self.rows_key = tuple(adapters)
        for m, forward in zip(self.layers, self.forwards):
            m.forward = forward
        try:
            yield
        finally:
            for m in self.layers:
                del m.forward  # the class's forward again


def _batched(m: torch.nn.Module, a: torch.Tensor, b: torch.Tensor):
    """A LoRA layer's forward with each row's own adapter: a [B, in, r], b [B, r, out]."""
    def forward(x: torch.Tensor, *args, **kwargs) -> torch.Tensor:  # x [B, T, in]
        result = m.base_layer(x, *args, **kwargs)  # [B, T, out]
        delta = torch.bmm(torch.bmm(x.to(a.dtype), a), b)  # [B, T, r] -> [B, T, out]
        return result + delta.to(result.dtype)
    return forward
