"""Scripted role policies (the warm start's demonstrations): every strategy solves every item."""

from __future__ import annotations

import numpy as np

from swarmrl.collective.clock import LatencyModel
from swarmrl.collective.runtime import Runtime, RuntimeLimits
from swarmrl.config import TaskConfig
from swarmrl.policy.tokenizer import build_tokenizer
from swarmrl.tasks.arith import ArithTask, work_text
from swarmrl.tasks.arith_items import ArithProblem, Item
from swarmrl.tasks.arith_scripts import ScriptedActor, Strategy, blocks, longest_chain

TOK = build_tokenizer()
END = TOK.convert_tokens_to_ids("<|end|>")
NO_DEADLINE = 1e9


def make_runtime(k: int = 4, dep: float = 0.5, **limits) -> Runtime:
    task = ArithTask(TaskConfig(items_per_problem=k, terms_per_item=2, dependency_rate=dep))
    lat = LatencyModel(call_overhead_s=0.5, prefill_tokens_per_s=2000.0, decode_tokens_per_s=20.0,
                       message_latency_s=0.1)
    return Runtime(task, TOK, lat, RuntimeLimits(**limits))


def problems(rt: Runtime, n: int, seed: int = 0):
    return rt.task.sample(np.random.default_rng(seed), n)


def test_blocks_are_contiguous_and_near_equal():
    assert blocks(8, 3) == [(1, 3), (4, 6), (7, 8)]
    assert blocks(8, 8) == [(i, i) for i in range(1, 9)]
    assert blocks(3, 5) == [(1, 1), (2, 2), (3, 3)]  # never more workers than items


STRATEGIES = [Strategy(0, share="recompute")]
STRATEGIES += [Strategy(k, share=share, ceo_works=cw, board=b) for k in (1, 3, 4, 8)
               for share in ("wait", "poll", "recompute") for cw in (False, True) for b in (False, True)]


def test_scripted_strategies_solve_every_item_without_a_deadline():
    rt = make_runtime(k=8, dep=0.5, max_turns_per_agent=64, max_context_tokens=4096)
    probs = problems(rt, len(STRATEGIES), seed=11)
    assert sum(it.dep is not None for p in probs for it in p.items) > 20  # dependencies are exercised
    rollouts = [rt.new_rollout(i, i, p, NO_DEADLINE, 8) for i, p in enumerate(probs)]
    actor = ScriptedActor(TOK, END, dict(enumerate(STRATEGIES)))
    rt.run(rollouts, actor, seed=0)
    for r, strat in zip(rollouts, STRATEGIES):
        assert r.score == 1.0, strat.label()
        assert r.end_reason == "solved", strat.label()
        assert r.counters["invalid_actions"] == 0, strat.label()
        assert r.counters["wrong_submits"] == 0, strat.label()
        assert r.org.peak_size == strat.experts + 1, strat.label()
        workers = set(r.solved_by.values())
        if strat.experts and not strat.ceo_works:
            assert "ceo" not in workers, strat.label()
        if strat.share != "recompute" and strat.experts > 1:
            assert r.counters["channel_posts"] > 0, strat.label()
        if strat.board:  # no briefs, no kickoff: the hiring turn grows by one token per expert
            assert r.counters["direct_messages"] == 0, strat.label()
            assert r.turns[0].generated_tokens == strat.experts + (6 if strat.ceo_works else 1) + 1, strat.label()  # hires, take or done, end
            assert r.counters["board_takes"] == strat.experts + strat.ceo_works, strat.label()
    # the strategies differ in latency: a team of 8 beats solo
    by_label = {s.label(): r.finished_at for s, r in zip(STRATEGIES, rollouts)}
    assert by_label[Strategy(8, "recompute").label()] < by_label[Strategy(0, share="recompute").label()]


def test_posts_by_item_carry_the_typed_posts_text_in_two_fewer_tokens():
    rt = make_runtime(k=8, dep=0.5, max_turns_per_agent=64, max_context_tokens=4096)
    strats = [s for s in STRATEGIES if s.share == "wait" and s.experts > 1]
    probs = problems(rt, len(strats), seed=11)
    runs = {}
    for post_items in (False, True):
        rollouts = [rt.new_rollout(i, i, p, NO_DEADLINE, 8) for i, p in enumerate(probs)]
        rt.run(rollouts, ScriptedActor(TOK, END, dict(enumerate(strats)), post_items), seed=0)
        runs[post_items] = rollouts
    for typed, by_item in zip(runs[False], runs[True]):
        posts = [[m.text for m in r.bus.messages if m.kind == "channel"] for r in (typed, by_item)]
        assert posts[0] == posts[1] and len(posts[0]) > 0  # same values: the scripts never slip
        assert by_item.score == 1.0 and by_item.counters["invalid_actions"] == 0
        assert any('item="' in t.reply and "<post" in t.reply for t in by_item.turns)
        # '<post ch="' general '">' A = 7 '</post>' (7 tokens) against '<post ch="' general '" item="' A '"/>' (5)
        saved = sum(t.generated_tokens for t in typed.turns) - sum(t.generated_tokens for t in by_item.turns)
        assert saved == 2 * len(posts[0])
        assert by_item.finished_at < typed.finished_at


def test_scripted_work_text_is_what_the_solo_ceo_writes():
    rt = make_runtime(k=3, dep=1.0)
    (p,) = problems(rt, 1, seed=2)
    r = rt.new_rollout(0, 0, p, NO_DEADLINE, 8)
    rt.run([r], ScriptedActor(TOK, END, {0: Strategy(0, share="recompute")}), seed=0)
    # one turn takes all items onto the desk, then one item per turn, then done
    assert r.turns[0].reply == f'<take item="A-{chr(64 + p.num_items)}"/>'
    known = {}
    for it, turn in zip(p.items, r.turns[1:]):
        assert turn.reply == work_text(p, it.index, known)
        known[it.index] = str(it.answer)
    assert r.turns[-1].reply == "<done/>" and r.turns[-2].observation.endswith(">>")
    assert len(r.turns) == len(p.items) + 2 and r.score == 1.0


def test_longest_chain_by_hand():
    # B and D start from A, E from D: the longest chain is A -> D -> E
    items = (Item(1, (3, 1), None, 4), Item(2, (0, 2), 1, 6), Item(3, (5, 1), None, 6),
             Item(4, (0, 1), 1, 5), Item(5, (0, 3), 4, 8))
    assert longest_chain(ArithProblem("p", items, 10)) == [1, 4, 5]
    no_deps = ArithProblem("q", items[:1] + (items[2],), 10)
    assert len(longest_chain(no_deps)) == 1


def test_chain_strategies_have_the_ceo_solve_the_longest_chain_itself():
    rt = make_runtime(k=8, dep=0.5, max_turns_per_agent=64, max_context_tokens=4096)
    probs = [p for p in problems(rt, 40, seed=3) if len(longest_chain(p)) >= 3][:6]
    strats = [Strategy(k, share=s, board=True, chain=True) for k in (2, 8) for s in ("wait", "poll", "recompute")]
    assert len(probs) == 6 and strats[0].label() == "team2/board/wait/chain"
    rollouts = [rt.new_rollout(i, i, p, NO_DEADLINE, 8) for i, p in enumerate(probs)]
    rt.run(rollouts, ScriptedActor(TOK, END, dict(enumerate(strats))), seed=0)
    for r, strat in zip(rollouts, strats):
        chain = longest_chain(r.problem)
        assert r.score == 1.0 and r.counters["invalid_actions"] == 0, strat.label()
        assert all(r.solved_by[i] == "ceo" for i in chain), strat.label()
        assert r.org.peak_size == strat.experts + 1, strat.label()
        ceo = [t for t in r.turns if t.agent == "ceo"]  # it takes the chain, then solves it in order
        assert [t.reply.split("]")[0] for t in ceo[1:1 + len(chain)]] == [f"[{chr(64 + i)}" for i in chain]


def test_chain_demos_only_under_a_positive_rate_and_only_on_the_board():
    from swarmrl.tasks.arith_scripts import sample_strategy
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    plain = [sample_strategy(rng_a, 8, 0.5) for _ in range(200)]
    zero = [sample_strategy(rng_b, 8, 0.5, 0.0) for _ in range(200)]
    assert zero == plain and not any(s.chain for s in zero)  # rate 0: the same draws as before
    on = [sample_strategy(np.random.default_rng(7 + i), 8, 0.5, 1.0) for i in range(200)]
    assert any(s.chain for s in on)
    assert all(s.chain == s.board for s in on if s.experts)  # every board team, and only those
    assert not any(s.ceo_works for s in on if s.chain)  # the chain is the CEO's work
