"""FastDecode (policy/fast_decode.py): on each supported architecture, a sampled multi-turn stream
(rows joining and leaving, saved prefixes, masked and unmasked steps) gives the same tokens and
log-probs to the last bit with it and without it; a step that differs from the model's forward is
caught by the first check and never used; other models keep the model's forward."""

from __future__ import annotations

import logging

import pytest
import torch
from peft import LoraConfig, get_peft_model

from swarmrl.policy import fast_decode
from swarmrl.policy.fast_decode import FastDecode
from swarmrl.policy.sampler import HFSampler
from test_architectures import one_thread, prompts_of_lengths, tiny, tokenizer  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def fresh_verdicts(monkeypatch):
    monkeypatch.setattr(fast_decode, "_VERDICTS", {})


def multi_turn(policy, use_fast: bool, turns: int = 3):
    """Four agents of different prompt lengths (left padding: masked steps), then one agent alone
    (no padding: unmasked steps); sampled with row seeds. -> {agent: [(ids, logprobs)]}, stream."""
    prompts = dict(zip("abcd", prompts_of_lengths([5, 12, 3, 20], seed=11)))
    stream = HFSampler(policy, temperature=0.8).stream(6)
    if not use_fast:
        stream.fast = None
    out = {k: [] for k in prompts}
    for turn in range(turns):
        for i, (k, prompt) in enumerate(prompts.items()):
            stream.add((k, turn), prompt, row_seed=100 * turn + i, key=k)
        while stream.busy():
            for (k, _), s in stream.step():
                out[k].append((s.ids, s.logprobs))
                prompts[k] = prompts[k] + s.ids + [40 + turn, 41]
    for solo in range(2):  # the first unmasked step is the check, later ones the fast step itself
        stream.add(solo, prompts["a"], row_seed=7 + solo)
        while stream.busy():
            for _, s in stream.step():
                out[solo] = [(s.ids, s.logprobs)]
    return out, stream


@pytest.mark.parametrize("name", ["qwen3", "qwen2", "llama", "mistral"])
def test_streams_sample_the_same_bits_with_and_without_the_fast_step(tokenizer, name, monkeypatch):  # noqa: F811
    policy = tiny(tokenizer, name)
    calls = []
    step = FastDecode._step
    monkeypatch.setattr(FastDecode, "_step", lambda self, *a: calls.append(a[1] is None) or step(self, *a))
    fast, stream = multi_turn(policy, use_fast=True)
    assert stream.fast is not None
    assert sorted(fast_decode._VERDICTS.values()) == [True, True]  # a masked and an unmasked kind, both equal
    assert True in calls and False in calls and len(calls) > 20  # both kinds ran through the fast step
    slow, _ = multi_turn(policy, use_fast=False)
    assert fast == slow


def test_a_step_that_differs_is_caught_and_never_used(tokenizer, monkeypatch, caplog):  # noqa: F811
    policy = tiny(tokenizer, "qwen3")
    step = FastDecode._step
    calls = []

    def off_by_a_bit(self, *a):
        calls.append(1)
        return step(self, *a) * (1 + 2**-20)

    monkeypatch.setattr(FastDecode, "_step", off_by_a_bit)
    with caplog.at_level(logging.WARNING, logger="swarmrl.policy.fast_decode"):
        fast, _ = multi_turn(policy, use_fast=True)
    assert sorted(fast_decode._VERDICTS.values()) == [False, False]
    assert len(calls) == 2  # only the two checks
    assert "differs from Qwen3ForCausalLM's forward" in caplog.text
    slow, _ = multi_turn(policy, use_fast=False)
    assert fast == slow


def test_other_models_keep_their_forward(tokenizer):  # noqa: F811
    policy = tiny(tokenizer, "phi3")  # fused projections: not one of SUPPORTED
    assert FastDecode.for_model(policy.model) is None
    assert FastDecode.for_model(tiny(tokenizer, "mistral-sliding").model) is None  # sliding-window layers
    qwen = tiny(tokenizer, "qwen3")
    peft = get_peft_model(qwen.model, LoraConfig(r=2, target_modules=["q_proj"]))
    assert FastDecode.for_model(peft) is None  # adapters route through PEFT's layers
    eager = tiny(tokenizer, "llama")
    eager.model.config._attn_implementation = "eager"
    assert FastDecode.for_model(eager.model) is None


def test_a_stream_without_ready_made_masks_takes_the_models_forward(tokenizer, monkeypatch):  # noqa: F811
    monkeypatch.setattr("swarmrl.policy.sampler.prepared_decode_masks", lambda model: False)
    _, stream = multi_turn(tiny(tokenizer, "qwen3"), use_fast=True, turns=1)
    assert stream.fast is None and not fast_decode._VERDICTS


def test_the_additive_bias_is_the_mask_as_sdpa_reads_it_for_each_packed_head():
    mask = torch.tensor([[[[True, False, True]]], [[[False, True, True]]]])  # [A=2, 1, Q=1, W=3]
    bias = fast_decode.additive_bias(mask, 2, torch.float32)  # G = 2 query heads per key/value head
    inf = float("-inf")
    assert torch.equal(bias, torch.tensor([[[[0.0, inf, 0.0], [0.0, inf, 0.0]]],
                                           [[[inf, 0.0, 0.0], [inf, 0.0, 0.0]]]]))


def test_packed_attention_of_one_column_is_softmax_attention_by_hand():
    torch.manual_seed(0)
    a, h, hkv, w, d = 3, 4, 2, 5, 8
    query, keys, values = torch.randn(a, h, 1, d), torch.randn(a, hkv, w, d), torch.randn(a, hkv, w, d)
    mask = torch.ones(a, 1, 1, w, dtype=torch.bool)
    mask[1, ..., :2] = False  # row 1: two padding columns
    out = fast_decode.packed_attention(query, keys, values, fast_decode.additive_bias(mask, h // hkv, torch.float32),
                                       d ** -0.5)  # [A, 1, H*D]
    for r in range(a):
        for head in range(h):
            kv = head // (h // hkv)  # the key/value head this query head shares
            cols = mask[r, 0, 0].nonzero().squeeze(-1)
            p = torch.softmax(query[r, head, 0] @ keys[r, kv, cols].T * d ** -0.5, -1)
            torch.testing.assert_close(out[r, 0, head * d:(head + 1) * d], p @ values[r, kv, cols])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_cuda_both_kinds_of_step_pass_their_check(tokenizer):  # noqa: F811
    """CUDA's attention kernels are not the CPU's: the packed one-column step must still equal the
    model's forward bit for bit there, or the stream decodes every such step through model(...)."""
    policy = tiny(tokenizer, "qwen3")
    policy.model.to("cuda")
    multi_turn(policy, use_fast=True)
    assert sorted(fast_decode._VERDICTS.values()) == [True, True]  # masked and unmasked, both taken
