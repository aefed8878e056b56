"""One decode step of a Qwen3 / Qwen2 / Llama / Mistral model without transformers' module machinery.

Why: a decode step of the tiny default model (4 layers, 16 rows of ~200 cached columns, one CPU
thread) costs 2.7 ms through `model(...)` and 2.2 ms here (benchmarks/decode_step.py): a fifth
of it is Python around the tensor operations (module calls and hooks, keyword plumbing and
deprecation wrappers per layer, the attention interface lookup, the output dataclasses).
`FastDecode` calls the same operations on the same tensors in the same order, mostly through
transformers' own functions (the norms' `forward`, the rotary embedding, `apply_rotary_pos_emb`,
`sdpa_attention_forward`), so its logits and the keys/values it writes are bitwise the model's.

Bitwise is checked, not assumed: the first step of each kind (masked or not, per model class and
config, dtype, device and autocast state, once per process) runs both paths on the same cache and
compares logits and keys/values with `torch.equal`. Where they differ (another transformers
release ordering an operation otherwise), that kind goes through `model(...)` for good and a
warning says so. The sampler uses this only for one-token steps on its ReservedLayer caches
with ready-made masks (policy/kvcache.py `prepared_decode_masks`); on a PEFT model, only on the
transformers model inside it, within `AdapterBatch.rows` (policy/lora_batch.py), where every
LoRA layer's `forward` is the batched one that the model's own forward would also call.
"""

from __future__ import annotations

import logging
import sys

import torch
import transformers
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from swarmrl.policy.kvcache import ReservedLayer, cache_keyword, prepared_decode_masks

log = logging.getLogger(__name__)

SUPPORTED = {"Qwen3ForCausalLM", "Qwen2ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM"}
_VERDICTS: dict[tuple, bool] = {}  # check key -> fast path bitwise equal to model(...)


class FastDecode:
    """`FastDecode.for_model(model)`: a decode step for the model, or None where the model is not
    one of SUPPORTED (then call the model itself)."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.base = model.model
        self.rope = sys.modules[type(model).__module__].apply_rotary_pos_emb  # the model file's own
        self.cache_kw = cache_keyword(model)
        # PEFT's LoRA layers in place of the linear ones (batched by lora_batch.py around each call)
        self.lora = any(hasattr(m, "base_layer") for m in model.modules())
        self.config = model.config.to_json_string()  # options (biases, rope kinds) a check covers

    @classmethod
    def for_model(cls, model: torch.nn.Module) -> "FastDecode | None":
        if type(model).__name__ not in SUPPORTED or not type(model).__module__.startswith("transformers.models."):
            return None
        # SDPA, full attention in every layer (no sliding window): the sampler's ready-made masks
        if not prepared_decode_masks(model) or getattr(model.config, "pretraining_tp", 1) > 1:
            return None
        return cls(model)

    def __call__(self, ids: torch.Tensor, mask: torch.Tensor | None, pos: torch.Tensor, cache) -> torch.Tensor:
        """ids, pos [A, 1]; mask None or [A, 1, 1, W] bool (kvcache.decode_mask) -> logits [A, V],
        the cache one column longer: through the fast step where it has been found bitwise equal
        to model(...), else through model(...)."""
        if not self.applies(ids, cache):
            return self._reference(ids, mask, pos, cache)
        p = next(self.model.parameters())
        key = (type(self.model), self.lora, p.dtype, p.device.type, mask is None,
               torch.is_autocast_enabled(p.device.type), torch.get_default_dtype(), self.config)
        verdict = _VERDICTS.get(key)
        if verdict is None:
            _VERDICTS[key], ref = self._check(ids, mask, pos, cache)
            return ref
        return self._step(ids, mask, pos, cache) if verdict else self._reference(ids, mask, pos, cache)

    @staticmethod
    def applies(ids: torch.Tensor, cache) -> bool:
        return (ids.shape[1] == 1 and not getattr(cache, "offloading", False)
                and all(type(layer) is ReservedLayer for layer in cache.layers))

    def _reference(self, ids, mask, pos, cache) -> torch.Tensor:
        return self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1,
                          **{self.cache_kw: cache}).logits[:, -1]

    def _check(self, ids, mask, pos, cache) -> tuple[bool, torch.Tensor]:
        """Run this step, then model(...) from the same cache state: (equal logits and
        keys/values, model(...)'s logits), the cache as model(...) left it."""
        lens = [layer._len for layer in cache.layers]
        fast = self._step(ids, mask, pos, cache)
        kv = [(layer.keys[..., -1:, :].clone(), layer.values[..., -1:, :].clone()) for layer in cache.layers]
        for layer, n in zip(cache.layers, lens):  # ReservedLayer: the next write goes to column n again
            layer._len = n
            layer._expose()
        ref = self._reference(ids, mask, pos, cache)
        same = torch.equal(fast, ref) and all(torch.equal(k, layer.keys[..., -1:, :]) and
                                              torch.equal(v, layer.values[..., -1:, :])
                                              for (k, v), layer in zip(kv, cache.layers))
        if not same:
            log.warning("the fast decode step differs from %s's forward under transformers %s; decoding "
                        "through the model's forward instead", type(self.model).__name__, transformers.__version__)
        return same, ref

    def _step(self, ids: torch.Tensor, mask: torch.Tensor | None, pos: torch.Tensor, cache) -> torch.Tensor:
        base = self.base
        h = base.embed_tokens(ids)  # [A, 1, H]
        cos, sin = base.rotary_emb(h, pos)  # [A, 1, head_dim] each
        for layer, kv in zip(base.layers, cache.layers):
            h = h + self._attention(layer.self_attn, layer.input_layernorm.forward(h), cos, sin, mask, kv)
            mlp = layer.mlp
            x = layer.post_attention_layernorm.forward(h)
            h = h + mlp.down_proj.forward(mlp.act_fn(mlp.gate_proj.forward(x)) * mlp.up_proj.forward(x))
        h = base.norm.forward(h)
        return self.model.lm_head.forward(h[:, -1:, :])[:, -1]  # [A, V]

    def _attention(self, attn, x, cos, sin, mask, kv) -> torch.Tensor:
        """x [A, 1, H] -> the attention block's output [A, 1, H], writing this column's keys/values."""
        shape = (x.shape[0], 1, -1, attn.head_dim)
        q, k = attn.q_proj.forward(x).view(shape), attn.k_proj.forward(x).view(shape)
        if hasattr(attn, "q_norm"):  # Qwen3 normalises each head's query and key
            q, k = attn.q_norm.forward(q), attn.k_norm.forward(k)
        v = attn.v_proj.forward(x).view(shape).transpose(1, 2)
        q, k = self.rope(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        keys, values = kv.update(k, v)
        out, _ = sdpa_attention_forward(attn, q, keys, values, mask, dropout=0.0, scaling=attn.scaling,
                                        sliding_window=None)
        return attn.o_proj.forward(out.reshape(x.shape[0], 1, -1).contiguous())
