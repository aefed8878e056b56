"""Item labels past Z (collective/grading.py): A..Z, then AA..ZZ, read back by every arith path."""

from __future__ import annotations

import numpy as np
import pytest

from swarmrl.collective.grading import item_label, parse_label
from swarmrl.config import ConfigError, TaskConfig, load_config
from swarmrl.tasks.arith import ArithTask


def test_labels_are_spreadsheet_columns_and_parse_back():
    assert [item_label(i) for i in (1, 26, 27, 28, 52, 53, 702)] == ["A", "Z", "AA", "AB", "AZ", "BA", "ZZ"]
    assert all(parse_label(item_label(i)) == i for i in range(1, 703))
    assert [parse_label(x) for x in ("", "a", "A1", "AAA", "Ä")] == [None] * 5


def test_an_arith_problem_of_40_items_reads_its_labels():
    task = ArithTask(TaskConfig(items_per_problem=40, dependency_rate=0.5))
    p = task.sample(np.random.default_rng(0), 1)[0]
    assert p.text().splitlines()[29].startswith("AD:") and task.parse_item(p, "AN") == 40
    assert task.parse_item(p, "AO") is None and task.take(p, "Z-AB") == [26, 27, 28]
    assert task.learn(p, "posted: AB=3 Z=1") == {28: "3", 26: "1"}


def test_the_scripted_team_solves_a_64_item_problem_with_15_experts():
    from swarmrl.build import make_runtime
    from swarmrl.policy.tokenizer import build_tokenizer
    cfg = load_config(None, ["task.items_per_problem=64", "model.max_context_tokens=8192", "sampler.max_turns_per_agent=40"])
    tok = build_tokenizer()
    runtime, task = make_runtime(cfg, tok)
    scripts = task.scripts()
    problems = task.sample(np.random.default_rng(1), 2)
    rollouts = [runtime.new_rollout(i, i, p, 1e9, cap=15) for i, p in enumerate(problems)]
    rng = np.random.default_rng(0)
    strategies = {i: scripts.team_strategy(rng, 15) for i in range(2)}
    runtime.run(rollouts, scripts.org_actor(tok, tok.convert_tokens_to_ids("<|end|>"), strategies), seed=0)
    assert [r.score for r in rollouts] == [1.0, 1.0]
    assert max(len(r.agents) for r in rollouts) > 9  # past the training cap of 8 experts


def test_more_items_than_labels_is_refused():
    with pytest.raises(ConfigError, match=r"items_per_problem must be in \[1, 702\]"):
        load_config(None, ["task.items_per_problem=703"])


def test_a_label_pool_relabels_the_default_problems_with_k_sorted_labels_of_the_pool():
    cfg = dict(items_per_problem=12, dependency_rate=0.5, max_chain=2)
    plain = ArithTask(TaskConfig(**cfg)).sample(np.random.default_rng(3), 1)[0]
    task = ArithTask(TaskConfig(**cfg, label_pool=64))
    p = task.sample(np.random.default_rng(3), 1)[0]
    ix = p.item_indices
    assert len(ix) == 12 and list(ix) == sorted(set(ix)) and 1 <= ix[0] and ix[-1] <= 64
    assert ix != tuple(range(1, 13)) and any(i > 26 for i in ix)  # two-letter labels are drawn
    # the same items in the same order: numbers, answers, and dependencies by position
    pos = {i: n for n, i in enumerate(ix, 1)}
    assert [(it.terms, it.answer, pos.get(it.dep)) for it in p.items] == \
        [(it.terms, it.answer, it.dep) for it in plain.items]
    assert all(it.text().startswith(item_label(it.index) + ":") for it in p.items)
    dep = next(it for it in p.items if it.dep is not None)
    assert f"#{item_label(dep.dep)}" in dep.text()
    # a pool no bigger than the problem leaves the default problems, draw for draw
    for pool in (0, 12):
        same = ArithTask(TaskConfig(**cfg, label_pool=pool)).sample(np.random.default_rng(3), 2)
        assert same == ArithTask(TaskConfig(**cfg)).sample(np.random.default_rng(3), 2)


def test_sparse_labels_parse_take_and_grade_the_problems_items_only():
    task = ArithTask(TaskConfig(items_per_problem=4, dependency_rate=0.0, label_pool=10))
    p = next(q for q in task.sample(np.random.default_rng(0), 50) if q.item_indices[0] > 1)
    a, b, c, d = p.item_indices
    missing = next(i for i in range(1, 11) if i not in p.item_indices)
    assert task.parse_item(p, item_label(b)) == b and task.parse_item(p, item_label(missing)) is None
    assert task.take(p, f"{item_label(a)}-{item_label(c)}") == [a, b, c]  # the problem's items in the range
    assert task.take(p, f"{item_label(d)}-{item_label(a)}") is None
    assert task.grade(p, c, str(p.item(c).answer)).correct
    assert not task.grade(p, missing, "0").correct


def test_every_scripted_strategy_solves_sparsely_labelled_problems():
    from swarmrl.build import make_runtime
    from swarmrl.policy.tokenizer import build_tokenizer
    from swarmrl.tasks.arith_scripts import Strategy
    cfg = load_config(None, ["task.items_per_problem=12", "task.label_pool=64", "task.dependency_rate=0.5",
                             "model.max_context_tokens=4096", "sampler.max_turns_per_agent=40"])
    tok = build_tokenizer()
    runtime, task = make_runtime(cfg, tok)
    strategies = [Strategy(0, share="recompute")] + [
        Strategy(k, share=share, ceo_works=cw, board=board) for k in (3, 8) for share in ("wait", "poll", "recompute")
        for cw in (False, True) for board in (False, True)]
    problems = task.sample(np.random.default_rng(2), len(strategies))
    assert all(p.item_indices != tuple(range(1, 13)) for p in problems)
    rollouts = [runtime.new_rollout(i, i, p, 1e9, cap=8) for i, p in enumerate(problems)]
    actor = task.scripts().org_actor(tok, tok.convert_tokens_to_ids("<|end|>"), dict(enumerate(strategies)))
    runtime.run(rollouts, actor, seed=0)
    for r, s in zip(rollouts, strategies):
        assert (r.score, r.counters["invalid_actions"]) == (1.0, 0), s.label()


def test_a_label_pool_past_the_labels_is_refused():
    with pytest.raises(ConfigError, match=r"label_pool must be in \[0, 702\]"):
        load_config(None, ["task.label_pool=703"])
