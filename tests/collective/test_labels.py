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
