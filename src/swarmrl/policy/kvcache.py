"""KV-cache helpers for the sampler's decode loop (policy/sampler.py).

A wave of agent turns is a ragged batch: 80-token expert prompts next to 260-token CEO
prompts, 1-token `<wait/>` replies next to 60-token hiring turns. These helpers keep the
cost of such a batch close to the tokens it really holds:
  - `length_buckets`: prefill in buckets of similar length instead of padding all to the longest;
  - `prefill_parts`: an admission as prefill calls, fresh prompts apart from continuations;
  - `stack_left_padded`: stack the buckets' caches into one left-padded batch for decoding;
  - `ReservedLayer`: keys/values in a buffer with room for the whole turn, so each decode step
    writes one column in place (transformers' DynamicLayer copies the whole cache per token);
  - `crop_left`: cut columns that became padding for every row once a long prompt finished;
  - `attention_layout`: which architectures this layout is exact for (checked before decoding);
  - `decode_mask`: a decode step's attention mask ready-made, where `prepared_decode_masks` allows.
"""

from __future__ import annotations

import inspect

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, get_layer_types_and_kwargs


class UnsupportedArchitecture(ValueError):
    """The model's layers cannot run on the sampler's stacked DynamicCache."""


def cache_keyword(module: torch.nn.Module) -> str:
    """The name under which `module.forward` takes a key/value cache: `cache` from transformers
    5.24, `past_key_values` before it and in remote-code models, which silently take an unknown
    `cache=` into **kwargs and fill a cache of their own."""
    base = module.get_base_model() if hasattr(module, "get_base_model") else module
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def attention_layout(model: torch.nn.Module) -> str:
    """'full' or 'sliding': how the sampler (policy/sampler.py DecodeStream) may lay out the
    model's KV cache; raises UnsupportedArchitecture for layers it cannot hold.

    The sampler keeps every layer as a plain DynamicLayer (keys/values of every column), left
    padded, with rows joining and leaving the batch. Exact for:
      - 'full': full causal attention in every layer (Qwen2/3, Llama, Mistral/Phi3 without a
        sliding window, Gemma): any layout whose mask hides the padding;
      - 'sliding': some layers attend to the last `sliding_window` positions only (Mistral
        v0.1, Phi-3 mini, Gemma 2, Qwen2 with use_sliding_window). transformers builds that
        window from column indices, not position ids, so it is right only while each row's
        real columns are contiguous: left padding keeps them so; a saved prefix continued in a
        batch with other rows (the layout [pad | past | pad | new]) would not, so the sampler
        prefills such continuations one row at a time. The cache keeps all columns (the mask
        hides those outside the window): more memory than transformers' sliding layers, same
        logits.
    Not exact, refused: chunked attention (Llama 4: chunks are aligned to absolute columns,
    which left padding shifts), recurrent/linear-attention, convolution and hybrid layers
    (Mamba, Jamba, Qwen3-Next, LFM2, ...: their state is not per-column keys/values), shared or
    indexed KV layers, and models that take no Cache object at all.
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    name = type(base).__name__
    config = getattr(base, "config", None)
    if config is None:  # not a transformers model (test doubles): nothing to check
        return "full"
    supports = getattr(type(base), "_supports_default_dynamic_cache", None)
    try:
        types = list(get_layer_types_and_kwargs(config.get_text_config(decoder=True))[0])
    except Exception as e:  # a config transformers cannot describe layer by layer
        raise UnsupportedArchitecture(_refusal(name, f"its layer types cannot be read ({e})")) from e
    if supports is not None and not supports():
        types.append("custom cache")
    other = sorted(set(types) - {"full_attention", "sliding_attention"})
    if other:
        raise UnsupportedArchitecture(_refusal(name, f"it has {', '.join(other)} layers"))
    return "sliding" if "sliding_attention" in types else "full"


def prepared_decode_masks(model: torch.nn.Module) -> bool:
    """Whether a decode step may hand the model its mask ready-made (`decode_mask`) instead of
    the [A, W] padding mask, from which transformers rebuilds the 4-D mask at every step: about
    0.3 ms a step, 6% of a decode step of the tiny model on 2 CPU cores. Only where the two
    are equal: transformers' own classes on SDPA attention with full causal attention in every
    layer (tests/policy/test_kvcache.py compares them through a real decode)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    if not type(base).__module__.startswith("transformers.models."):  # remote code builds its own masks
        return False
    try:
        types = get_layer_types_and_kwargs(config.get_text_config(decoder=True))[0]
    except Exception:  # noqa: BLE001 - a config transformers cannot describe layer by layer: keep its masks
        return False
    return all(t == "full_attention" for t in types)


def decode_mask(attn: torch.Tensor) -> torch.Tensor | None:
    """attn [A, W] (1 = a real column) -> the mask transformers builds for a one-token query on
    SDPA: None when no column is padding (SDPA then runs unmasked), else [A, 1, 1, W] bool.
    A 4-D mask is passed to the attention as it is (transformers' masking_utils)."""
    return None if bool(attn.all()) else attn.bool()[:, None, None, :]


def _refusal(name: str, why: str) -> str:
    return (f"{name}: the hf sampler cannot decode this architecture exactly, because {why}. Its decode "
            f"loop (policy/sampler.py) keeps one left-padded DynamicCache of per-column keys/values for "
            f"full- or sliding-window attention layers only; `sampler.batching=waves` and "
            f"`sampler.prefix_cache=false` still run that loop. Use `sampler.engine=vllm` (CUDA), "
            f"which runs the model through vLLM's own engine.")


def length_buckets(lengths: list[int], overhead_tokens: int) -> list[list[int]]:
    """Partition rows into prefill buckets of similar prompt length (row indices per bucket).

    One left-padded forward over a bucket costs about `rows * max_len` tokens of compute plus a
    fixed per-call overhead worth `overhead_tokens`. This is the exact minimum-cost partition of
    the length-sorted rows into contiguous buckets (dynamic programming, O(n^2) for the few
    hundred rows of a wave).
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    ls = [lengths[i] for i in order]
    n = len(ls)
    best = [0.0] + [float("inf")] * n  # best[j]: cheapest cost of the first j sorted rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):  # last bucket = sorted rows i..j-1, padded to ls[j-1]
            c = best[i] + overhead_tokens + (j - i) * ls[j - 1]
            if c < best[j]:
                best[j], cut[j] = c, i
    buckets, j = [], n
    while j > 0:
        buckets.append(order[cut[j]:j])
        j = cut[j]
    return buckets[::-1]


class ReservedLayer(DynamicLayer):
    """A DynamicLayer whose keys/values are views into a buffer with `reserve` free columns.

    `update` writes new columns in place; `keys`/`values` stay [B, heads, len, head_dim] views,
    so the model's attention code sees exactly what a DynamicLayer would give it.
    """

    @classmethod
    def stacked(cls, parts: list[tuple[torch.Tensor, torch.Tensor]], reserve: int) -> "ReservedLayer":
        """The (keys, values) of `parts` ([b_i, heads, w_i, head_dim] each) stacked along the batch,
        each left-padded with zeros to the widest, in a buffer with `reserve` free columns: every
        key and value is copied once, straight to its place (admissions run often)."""
        width = max(k.shape[-2] for k, _ in parts)
        k0, v0 = parts[0]
        rows = sum(k.shape[0] for k, _ in parts)
        layer = cls()
        layer.lazy_initialization(k0, v0)
        layer._k = k0.new_empty(rows, k0.shape[1], width + reserve, k0.shape[-1])  # [B, heads, W + reserve, head_dim]
        layer._v = v0.new_empty(rows, v0.shape[1], width + reserve, v0.shape[-1])
        r = 0
        for keys, values in parts:
            n, lead = keys.shape[0], width - keys.shape[-2]
            for buf, t in ((layer._k, keys), (layer._v, values)):
                buf[r:r + n, :, :lead].zero_()  # padding: zeros, as the mask hides them (never garbage: 0 x NaN)
                buf[r:r + n, :, lead:width] = t
            r += n
        layer._len = width
        layer._expose()
        return layer

    def _expose(self) -> None:
        self.keys, self.values = self._k[..., :self._len, :], self._v[..., :self._len, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        n = key_states.shape[-2]
        if self._len + n > self._k.shape[-2]:  # out of room (drafts' holes): half the size again spare
            room = self._len + n + self._k.shape[-2] // 2
            grow = lambda t: torch.nn.functional.pad(t, (0, 0, 0, room - t.shape[-2]))  # noqa: E731
            self._k, self._v = grow(self._k[..., :self._len, :]), grow(self._v[..., :self._len, :])
        self._k[..., self._len:self._len + n, :] = key_states
        self._v[..., self._len:self._len + n, :] = value_states
        self._len += n
        self._expose()
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        # index_select, not self._k[indices]: the same copy, 5-7x faster on CPU (a row-block
        # copy instead of the generic gather), and a decode step drops rows often.
        self._k, self._v = self._k.index_select(0, indices), self._v.index_select(0, indices)
        self._expose()

    def crop_left(self, n: int) -> None:
        self._k, self._v = self._k[..., n:, :], self._v[..., n:, :]
        self._len -= n
        self._expose()


def stack_left_padded(caches: list[DynamicCache], reserve: int) -> DynamicCache | None:
    """Stack per-bucket caches along the batch into one cache of ReservedLayers, left-padding
    each bucket to the widest (padding = zeros; the attention mask hides it). Returns None when
    a layer is not a plain DynamicLayer (sliding-window or static caches are not stacked)."""
    if not all(type(layer) in (DynamicLayer, ReservedLayer) and layer.is_initialized
               for c in caches for layer in c.layers):
        return None
    out = caches[0]
    out.layers = [ReservedLayer.stacked([(c.layers[i].keys, c.layers[i].values) for c in caches], reserve)
                  for i in range(len(out.layers))]
    return out


def row_columns(cache: DynamicCache, row: int, cols: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One row's keys and values at the columns `cols` [len], per layer: [(k, v)], each
    [heads, len, head_dim], a copy (index_select: 2-3x faster on CPU than indexing with cols)."""
    return [(layer.keys[row].index_select(1, cols), layer.values[row].index_select(1, cols)) for layer in cache.layers]


def crop_left(cache: DynamicCache, n: int) -> bool:
    """Drop the first n columns (all padding) of every layer; False (nothing done) unless every
    layer is a ReservedLayer."""
    if not all(isinstance(layer, ReservedLayer) for layer in cache.layers):
        return False
    for layer in cache.layers:
        layer.crop_left(n)
    return True


def prefill_parts(items: list[tuple], overhead_tokens: int | None, sliding: bool) -> list[list[tuple]]:
    """Rows (row, past or None) as prefill parts of (row, new tokens, past): rows without a past
    first, then those that extend one, each in `length_buckets` (one part each when
    `overhead_tokens` is None). Under a sliding window a row extending a past is a part alone:
    the window is counted in columns, and a batched continuation has holes in its row."""
    fresh = [(row, row.prompt, None) for row, past in items if past is None]
    cont = [(row, row.prompt[len(past.tokens):], past) for row, past in items if past is not None]
    parts = []
    for group in (fresh, cont):
        if not group:
            continue
        buckets = (length_buckets([len(x) for _, x, _ in group], overhead_tokens) if overhead_tokens is not None
                   else [list(range(len(group)))])
        if group is cont and sliding:
            buckets = [[i] for b in buckets for i in b]
        parts += [[group[i] for i in b] for b in buckets]
    return parts
