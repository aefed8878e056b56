"""DecodeStream: continuous batching and per-agent prefix reuse give the tokens and log-probs of
running each prompt alone (greedy, so comparisons are token for token)."""

from __future__ import annotations

import dataclasses

import torch

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
    pol = dataclasses.replace(policy, end_id=stop)
    stream = HFSampler(pol).stream(10, greedy=True)
    for i, x in enumerate(prompts):
        stream.add(i, x, key=i)
    out = drain(stream)
    for i, ids in enumerate(solo):
        assert out[i].ids == (ids[:ids.index(stop) + 1] if stop in ids else ids)
