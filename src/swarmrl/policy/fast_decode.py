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
        """ids, pos [A, Q]; mask None or [A, 1, Q, W] bool (kvcache.decode_mask; speculative.block_mask)
        -> logits [A, Q, V], the cache Q columns longer: through the fast step where it has been
        found equal to model(...) (Q = 1: bitwise; Q > 1: to float rounding), else through model(...)."""
        if not self.applies(ids, cache):
            return self._reference(ids, mask, pos, cache)
        p = next(self.model.parameters())
        key = (type(self.model), self.lora, p.dtype, p.device.type, mask is None, ids.shape[1] > 1,
               torch.is_autocast_enabled(p.device.type), torch.get_default_dtype(), self.config)
        verdict = _VERDICTS.get(key)
        if verdict is None:
            _VERDICTS[key], ref = self._check(ids, mask, pos, cache)
            return ref
        return self._step(ids, mask, pos, cache) if verdict else self._reference(ids, mask, pos, cache)

    @staticmethod
    def applies(ids: torch.Tensor, cache) -> bool:
        return (not getattr(cache, "offloading", False)
                and all(type(layer) is ReservedLayer for layer in cache.layers))

    def _reference(self, ids, mask, pos, cache) -> torch.Tensor:
        q = ids.shape[1]
        return self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=q,
                          **{self.cache_kw: cache}).logits[:, -q:]

    def _check(self, ids, mask, pos, cache) -> tuple[bool, torch.Tensor]:
        """Run this step, then model(...) from the same cache state: (equal logits and
        keys/values, model(...)'s logits), the cache as model(...) left it."""
        lens, q = [layer._len for layer in cache.layers], ids.shape[1]
        fast = self._step(ids, mask, pos, cache)
        kv = [(layer.keys[..., -q:, :].clone(), layer.values[..., -q:, :].clone()) for layer in cache.layers]
        for layer, n in zip(cache.layers, lens):  # ReservedLayer: the next write goes to column n again
            layer._len = n
            layer._expose()
        ref = self._reference(ids, mask, pos, cache)
        same = _same if q == 1 else _close  # several columns: packed heads sum in another order
        same = same(fast, ref) and all(same(k, layer.keys[..., -q:, :]) and same(v, layer.values[..., -q:, :])
                                       for (k, v), layer in zip(kv, cache.layers))
        if not same:
            log.warning("the fast decode step differs from %s's forward under transformers %s; decoding "
                        "through the model's forward instead", type(self.model).__name__, transformers.__version__)
        return same, ref

    def _step(self, ids: torch.Tensor, mask: torch.Tensor | None, pos: torch.Tensor, cache) -> torch.Tensor:
        base = self.base
        h = base.embed_tokens(ids)  # [A, Q, H]
        cos, sin = base.rotary_emb(h, pos)  # [A, Q, head_dim] each
        biases: dict = {}  # query dtype -> the mask as SDPA's additive bias, built once for every layer
        for layer, kv in zip(base.layers, cache.layers):
            h = h + self._attention(layer.self_attn, layer.input_layernorm.forward(h), cos, sin, mask, kv, biases)
            mlp = layer.mlp
            x = layer.post_attention_layernorm.forward(h)
            h = h + mlp.down_proj.forward(mlp.act_fn(mlp.gate_proj.forward(x)) * mlp.up_proj.forward(x))
        return self.model.lm_head.forward(base.norm.forward(h))  # [A, Q, V]

    def _attention(self, attn, x, cos, sin, mask, kv, biases: dict) -> torch.Tensor:
        """x [A, Q, H] -> the attention block's output [A, Q, H], writing these columns' keys/values."""
        a, q = x.shape[:2]
        shape = (a, q, -1, attn.head_dim)
        query, k = attn.q_proj.forward(x).view(shape), attn.k_proj.forward(x).view(shape)
        if hasattr(attn, "q_norm"):  # Qwen3 normalises each head's query and key
            query, k = attn.q_norm.forward(query), attn.k_norm.forward(k)
        v = attn.v_proj.forward(x).view(shape).transpose(1, 2)
        query, k = self.rope(query.transpose(1, 2), k.transpose(1, 2), cos, sin)
        keys, values = kv.update(k, v)
        if mask is None:  # no padding (decode_mask): transformers' own call
            out, _ = sdpa_attention_forward(attn, query, keys, values, None, dropout=0.0, scaling=attn.scaling,
                                            sliding_window=None)
            return attn.o_proj.forward(out.reshape(a, q, -1).contiguous())
        g = query.shape[1] // keys.shape[1]
        if query.dtype not in biases:
            biases[query.dtype] = additive_bias(mask, g, query.dtype)
        return attn.o_proj.forward(packed_attention(query, keys, values, biases[query.dtype], attn.scaling))


def additive_bias(mask: torch.Tensor, g: int, dtype: torch.dtype) -> torch.Tensor:
    """mask [A, 1, Q, W] bool -> [A, 1, G*Q, W]: 0 where a query sees a column, -inf elsewhere, the
    Q rows repeated for each of the G query heads packed per key/value head (packed_attention).

    Why: SDPA turns a bool mask into exactly this bias inside every call (same values, so the
    same attention bit for bit); built once per decode call it serves every layer, and the
    copy for the G heads is made once rather than per layer."""
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
    return bias.repeat(1, 1, g, 1) if g > 1 else bias


def packed_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor,
                     scaling: float) -> torch.Tensor:
    """query [A, H, Q, D], keys/values [A, Hkv, W, D], bias [A, 1, G*Q, W] (additive_bias) -> [A, Q, H*D].

    Grouped-query attention with the G = H / Hkv query heads of each key/value head stacked as
    G*Q queries of that head, so the cache is read as it is; transformers repeats every key and
    value G times (a copy of the whole cache per layer). For one column (Q = 1) the result is
    transformers' bit for bit (the first step's check; tests/policy/test_fast_decode.py), and a
    decode call of the tiny default model 0.97x as long as through transformers' attention call
    (16 rows of 100-200 columns, one thread)."""
    a, h, q, d = query.shape
    g = h // keys.shape[1]
    packed = query.reshape(a, h // g, g * q, d)  # heads kv*G + i -> kv head kv, rows i*Q .. i*Q + Q - 1
    out = torch.nn.functional.scaled_dot_product_attention(packed, keys, values, attn_mask=bias,
                                                           scale=scaling)  # [A, Hkv, G*Q, D]
    return out.reshape(a, h, q, d).transpose(1, 2).reshape(a, q, h * d)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a, b)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal to float rounding: within 16 units in the last place of the largest magnitude."""
    tol = 16 * torch.finfo(a.dtype).eps * max(1.0, float(b.abs().max()))
    return bool((a - b).abs().max() <= tol)
