"""DecodeStream: continuous batching and per-agent prefix reuse give the tokens and log-probs of
running each prompt alone (greedy, so comparisons are token for token), and the cap on saved
prefixes (sampler.kv_cache_mb) drops them without changing a sampled token."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import torch

from swarmrl.config import load_config
from swarmrl.policy.actor import LLMActor
from swarmrl.policy.sampler import HFSampler
from test_sampler import policy, prompts_of_lengths, recomputed  # noqa: F401  (fixture)


def alone(policy, prompt, n=8):
    return HFSampler(policy).generate([prompt], n, seed=0, greedy=True)[0]


def drain(stream):
    out = {}
    while stream.busy():
        out.update(stream.step())
    return out


def test_prompts_joining_a_running_batch_decode_as_if_alone(policy):  # noqa: F811
    prompts = prompts_of_lengths([5, 23, 9, 14, 2], seed=3)
    stream = HFSampler(policy).stream(8, greedy=True, admit_fraction=0.0)
    stream.add(0, prompts[0])
    stream.add(1, prompts[1])
    out = dict(stream.step())  # rows 0 and 1 decode a token...
    joined = 0
    for i in range(2, 5):  # ...then the others join, one per step, at different cache widths
        stream.add(i, prompts[i])
        out.update(stream.step())
        joined += len(stream.rows) > 1
    out.update(drain(stream))
    assert joined >= 2  # they really joined a running batch
    for i, prompt in enumerate(prompts):
        want = alone(policy, prompt)
        assert out[i].ids == want.ids
        assert torch.allclose(torch.tensor(out[i].logprobs), recomputed(policy, prompt, out[i].ids), atol=1e-4)


def test_next_turn_reuses_the_agents_kv_cache_and_matches_a_fresh_prefill(policy):  # noqa: F811
    p1, p2 = prompts_of_lengths([11, 4], seed=9)
    obs = [[7, 8, 9], [10, 11, 12, 13, 14]]
    stream = HFSampler(policy).stream(6, greedy=True)
    stream.add("a1", p1, key="a")
    stream.add("b1", p2, key="b")
    first = drain(stream)
    assert set(stream.prefix) == {"a", "b"}
    # The agents' next prompts extend their previous turns: only the new tokens are run.
    nxt = {k: prev + first[t].ids + o for (k, prev, t), o in zip([("a", p1, "a1"), ("b", p2, "b1")], obs)}
    ran = []
    orig = stream._prefill_part
    stream._prefill_part = lambda part: ran.append([len(x) for _, x, _ in part]) or orig(part)
    stream.add("a2", nxt["a"], key="a")
    stream.add("b2", nxt["b"], key="b")
    second = drain(stream)
    # new tokens = the last generated token (sampled, never fed back) + the observation
    assert sorted(n for part in ran for n in part) == sorted(1 + len(o) for o in obs)
    for k in ("a", "b"):
        want = alone(policy, nxt[k], 6)
        assert second[f"{k}2"].ids == want.ids
        assert torch.allclose(torch.tensor(second[f"{k}2"].logprobs), torch.tensor(want.logprobs), atol=1e-4)


def test_a_prompt_that_does_not_extend_the_saved_turn_is_prefilled_in_full(policy):  # noqa: F811
    (p,) = prompts_of_lengths([9], seed=4)
    stream = HFSampler(policy).stream(4, greedy=True)
    stream.add(0, p, key="a")
    drain(stream)
    other = [3] + p[1:]  # same length, different first token: the saved cache must not be used
    stream.add(1, other + [5, 6], key="a")
    assert drain(stream)[1].ids == alone(policy, other + [5, 6], 4).ids


def test_rows_ending_at_different_steps_leave_with_the_right_tokens(policy):  # noqa: F811
    prompts = prompts_of_lengths([6, 13, 3, 21], seed=5)
    solo = [alone(policy, x, 10).ids for x in prompts]
    stop = solo[0][2]
    pol = dataclasses.replace(policy, stop_id=stop)
    stream = HFSampler(pol).stream(10, greedy=True)
    for i, x in enumerate(prompts):
        stream.add(i, x, key=i)
    out = drain(stream)
    for i, ids in enumerate(solo):
        assert out[i].ids == (ids[:ids.index(stop) + 1] if stop in ids else ids)


# --- the cap on saved prefixes (sampler.kv_cache_mb) ---------------------------------------------
# TINY: 1 layer, 1 KV head of dim 16, float32: a saved prefix of L tokens holds keys and values
# of 1 * 2 * 1 * L * 16 * 4 = 128 L bytes.
BYTES_PER_TOKEN = 128


def test_saved_prefix_bytes_by_hand_and_the_least_recently_saved_is_dropped_first(policy):  # noqa: F811
    p = prompts_of_lengths([5, 7, 9], seed=6)
    # room for b's and c's prefixes (7+3 and 9+3 tokens: prompt + 4 generated - the last) but not a's too
    cap = BYTES_PER_TOKEN * (10 + 12)
    stream = HFSampler(policy).stream(4, greedy=True, kv_cache_mb=cap / 2**20)
    first = {}
    for k, prompt in zip("abc", p):  # one after the other: saved in the order a, b, c
        stream.add(k + "1", prompt, key=k)
        first.update(drain(stream))
        assert stream.peak_cached_bytes <= cap
    assert list(stream.prefix) == ["b", "c"] and stream.evicted == 1
    assert stream.cached_bytes == BYTES_PER_TOKEN * 22 == sum(stream.prefix_bytes.values())
    ran = []
    orig = stream._prefill_part
    stream._prefill_part = lambda part: ran.append([len(x) for _, x, _ in part]) or orig(part)
    nxt = {k: prompt + first[k + "1"].ids + [30, 31] for k, prompt in zip("abc", p)}
    for k in "abc":
        stream.add(k + "2", nxt[k], key=k)
    second = drain(stream)
    # b and c run only the last generated token and the observation; a, dropped, its whole context
    assert sorted(n for part in ran for n in part) == [3, 3, len(nxt["a"])]
    for k in "abc":
        assert second[k + "2"].ids == alone(policy, nxt[k], 4).ids


def test_finished_agents_keep_no_prefix(policy):  # noqa: F811
    p1, p2 = prompts_of_lengths([6, 8], seed=8)
    stream = HFSampler(policy).stream(4, greedy=True)
    stream.add("a1", p1, key="a")
    stream.add("b1", p2, key="b")
    stream.step()  # both turns in flight
    stream.finished("b")  # b's last turn: nothing to keep once it ends
    drain(stream)
    assert list(stream.prefix) == ["a"] and stream.cached_bytes == BYTES_PER_TOKEN * (6 + 3)
    stream.finished("a")
    assert not stream.prefix and stream.cached_bytes == 0


def multi_turn(policy, kv_cache_mb, temperature=0.7):  # noqa: F811  (the fixture's name)
    """Four agents, three sampled turns each (row seeds), each next prompt extending the last."""
    prompts = dict(zip("abcd", prompts_of_lengths([5, 12, 3, 20], seed=11)))
    stream = HFSampler(policy, temperature=temperature).stream(6, kv_cache_mb=kv_cache_mb)
    out = {k: [] for k in prompts}
    for turn in range(3):
        for i, (k, prompt) in enumerate(prompts.items()):
            stream.add((k, turn), prompt, row_seed=100 * turn + i, key=k)
        for (k, _), s in drain(stream).items():
            out[k].append(s)
            prompts[k] = prompts[k] + s.ids + [40 + turn, 41]
    return out, stream


def test_dropping_prefixes_does_not_change_the_sampled_tokens(policy):  # noqa: F811
    kept, free = multi_turn(policy, 0.0)
    assert free.evicted == 0 and free.peak_cached_bytes > 0
    for mb in (BYTES_PER_TOKEN * 40 / 2**20, 1e-9):  # room for about one prefix; none at all
        dropped, capped = multi_turn(policy, mb)
        assert capped.evicted > 0
        for k in kept:
            assert [s.ids for s in dropped[k]] == [s.ids for s in kept[k]]
            got = torch.tensor([x for s in dropped[k] for x in s.logprobs])
            want = torch.tensor([x for s in kept[k] for x in s.logprobs])
            assert (got - want).abs().max().item() <= 1e-5


def test_actor_stream_forgets_the_agents_that_take_no_further_turn(policy):  # noqa: F811
    actor = LLMActor(policy, 4, greedy=True, kv_cache_mb=3.0)
    stream = actor.open_stream()
    assert stream.stream.cap_bytes == 3 * 2**20
    agents = {n: SimpleNamespace(name=n, status=st, role="expert", turns=0)
              for n, st in (("ceo", "active"), ("e1", "done"), ("e2", "fired"), ("e3", "cut"))}
    r = SimpleNamespace(index=0, agents=agents, done=False)
    stream.add([SimpleNamespace(rollout=r, agent=a, prompt=[5, 6, 7 + i]) for i, a in enumerate(agents.values())],
               seed=0)
    while stream.busy():
        stream.step()
    assert len(stream.stream.prefix) == 4
    stream.finished(r)  # done and cut agents never take another turn
    assert {name for _, name in stream.stream.prefix} == {"ceo", "e2"}
    r.done = True  # a finished rollout: nobody does
    stream.finished(r)
    assert not stream.stream.prefix


def test_the_cap_comes_from_the_config(policy):  # noqa: F811
    cfg = load_config(None, ["sampler.kv_cache_mb=64"])
    assert LLMActor.from_config(cfg.sampler, policy).open_stream().stream.cap_bytes == 64 * 2**20
    assert LLMActor.from_config(load_config(None, []).sampler, policy).open_stream().stream.cap_bytes == 1024 * 2**20


def test_ready_made_decode_masks_change_no_token_or_log_prob(policy, monkeypatch):  # noqa: F811
    fast, stream = multi_turn(policy, 0.0)
    assert stream.prepared_masks  # the tiny Qwen3 on SDPA: decode steps skip transformers' mask building
    monkeypatch.setattr("swarmrl.policy.sampler.prepared_decode_masks", lambda model: False)
    slow, stream = multi_turn(policy, 0.0)
    assert not stream.prepared_masks
    for k in slow:  # the same process, the same mask values: equal to the last bit
        assert [(s.ids, s.logprobs) for s in fast[k]] == [(s.ids, s.logprobs) for s in slow[k]]
