"""PromptPool and DecodeStream's shared prompts: a prompt that starts like one prefilled before
runs only its remainder, and samples what a full prefill samples (greedy, token for token)."""

from __future__ import annotations

import torch

from swarmrl.policy.prompt_pool import MIN_SHARED, PromptPool
from swarmrl.policy.sampler import HFSampler
from test_sampler import policy, prompts_of_lengths  # noqa: F401  (fixture)
from test_stream import BYTES_PER_TOKEN, alone, drain


def kv_of(n, heads=1, dim=2):
    """One layer's keys/values for n tokens; key column t holds t, so slices can be read back."""
    k = torch.arange(n, dtype=torch.float32).view(1, n, 1).expand(heads, n, dim).contiguous()
    return [(k, k.clone())]


def test_pool_returns_the_longest_stored_prefix_and_keeps_one_token_to_run():
    pool = PromptPool()
    base = list(range(100, 100 + MIN_SHARED))
    a, b = base + [1, 2, 3, 4], base + [1, 2, 9]
    pool.add(None, a, kv_of(len(a)))
    pool.add(None, b, kv_of(len(b)))
    tokens, kv = pool.longest(None, base + [1, 2, 3, 7, 8])  # shares 19 with a, 18 with b
    assert tokens == base + [1, 2, 3]
    assert kv[0][0].shape == (1, MIN_SHARED + 3, 2) and kv[0][0][0, -1, 0].item() == MIN_SHARED + 2
    # the prompt a itself: all but its last token, whose logits are the ones sampled from
    assert pool.longest(None, a)[0] == a[:-1]
    assert pool.hits == 2 and pool.shared_tokens == (MIN_SHARED + 3) + (MIN_SHARED + 3)


def test_pool_needs_min_shared_tokens_and_the_same_adapter():
    pool = PromptPool()
    base = list(range(MIN_SHARED))
    pool.add("a", base + [5, 6], kv_of(MIN_SHARED + 2))
    assert pool.longest("b", base + [5, 6, 7]) is None  # another adapter's keys/values differ
    assert pool.longest("a", [0] + base + [5]) is None  # first tokens differ
    assert pool.longest("a", base) is None  # would leave nothing to run past MIN_SHARED - 1
    assert PromptPool.lead("a", base) is None  # too short to be pooled at all
    assert pool.covers("a", base + [5]) and not pool.covers("a", base + [5, 7])


def test_pool_evicts_least_recently_used_and_counts_bytes():
    pool = PromptPool()
    seqs = [list(range(MIN_SHARED)) + [k, k] for k in range(3)]
    for s in seqs:
        pool.add(None, s, kv_of(len(s)))
    per = 2 * (MIN_SHARED + 2) * 2 * 4  # keys and values: L columns of 2 floats each
    assert pool.bytes == 3 * per
    pool.longest(None, seqs[0] + [1])  # seqs[0] is now the most recently used
    assert pool.evict() and pool.evict()
    assert [e.tokens for e in pool.entries.values()] == [seqs[0]] and pool.bytes == per
    assert pool.evict() and not pool.evict() and pool.bytes == 0 and not pool.index


def test_prompts_sharing_a_header_run_only_their_remainders_and_decode_as_if_alone(policy):  # noqa: F811
    header = prompts_of_lengths([24], seed=21)[0]
    tails = prompts_of_lengths([3, 7, 1, 5], seed=22)
    prompts = [header + t for t in tails] + prompts_of_lengths([30], seed=23)  # the last shares nothing
    stream = HFSampler(policy).stream(6, greedy=True)
    ran = []
    orig = stream._prefill_part
    stream._prefill_part = lambda part: ran.append(sorted(len(x) for _, x, _ in part)) or orig(part)
    for i, p in enumerate(prompts):
        stream.add(i, p)
    out = drain(stream)
    # first wave: the first header prompt and the unrelated one in full; then the other three
    # run what follows the longest common prefix with the first (its 24 header tokens)
    assert sorted(n for part in ran for n in part) == sorted([27, 30] + [len(t) for t in tails[1:]])
    assert stream.pool.hits == 3 and stream.pool.shared_tokens == 3 * 24
    for i, p in enumerate(prompts):
        want = alone(policy, p, 6)
        assert out[i].ids == want.ids
        assert torch.allclose(torch.tensor(out[i].logprobs), torch.tensor(want.logprobs), atol=1e-4)


def test_a_later_prompt_extends_a_pooled_one_across_admissions(policy):  # noqa: F811
    header = prompts_of_lengths([20], seed=31)[0]
    stream = HFSampler(policy).stream(4, greedy=True)
    stream.add(0, header + [1, 2])
    drain(stream)
    ran = []
    orig = stream._prefill_part
    stream._prefill_part = lambda part: ran.append([len(x) for _, x, _ in part]) or orig(part)
    stream.add(1, header + [1, 2, 3, 4])
    out = drain(stream)
    assert ran == [[2]]  # 22 tokens came from the pool
    assert out[1].ids == alone(policy, header + [1, 2, 3, 4], 4).ids


def test_sharing_off_prefills_in_full_and_samples_the_same_tokens(policy):  # noqa: F811
    header = prompts_of_lengths([18], seed=41)[0]
    prompts = [header + t for t in prompts_of_lengths([2, 6, 4], seed=42)]
    outs = {}
    for share in (True, False):
        stream = HFSampler(policy, temperature=0.8).stream(6, share_prompts=share)
        for i, p in enumerate(prompts):
            stream.add(i, p, row_seed=7 + i)
        outs[share] = drain(stream)
        assert (stream.pool is not None) == share
    for i in range(len(prompts)):
        assert outs[True][i].ids == outs[False][i].ids
        got, want = torch.tensor(outs[True][i].logprobs), torch.tensor(outs[False][i].logprobs)
        assert (got - want).abs().max().item() <= 1e-5


def test_pooled_prompts_count_under_the_cap_and_go_before_saved_prefixes(policy):  # noqa: F811
    a, b = prompts_of_lengths([20, 5], seed=51)
    # room for a's pooled prompt (20 tokens) and both saved turns (20+3, 5+3) but not more
    cap = BYTES_PER_TOKEN * (20 + 23 + 8)
    stream = HFSampler(policy).stream(4, greedy=True, kv_cache_mb=cap / 2**20)
    stream.add("a", a, key="a")
    stream.add("b", b, key="b")
    drain(stream)
    assert stream.pool.bytes == BYTES_PER_TOKEN * 20 and stream.cached_bytes == BYTES_PER_TOKEN * 31
    assert stream.peak_cached_bytes == cap and stream.evicted == 0
    c = prompts_of_lengths([6], seed=52)[0]
    stream.add("c", c, key="c")  # its saved turn (6+3) does not fit: the pooled prompt goes first
    drain(stream)
    assert stream.pool.bytes == 0 and stream.evicted == 0 and set(stream.prefix) == {"a", "b", "c"}
    assert stream.peak_cached_bytes <= cap
