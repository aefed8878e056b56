"""Mixed-adapter LoRA batches in two matmuls per layer instead of PEFT's loop over the adapters.

Why: isolated policies (policy/sharing.py `LoraPolicies`) sample every role in one batch, each row
through its own adapter. PEFT's `adapter_names` path loops over the adapters in every LoRA layer
(gather the rows, two matmuls, scale, scatter back): about ten operations per adapter and layer,
so with 4 adapters a decode step of the tiny model runs over a thousand more operations than the
same step without adapters, 3-4x its time on a CPU (on an H200, 134 ms against 29 ms a step for
Qwen3-0.6B). Here every LoRA layer runs all n adapters' A at once and keeps each row's own:

    h = (x @ [A_1; ..; A_n]^T) * M            M[i] = 1 on row i's adapter's R columns, else 0
    out = base(x) + h @ [s_1 B_1, .., s_n B_n]^T

with the adapters' A and scaled B concatenated once per weight version (lower ranks padded with
zeros to R). The n-1 other adapters' columns cost n x the LoRA matmuls (small next to the base
layer's at LoRA ranks) and no per-row copy of any weight, so memory does not grow with the rows.

Not bitwise PEFT's: the matmuls sum in another order and the scale multiplies B first (the
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
        self.weights = [w for m in layers for n in names for w in (m.lora_A[n].weight, m.lora_B[n].weight)]
        self.index = {n: i for i, n in enumerate(names)}
        self.version: tuple | None = None
        self.rank = max(m.r[n] for m in layers for n in names)  # R: every adapter padded to it
        self.stacks: list[tuple[torch.Tensor, torch.Tensor]] = []  # per layer: A [n*R, in], s*B [out, n*R]
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

    def _stack(self) -> None:
        """Restack when any adapter weight changed in place since the last stack (an update)."""
        version = tuple(w._version for w in self.weights)  # in-place updates bump these
        if version == self.version:
            return
        self.stacks = []
        for m in self.layers:  # adapter i's rank takes columns i*R .. i*R + r_i; zeros pad to R
            w = m.lora_A[self.names[0]].weight
            a = w.new_zeros(len(self.names) * self.rank, m.in_features)  # [n*R, in]
            b = w.new_zeros(m.out_features, len(self.names) * self.rank)  # [out, n*R]
            for i, n in enumerate(self.names):
                a[i * self.rank:i * self.rank + m.r[n]] = m.lora_A[n].weight.detach()
                b[:, i * self.rank:i * self.rank + m.r[n]] = m.lora_B[n].weight.detach() * m.scaling[n]
            self.stacks.append((a, b))
        self.version = version

    @contextmanager
    def rows(self, adapters: list[str]) -> Iterator[None]:
        """Within: the model's LoRA layers run row i through adapter `adapters[i]` (a forward of
        batch len(adapters), [B, T, in] inputs). Eval mode only: no dropout is applied.

        The row mask is built again only when the rows change (a decode step usually keeps
        them), and the weights restacked only if an adapter changed since: a stream lives within
        one rollout step, and updates come between steps."""
        if any(m.training and any(float(getattr(d, "p", 0.0)) > 0 for d in m.lora_dropout.values())
               for m in self.layers):
            raise RuntimeError("batched adapters skip LoRA dropout: run the model in eval mode")
        if tuple(adapters) != self.rows_key:
            self._stack()
            a0 = self.stacks[0][0]
            mask = a0.new_zeros(len(adapters), 1, len(self.names), self.rank)  # [B, 1, n, R]
            mask[torch.arange(len(adapters)), 0, [self.index[a] for a in adapters]] = 1.0
            mask = mask.flatten(2)  # [B, 1, n*R]: 1 on the columns of the row's own adapter
            self.forwards = [_batched(m, a, b, mask) for m, (a, b) in zip(self.layers, self.stacks)]
            self.rows_key = tuple(adapters)
        for m, forward in zip(self.layers, self.forwards):
            m.forward = forward
        try:
            yield
        finally:
            for m in self.layers:
                del m.forward  # the class's forward again


def _batched(m: torch.nn.Module, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor):
    """A LoRA layer's forward with each row's own adapter: a [n*R, in], b [out, n*R], mask [B, 1, n*R]."""
    def forward(x: torch.Tensor, *args, **kwargs) -> torch.Tensor:  # x [B, T, in]
        if x.dim() != 3 or x.shape[0] != mask.shape[0]:  # the mask would broadcast into nonsense
            raise ValueError(f"batched adapters expect [{mask.shape[0]}, T, in] inputs, got {tuple(x.shape)} in a "
                             f"LoRA layer of this model: set sampler.batched_adapters=false (PEFT's own loop)")
        result = m.base_layer(x, *args, **kwargs)  # [B, T, out]
        h = torch.nn.functional.linear(x.to(a.dtype), a) * mask  # [B, T, n*R], other adapters' columns 0
        return result + torch.nn.functional.linear(h, b).to(result.dtype)
    return forward
