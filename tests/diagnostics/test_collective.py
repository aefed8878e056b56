"""Collective metrics on scripted rollouts whose numbers are known by construction."""

import numpy as np
import pytest

from swarmrl.config import Config, TaskConfig
from swarmrl.diagnostics.collective import collective_metrics, team_size_histogram
from swarmrl.policy.tokenizer import END, build_tokenizer
from swarmrl.build import make_runtime
from swarmrl.tasks.arith_scripts import ScriptedActor, Strategy


def _run(strategy: Strategy, n: int = 3, time_limit: float = 1e9, dep_rate: float = 0.0):
    cfg = Config(task=TaskConfig(items_per_problem=4, dependency_rate=dep_rate))
    tok = build_tokenizer()
    runtime, task = make_runtime(cfg, tok)
    problems = task.sample(np.random.default_rng(0), n)
    rollouts = [runtime.new_rollout(i, i, p, time_limit, 8) for i, p in enumerate(problems)]
    runtime.run(rollouts, ScriptedActor(tok, tok.convert_tokens_to_ids(END), {i: strategy for i in range(n)}), seed=0)
    return rollouts


def test_solo_metrics():
    m = collective_metrics(_run(Strategy(0, share="recompute")))
    assert m["score_mean"] == 1.0 and m["useful_work"] == 4.0
    assert m["team_size_mean"] == 1.0 and m["expert_work_share"] == 0.0
    assert m["messages_per_rollout"] == 0.0 and m["accuracy"] == 1.0
    assert m["useful_work_per_agent"] == 4.0


def test_team_of_two_with_block_briefs():
    rollouts = _run(Strategy(2, share="recompute"))
    m = collective_metrics(rollouts)
    assert m["team_size_mean"] == 3.0 and m["hires_per_rollout"] == 2.0
    assert m["expert_work_share"] == 1.0  # the CEO only manages
    assert m["direct_messages_per_rollout"] == 2.0 and m["channel_posts_per_rollout"] == 0.0
    assert m["useful_work_per_agent"] == pytest.approx(4 / 3)
    # briefs are "A-B" and "C-D": 3 tokens each (letter, dash, letter)
    assert m["message_tokens_per_rollout"] == 6.0
    assert team_size_histogram(rollouts, 9)[3] == 1.0


def test_deadline_counts_only_work_before_it():
    full = _run(Strategy(0, share="recompute"))
    first_end = min(min(r.solved.values()) for r in full)
    assert all(min(r.solved.values()) == first_end for r in full)  # same token counts per item
    cut = _run(Strategy(0, share="recompute"), time_limit=first_end + 1e-6)
    m = collective_metrics(cut)
    assert m["useful_work"] == 1.0 and m["score_mean"] == 0.25
    assert m["latency_mean"] == pytest.approx(first_end + 1e-6)


# ------------------------------------------------------------------ metrics as of a limit

from swarmrl.diagnostics.collective import (at_limit, collective_metrics as _cm, score_steps, snapshot_metrics,  # noqa: E402
                                            token_counter)


def _run_mixed(time_limit: float):
    """Four strategies at once (solo, posting team, polling team, recomputing team), deterministic."""
    cfg = Config(task=TaskConfig(items_per_problem=4, dependency_rate=0.5))
    tok = build_tokenizer()
    runtime, task = make_runtime(cfg, tok)
    problems = task.sample(np.random.default_rng(3), 4)
    strats = {0: Strategy(0, share="recompute"), 1: Strategy(2, share="wait"), 2: Strategy(3, share="poll"),
              3: Strategy(2, share="recompute", ceo_works=True)}
    rollouts = [runtime.new_rollout(i, i, p, time_limit, 8) for i, p in enumerate(problems)]
    runtime.run(rollouts, ScriptedActor(tok, tok.convert_tokens_to_ids(END), strats), seed=0)
    return rollouts, tok


@pytest.mark.parametrize("limit", [1.0, 2.5, 3.7, 5.0, 8.0])
def test_snapshot_equals_a_run_cut_at_the_limit(limit):
    """Agents never see the deadline, so reading a long run at L == running with deadline L."""
    long_runs, tok = _run_mixed(1e9)
    cut_runs, _ = _run_mixed(limit)
    count = token_counter(tok)
    for lr, cr in zip(long_runs, cut_runs):
        a, b = at_limit(lr, limit, count), at_limit(cr, 1e9, count)
        assert (a.items, a.score, a.expert_items, a.last_item_s) == (b.items, b.score, b.expert_items, b.last_item_s)
        assert (a.direct, a.channel, a.direct_tokens, a.channel_tokens) == (b.direct, b.channel, b.direct_tokens, b.channel_tokens)
        assert (a.hired, a.peak_team, a.turns, a.generated_tokens, a.prefill_tokens) == \
               (b.hired, b.peak_team, b.turns, b.generated_tokens, b.prefill_tokens)
        assert a.archive_reads == b.archive_reads and a.latency_s == pytest.approx(b.latency_s)
        assert b.score == cr.score  # and the snapshot of the cut run is the runtime's own score


def test_score_steps_are_the_snapshots_at_every_solve_time():
    """The step curve's value at each solve time equals the snapshot mean there, and between two
    solve times the snapshot mean stays at the earlier step's value: the curve misses no change."""
    rollouts, _ = _run_mixed(1e9)
    steps = score_steps(rollouts, 6.0)
    times = [t for t, _ in steps]
    solves = sorted({t for r in rollouts for t in r.solved.values() if t <= 6.0})
    assert times == sorted({0.0, *solves}) and len(solves) > 4
    score = lambda L: snapshot_metrics([at_limit(r, L) for r in rollouts])["score_mean"]  # noqa: E731
    assert [s for _, s in steps] == [score(t) for t in times]
    for (t, s), nxt in zip(steps, times[1:] + [6.0]):
        assert score((t + nxt) / 2) == s  # flat between solves
    assert steps[0][1] == 0.0 and steps[-1][1] == score(6.0) and steps[-1][1] > 0


def test_new_metric_keys_by_hand():
    rollouts = _run(Strategy(2, share="recompute"))  # 4 items, briefs "A-B" and "C-D", no posts
    tok = build_tokenizer()
    m = _cm(rollouts, ref_limit_s=1e9, count_tokens=token_counter(tok))
    assert m["direct_message_tokens_per_rollout"] == 6.0 and m["channel_message_tokens_per_rollout"] == 0.0
    assert m["team_hired_per_rollout"] == 2.0 and m["team_fired_per_rollout"] == 0.0 and m["team_active_mean"] == 3.0
    assert m["useful_work_by_team/2-3"] == 4.0 and "useful_work_by_team/1" not in m
    assert m["critical_path_s"] == pytest.approx(np.mean([max(r.solved.values()) for r in rollouts]))
    lat = sum(r.finished_at for r in rollouts)
    assert m["useful_work_per_min"] == pytest.approx(60 * 4 * len(rollouts) / lat)
    turns = [t for r in rollouts for t in r.turns]
    assert m["total_tokens_per_rollout"] == pytest.approx(
        sum(t.generated_tokens + t.new_prompt_tokens for t in turns) / len(rollouts))
    assert m["ref/messages_per_rollout"] == m["messages_per_rollout"] == 2.0
    assert m["ref/message_tokens_per_rollout"] == m["message_tokens_per_rollout"]


def test_snapshot_metrics_by_hand():
    from swarmrl.diagnostics.collective import Snapshot
    base = dict(direct=0, channel=0, direct_tokens=0, channel_tokens=0, archive_reads=0, archive_messages=0,
                hired=0, fired=0, turns=0, generated_tokens=0, prefill_tokens=0, expert_items=0)
    s1 = Snapshot(limit_s=6, items=2, score=0.25, last_item_s=4.0, latency_s=6.0, peak_team=1, **base)
    s2 = Snapshot(limit_s=6, items=6, score=0.75, last_item_s=5.0, latency_s=6.0, peak_team=4,
                  **{**base, "expert_items": 6, "direct": 3, "channel": 1, "hired": 3, "fired": 1})
    m = snapshot_metrics([s1, s2])
    assert m["useful_work"] == 4.0 and m["score_mean"] == 0.5
    assert m["useful_work_per_min"] == pytest.approx(60 * 8 / 12)
    assert m["expert_work_share"] == pytest.approx(6 / 8) and m["critical_path_s"] == 4.5
    assert m["messages_per_rollout"] == 2.0 and m["team_active_mean"] == pytest.approx((1 + 3) / 2)
    assert m["useful_work_by_team/1"] == 2.0 and m["useful_work_by_team/4-5"] == 6.0
    assert "useful_work_by_team/2-3" not in m
