"""kvcache helpers: the bucket partition is the cheapest one; ReservedLayer behaves like DynamicLayer."""

from __future__ import annotations

import itertools
import random

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from swarmrl.policy.kvcache import (ReservedLayer, crop_left, decode_mask, length_buckets, prepared_decode_masks,
                                    row_columns, stack_left_padded)


def cost(buckets, lengths, overhead):
    return sum(overhead + len(b) * max(lengths[i] for i in b) for b in buckets)


def brute_force(lengths, overhead):
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    best = float("inf")
    for mask in itertools.product([0, 1], repeat=len(order) - 1):  # 1 = cut after position k
        buckets, cur = [], [order[0]]
        for k, cut in enumerate(mask):
            if cut:
                buckets.append(cur)
                cur = []
            cur.append(order[k + 1])
        best = min(best, cost(buckets + [cur], lengths, overhead))
    return best


def test_length_buckets_is_the_cheapest_contiguous_partition():
    rng = random.Random(0)
    for _ in range(40):
        lengths = [rng.randint(1, 300) for _ in range(rng.randint(1, 9))]
        overhead = rng.choice([0, 50, 300, 5000])
        buckets = length_buckets(lengths, overhead)
        assert sorted(i for b in buckets for i in b) == list(range(len(lengths)))
        assert cost(buckets, lengths, overhead) == brute_force(lengths, overhead)


def test_length_buckets_by_hand():
    # 80-token prompts next to 260-token ones: padding the four short rows costs 4*180 = 720 > 300.
    assert length_buckets([80, 260, 80, 80, 80], 300) == [[0, 2, 3, 4], [1]]
    assert length_buckets([80, 260, 80, 80, 80], 1000) == [[0, 2, 3, 4, 1]]


def test_reserved_layer_matches_dynamic_layer():
    g = torch.Generator().manual_seed(0)
    k, v = torch.randn(3, 2, 5, 4, generator=g), torch.randn(3, 2, 5, 4, generator=g)
    dyn, res = DynamicLayer(), ReservedLayer.stacked([(k, v)], reserve=2)
    dyn.update(k, v)
    for step in range(4):  # the 4th update runs past the reserve and must still work
        nk, nv = torch.randn(3, 2, 1, 4, generator=g), torch.randn(3, 2, 1, 4, generator=g)
        a, b = dyn.update(nk, nv), res.update(nk, nv)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    sel = torch.tensor([2, 0])
    dyn.batch_select_indices(sel)
    res.batch_select_indices(sel)
    assert torch.equal(dyn.keys, res.keys) and res.get_seq_length() == 9
    res.crop_left(3)
    assert torch.equal(res.keys, dyn.keys[..., 3:, :]) and torch.equal(res.values, dyn.values[..., 3:, :])
    res.batch_select_indices(torch.tensor([1]))  # on the cropped view, then writing into the rest of the reserve
    res.update(nk[:1], nv[:1])
    assert torch.equal(res.keys, torch.cat([dyn.keys[1:, :, 3:], nk[:1]], dim=-2))


def test_reserved_layer_grows_by_half_when_several_columns_run_past_the_reserve():
    g = torch.Generator().manual_seed(2)
    k, v = torch.randn(2, 2, 6, 4, generator=g), torch.randn(2, 2, 6, 4, generator=g)
    dyn, res = DynamicLayer(), ReservedLayer.stacked([(k, v)], reserve=2)  # room for 8 columns
    dyn.update(k, v)
    for n, room in ((5, 15), (3, 15), (2, 23)):  # 6+5 > 8: 11 + 8 // 2; 14 fits; 16 > 15: 16 + 15 // 2
        nk, nv = torch.randn(2, 2, n, 4, generator=g), torch.randn(2, 2, n, 4, generator=g)
        a, b = dyn.update(nk, nv), res.update(nk, nv)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and res._k.shape[-2] == room


def test_row_columns_copies_one_rows_columns_in_every_layer():
    g = torch.Generator().manual_seed(1)
    layers = [(torch.randn(3, 2, 6, 4, generator=g), torch.randn(3, 2, 6, 4, generator=g)) for _ in range(2)]
    cache = DynamicCache(ddp_cache_data=layers)
    cols = torch.tensor([1, 2, 4, 5])  # a hole at column 3
    got = row_columns(cache, 2, cols)
    for (k, v), (gk, gv) in zip(layers, got):
        assert torch.equal(gk, k[2][:, [1, 2, 4, 5]]) and torch.equal(gv, v[2][:, [1, 2, 4, 5]])
        assert gk.shape == (2, 4, 4) and gk.is_contiguous()
    got[0][0].zero_()  # a copy: the cache is untouched
    assert cache.layers[0].keys[2, :, 1].abs().sum() > 0


def test_stack_left_padded_pads_on_the_left_with_zeros():
    a, b = DynamicCache(), DynamicCache()
    a.update(torch.ones(2, 1, 3, 2), torch.ones(2, 1, 3, 2), 0)
    b.update(2 * torch.ones(1, 1, 5, 2), 2 * torch.ones(1, 1, 5, 2), 0)
    out = stack_left_padded([a, b], reserve=4)
    keys = out.layers[0].keys  # [3, 1, 5, 2]
    assert keys.shape == (3, 1, 5, 2)
    assert (keys[:2, :, :2] == 0).all() and (keys[:2, :, 2:] == 1).all() and (keys[2] == 2).all()
    assert crop_left(out, 2) and out.layers[0].keys.shape[-2] == 3
    plain = DynamicCache()
    plain.update(torch.ones(1, 1, 3, 2), torch.ones(1, 1, 3, 2), 0)
    assert not crop_left(plain, 1) and plain.layers[0].keys.shape[-2] == 3  # plain DynamicLayers are left alone


def tiny_qwen3(attn_implementation="sdpa", **extra):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    cfg = Qwen3Config(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=64, max_position_embeddings=128, **extra)
    cfg._attn_implementation = attn_implementation
    return Qwen3ForCausalLM(cfg).eval()


def test_decode_mask_is_the_mask_transformers_builds_for_a_one_token_query():
    import inspect

    from transformers.masking_utils import create_causal_mask
    model = tiny_qwen3()
    w = 7
    kw = "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"  # from 5.24 / before
    for attn in (torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 1, 1], [0, 1, 1, 1, 1, 1, 1]]),  # pads, holes
                 torch.ones(3, w, dtype=torch.long)):  # no padding: transformers returns None
        cache = DynamicCache(ddp_cache_data=[(torch.zeros(3, 2, w - 1, 8), torch.zeros(3, 2, w - 1, 8))] * 2)
        want = create_causal_mask(config=model.config, inputs_embeds=torch.zeros(3, 1, 32), attention_mask=attn,
                                  position_ids=attn.sum(-1, keepdim=True) - 1, **{kw: cache})
        got = decode_mask(attn)
        assert (got is None) == (want is None) == bool(attn.all())
        if want is not None:
            assert got.dtype == want.dtype == torch.bool and torch.equal(got, want)
            assert got.shape == (3, 1, 1, w) and not got[0, 0, 0, :2].any() and got[0, 0, 0, 2:].all()


def test_prepared_masks_only_for_transformers_sdpa_models_with_full_attention():
    assert prepared_decode_masks(tiny_qwen3())
    assert not prepared_decode_masks(tiny_qwen3("eager"))  # eager takes an additive float mask
    assert not prepared_decode_masks(tiny_qwen3(layer_types=["full_attention", "sliding_attention"],
                                                use_sliding_window=True, sliding_window=4))
    assert not prepared_decode_masks(torch.nn.Linear(2, 2))  # not a transformers model
