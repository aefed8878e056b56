"""From rollouts to padded tensors: the loss mask (invariant 3) and the flat advantage (invariant 4)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from swarmrl.config import ModelConfig, load_config
from swarmrl.policy.actor import LLMActor
from swarmrl.policy.model import build_tiny_policy
from swarmrl.policy.sampler import Sample
from swarmrl.rl.batch import TrainSeq, collect_sequences, micro_batches, pad, token_logprobs
from swarmrl.rl.losses import ppo_clip_loss
from swarmrl.build import make_runtime

TINY = ModelConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
CEO_OPENING = '<hire role="expert">go</hire><hire role="expert">go</hire><hire role="expert"/>'


class MixedActor:
    """The ceo's first turn is scripted (so there is a team); every other turn is the tiny LLM."""

    def __init__(self, policy, max_new_tokens):
        self.policy = policy
        self.llm = LLMActor(policy, max_new_tokens)
        self.samples = {}  # (rollout, agent) -> [Sample] in turn order

    def act(self, requests, seed):
        out = [None] * len(requests)
        llm = [i for i, q in enumerate(requests) if not (q.agent.name == "ceo" and q.agent.turns == 0)]
        for i, s in zip(llm, self.llm.act([requests[i] for i in llm], seed) if llm else []):
            out[i] = s
        for i, q in enumerate(requests):
            if out[i] is None:
                ids = self.policy.tokenizer.encode(CEO_OPENING, add_special_tokens=False) + [self.policy.end_id]
                out[i] = Sample(ids=ids, logprobs=[-0.25] * len(ids))
            self.samples.setdefault((q.rollout.index, q.agent.name), []).append(out[i])
        return out


@pytest.fixture(scope="module")
def tiny_rollouts():
    torch.manual_seed(0)
    policy = build_tiny_policy(TINY)
    cfg = load_config(None, ["sampler.max_new_tokens_per_turn=12", "sampler.max_turns_per_agent=3",
                             "task.items_per_problem=3"])
    runtime, task = make_runtime(cfg, policy.tokenizer)
    probs = task.sample(np.random.default_rng(0), 2)
    rollouts = [runtime.new_rollout(i, i, p, 1e9, 3) for i, p in enumerate(probs)]
    actor = MixedActor(policy, 12)
    runtime.run(rollouts, actor, seed=0)
    return policy, rollouts, actor


ADV = torch.tensor([0.75, -1.5])  # one value per rollout, distinct on purpose


def with_adv(rollouts):
    """Sequences carrying their rollout's advantage, as the trainer's `collective` estimator sets them."""
    seqs = collect_sequences(rollouts)
    for s in seqs:
        s.advantage = float(ADV[s.rollout])
    return seqs


def test_tiny_rollout_has_a_team_with_llm_turns(tiny_rollouts):
    _, rollouts, _ = tiny_rollouts
    for r in rollouts:
        assert {"ceo", "expert-1", "expert-2", "expert-3"} <= set(r.agents)
        assert len(turns := [t for t in r.turns if t.agent == "expert-1"]) >= 1, turns
        # expert-3 got no brief: it never took a turn and has nothing to train on
        assert r.agents["expert-3"].turns == 0


def expected_mask(r, agent, tokenizer) -> list[int]:
    """Rebuild the mask from the transcript: header and observations 0, replies 1."""
    a = r.agents[agent]
    mask = [0] * len(tokenizer.encode(r.scenario.header(r, agent, a.role),
                                      add_special_tokens=False))
    for t in [t for t in r.turns if t.agent == agent]:
        mask += [0] * len(tokenizer.encode(t.observation, add_special_tokens=False))
        mask += [1] * t.generated_tokens
    return mask


def test_loss_mask_is_one_exactly_on_generated_tokens(tiny_rollouts):
    policy, rollouts, actor = tiny_rollouts
    seqs = with_adv(rollouts)
    # one sequence per agent that generated anything (in rollout, then agent order); none for expert-3
    names = [(r.index, n) for r in rollouts for n, ag in r.agents.items() if any(ag.gen_mask)]
    assert set(names) == {(r.index, n) for r in rollouts for n, ag in r.agents.items() if ag.turns}
    assert [s.rollout for s in seqs] == [i for i, _ in names]
    assert [s.role for s in seqs] == [rollouts[i].agents[n].role for i, n in names]
    t = pad(seqs, policy.pad_id)
    width = max(len(s.ids) for s in seqs)
    assert t["ids"].shape == t["mask"].shape == t["adv"].shape == t["old_logp"].shape == (len(seqs), width)
    for row, (s, (_, name)) in enumerate(zip(seqs, names)):
        r = rollouts[s.rollout]
        n = len(s.ids)
        want = expected_mask(r, name, policy.tokenizer)
        assert s.gen_mask == want == r.agents[name].gen_mask
        assert t["mask"][row, :n].tolist() == want and t["mask"][row, n:].sum() == 0
        assert t["attn"][row, :n].sum() == n and t["attn"][row, n:].sum() == 0
        assert t["ids"][row, :n].tolist() == r.agents[name].ids
        assert (t["ids"][row, n:] == policy.pad_id).all()
        # the masked tokens are exactly what the actor generated, in order, with their log-probs
        gen = [i for smp in actor.samples[(r.index, name)] for i in smp.ids]
        lps = [x for smp in actor.samples[(r.index, name)] for x in smp.logprobs]
        sel = t["mask"][row] == 1
        assert t["ids"][row][sel].tolist() == gen
        assert t["old_logp"][row][sel].tolist() == pytest.approx(lps)
        assert t["old_logp"][row][~sel].abs().sum() == 0
        # header and observation text never carry gradient
        assert policy.tokenizer.decode(t["ids"][row][:n][t["mask"][row, :n] == 0]).startswith(
            r.scenario.header(r, name, r.agents[name].role))


def test_flat_collective_advantage_on_every_generated_token(tiny_rollouts):
    policy, rollouts, _ = tiny_rollouts
    seqs = with_adv(rollouts)
    t = pad(seqs, policy.pad_id)
    per_rollout = {}
    for row, s in enumerate(seqs):
        vals = t["adv"][row][t["mask"][row] == 1]
        assert vals.numel() > 0
        per_rollout.setdefault(s.rollout, set()).update(vals.tolist())
        assert s.advantage == ADV[s.rollout].item()
    assert per_rollout == {0: {0.75}, 1: {-1.5}}
    agents_per_rollout = {r.index: sum(1 for s in seqs if s.rollout == r.index) for r in rollouts}
    assert all(v >= 3 for v in agents_per_rollout.values())  # ceo + two briefed experts


def test_padded_log_probs_equal_unpadded_ones(tiny_rollouts):
    policy, rollouts, _ = tiny_rollouts
    seqs = with_adv(rollouts)
    t = pad(seqs, policy.pad_id)
    with torch.no_grad():
        logp, ent = token_logprobs(policy.model, t["ids"], t["attn"])  # [B, T]
        for row, s in enumerate(seqs):
            ids = torch.tensor([s.ids])
            alone, _ = token_logprobs(policy.model, ids, torch.ones_like(ids), with_entropy=False)
            assert torch.allclose(logp[row, :len(s.ids)], alone[0], atol=1e-5)
            sel = t["mask"][row] == 1
            # the sampler's behaviour log-probs agree with the trainer's on LLM turns
            if s.role == "expert":
                assert torch.allclose(logp[row][sel], t["old_logp"][row][sel], atol=1e-4)
    assert logp[:, 0].abs().sum() == 0 and (ent >= 0).all()


def test_values_at_masked_positions_do_not_change_the_loss(tiny_rollouts):
    policy, rollouts, _ = tiny_rollouts
    seqs = with_adv(rollouts)
    t = pad(seqs, policy.pad_id)
    num_tokens = int(t["mask"].sum())
    model = policy.model
    grabbed = {}

    def keep(module, inputs, output):
        output.retain_grad()
        grabbed["emb"] = output

    handle = model.get_input_embeddings().register_forward_hook(keep)
    try:
        model.zero_grad()
        logp, _ = token_logprobs(model, t["ids"], t["attn"], with_entropy=False)
        loss, _ = ppo_clip_loss(logp, t["old_logp"], t["adv"], t["mask"] / num_tokens)
        loss.backward()
    finally:
        handle.remove()
    assert loss.item() != 0.0
    # padding after a sequence has no influence at all
    emb_grad = grabbed["emb"].grad.abs().sum(-1)  # [B, T]
    for row, s in enumerate(seqs):
        assert emb_grad[row, len(s.ids):].sum() == 0
        assert emb_grad[row, :len(s.ids)].sum() > 0
    # arbitrary old log-probs and advantages where mask == 0 give exactly the same loss
    g = torch.Generator().manual_seed(0)
    off = t["mask"] == 0
    old2 = torch.where(off, -torch.rand(t["old_logp"].shape, generator=g) * 3, t["old_logp"])
    adv2 = torch.where(off, torch.randn(t["adv"].shape, generator=g) * 10, t["adv"])
    assert not torch.equal(old2, t["old_logp"]) and not torch.equal(adv2, t["adv"])
    loss2, _ = ppo_clip_loss(logp.detach(), old2, adv2, t["mask"] / num_tokens)
    assert loss2.item() == loss.item()
    # while changing the advantage on a generated token does change it
    on = t["mask"] == 1
    adv3 = torch.where(on, t["adv"] * 2, t["adv"])
    loss3, _ = ppo_clip_loss(logp.detach(), t["old_logp"], adv3, t["mask"] / num_tokens)
    assert loss3.item() == pytest.approx(2 * loss.item(), rel=1e-5)


def _seq(n: int) -> TrainSeq:
    return TrainSeq(ids=list(range(n)), gen_mask=[1] * n, old_logp=[0.0] * n, advantage=0.0, role="ceo", rollout=0)


def test_micro_batches_by_hand():
    seqs = [_seq(n) for n in (5, 3, 8, 8, 2, 10)]
    groups = micro_batches(seqs, micro_batch_tokens=16)
    # sorted 2,3,5 (3 rows x 5 = 15) | 8,8 (2 x 8 = 16) | 10 (3 x 10 > 16, starts a new one)
    assert [[len(s.ids) for s in g] for g in groups] == [[2, 3, 5], [8, 8], [10]]
    assert sorted(id(s) for g in groups for s in g) == sorted(id(s) for s in seqs)
    # a sequence longer than the budget still goes, alone
    assert [[len(s.ids) for s in g] for g in micro_batches([_seq(40), _seq(3)], 16)] == [[3], [40]]
    assert micro_batches([], 16) == []


def test_pad_by_hand():
    a = TrainSeq([5, 6, 7], [0, 1, 1], [0.0, -0.5, -0.25], 2.0, "ceo", 0)
    b = TrainSeq([9], [1], [-1.0], -1.0, "expert", 1)
    t = pad([a, b], pad_id=99)
    assert t["ids"].tolist() == [[5, 6, 7], [9, 99, 99]]
    assert t["attn"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert t["mask"].tolist() == [[0, 1, 1], [1, 0, 0]]
    assert t["old_logp"].tolist() == [[0.0, -0.5, -0.25], [-1.0, 0.0, 0.0]]
    assert t["adv"].tolist() == [[2.0, 2.0, 2.0], [-1.0, 0.0, 0.0]]
