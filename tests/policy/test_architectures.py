"""The sampler's KV handling on the architectures real policies come in, as tiny random models:
batched rows that join and drop out decode exactly as one prompt alone, and an agent's next turn
on its saved KV prefix equals a fresh prefill of the whole prompt (policy/sampler.py DecodeStream,
policy/kvcache.py). Sliding-window variants (window 8, shorter than the prompts) check the
column layout that window relies on; architectures without per-column attention KV are refused."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import (Gemma2Config, Gemma2ForCausalLM, GemmaConfig, GemmaForCausalLM, LlamaConfig,
                          LlamaForCausalLM, MambaConfig, MambaForCausalLM, MistralConfig, MistralForCausalLM,
                          Phi3Config, Phi3ForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

from swarmrl.policy.kvcache import UnsupportedArchitecture, attention_layout
from swarmrl.policy.model import _wrap
from swarmrl.policy.sampler import HFSampler
from swarmrl.policy.tokenizer import build_tokenizer

WINDOW = 8
# name -> (config class, model class, config fields beyond the common ones, expected layout)
ARCHS = {
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, dict(head_dim=8), "full"),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM, {}, "full"),
    "llama": (LlamaConfig, LlamaForCausalLM, {}, "full"),
    "mistral": (MistralConfig, MistralForCausalLM, dict(sliding_window=None), "full"),
    "phi3": (Phi3Config, Phi3ForCausalLM, {}, "full"),
    "gemma": (GemmaConfig, GemmaForCausalLM, dict(head_dim=8), "full"),
    # sliding window on every layer (Mistral 7B v0.1, Phi-3 mini) or on every other one (Gemma 2,
    # which also soft-caps attention and final logits)
    "mistral-sliding": (MistralConfig, MistralForCausalLM, dict(sliding_window=WINDOW), "sliding"),
    "phi3-sliding": (Phi3Config, Phi3ForCausalLM, dict(sliding_window=WINDOW), "sliding"),
    "gemma2": (Gemma2Config, Gemma2ForCausalLM, dict(head_dim=8, sliding_window=WINDOW), "sliding"),
}
MAX_NEW = 10


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny matrices: one thread is ~10x faster than two on shared cores (the whole file: ~10 s)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


def tiny(tokenizer, name):
    config_cls, model_cls, extra, _ = ARCHS[name]
    cfg = config_cls(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, intermediate_size=64, max_position_embeddings=256,
                     pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
                     **extra)
    torch.manual_seed(0)
    model = model_cls(cfg).float().eval()
    with torch.no_grad():  # larger weights: every position's distribution distinct (test_sampler.py)
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3)
    return _wrap(model, tokenizer)


@pytest.fixture(scope="module", params=list(ARCHS))
def arch(request, tokenizer):
    return request.param, tiny(tokenizer, request.param)


def prompts_of_lengths(lengths, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 250, (n,), generator=g).tolist() for n in lengths]


def reference(policy, prompt, ids, temperature):
    """One forward over prompt + ids, no cache: (argmax token, log p_T(id)) at each generated position."""
    with torch.no_grad():
        logits = policy.model(input_ids=torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float()  # [G, V]
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.argmax(-1).tolist(), logp.gather(-1, torch.tensor(ids).unsqueeze(-1)).squeeze(-1)


def alone(policy, prompt, greedy, temperature, row_seed, n=MAX_NEW):
    return HFSampler(policy, temperature=temperature).generate([prompt], n, seed=0, greedy=greedy,
                                                               row_seeds=[row_seed])[0]


def drain(stream):
    out = {}
    while stream.busy():
        out.update(stream.step())
    return out


def cut(ids, stop):
    return ids[:ids.index(stop) + 1] if stop in ids else ids


def check(policy, prompt, got, want, greedy, temperature):
    """`got` (batched / reused) == `want` (alone / fresh) token for token, and both == no-cache recomputation."""
    assert got.ids == want.ids
    # float32 batched vs alone: sums in another order (1.07e-5 seen on a log-prob of -3.26): 1e-5 relative
    assert torch.allclose(torch.tensor(got.logprobs), torch.tensor(want.logprobs), rtol=1e-5, atol=1e-5)
    argmax, lp = reference(policy, prompt, got.ids, temperature)
    assert torch.allclose(torch.tensor(got.logprobs), lp, atol=1e-4)
    if greedy:
        assert got.ids == argmax


def test_layouts(arch):
    name, policy = arch
    assert attention_layout(policy.model) == ARCHS[name][3]


@pytest.mark.parametrize("greedy,temperature", [(True, 1.0), (False, 0.8)], ids=["greedy", "sampled"])
def test_rows_joining_and_dropping_out_decode_as_if_alone(arch, greedy, temperature):
    _, policy = arch
    prompts = prompts_of_lengths([5, 23, 9, 14, 2], seed=3)  # 23 and 14 > the sliding window
    seeds = [100 + i for i in range(len(prompts))]
    # Alone, the rows run to MAX_NEW whatever they emit (a random model may write the turn's end
    # token anywhere); the stream then stops on `stop`, and each row is compared with its solo
    # tokens cut at the same stop.
    never = dataclasses.replace(policy, stop_id=-1)
    solo = [alone(never, x, greedy, temperature, s) for x, s in zip(prompts, seeds)]
    stop = solo[0].ids[2]  # row 0 ends at its 3rd token, so do others that emit it: rows leave mid-batch
    pol = dataclasses.replace(policy, stop_id=stop)
    stream = HFSampler(pol, temperature=temperature).stream(MAX_NEW, greedy=greedy, admit_fraction=0.0)
    stream.add(0, prompts[0], row_seed=seeds[0])
    stream.add(1, prompts[1], row_seed=seeds[1])
    out = dict(stream.step())
    joined = 0
    for i in range(2, len(prompts)):  # the others join a running batch, one per step
        stream.add(i, prompts[i], row_seed=seeds[i])
        out.update(stream.step())
        joined += len(stream.rows) > 1
    out.update(drain(stream))
    assert joined >= 2
    assert 1 <= sum(not out[i].hit_cap for i in out) < len(prompts)  # some rows dropped out early, not all
    for i, (prompt, s) in enumerate(zip(prompts, solo)):
        n = len(cut(s.ids, stop))
        want = dataclasses.replace(s, ids=s.ids[:n], logprobs=s.logprobs[:n])
        check(policy, prompt, out[i], want, greedy, temperature)


@pytest.mark.parametrize("greedy,temperature", [(True, 1.0), (False, 0.8)], ids=["greedy", "sampled"])
def test_next_turn_on_the_saved_prefix_equals_a_fresh_prefill(arch, greedy, temperature):
    _, policy = arch
    first_prompts = dict(zip("abc", prompts_of_lengths([11, 4, 17], seed=9)))
    obs = {"a": [7, 8, 9], "b": [10, 11, 12, 13, 14], "c": [15]}
    stream = HFSampler(policy, temperature=temperature).stream(6, greedy=greedy)
    for i, (k, p) in enumerate(first_prompts.items()):
        stream.add(k + "1", p, row_seed=i, key=k)
    first = drain(stream)
    assert set(stream.prefix) == set("abc")
    nxt = {k: p + first[k + "1"].ids + obs[k] for k, p in first_prompts.items()}  # 17 .. 29 tokens
    ran = []
    orig = stream._prefill_part
    stream._prefill_part = lambda part: ran.append([len(x) for _, x, _ in part]) or orig(part)
    for i, k in enumerate("abc"):
        stream.add(k + "2", nxt[k], row_seed=10 + i, key=k)
    second = drain(stream)
    # the saved path really ran: only the last generated token and the observation are new
    assert sorted(n for part in ran for n in part) == sorted(1 + len(o) for o in obs.values())
    for i, k in enumerate("abc"):
        fresh = alone(policy, nxt[k], greedy, temperature, 10 + i, n=6)  # no key: the whole prompt prefilled
        check(policy, nxt[k], second[k + "2"], fresh, greedy, temperature)


def test_an_architecture_without_attention_kv_is_refused_with_the_setting_that_avoids_it(tokenizer):
    cfg = MambaConfig(vocab_size=len(tokenizer), hidden_size=16, state_size=4, num_hidden_layers=1,
                      pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    policy = _wrap(MambaForCausalLM(cfg).eval(), tokenizer)
    with pytest.raises(UnsupportedArchitecture, match=r"MambaForCausalLM.*linear_attention.*sampler\.engine=vllm"):
        HFSampler(policy)
