"""Problem variants (tasks/variants.py) and `workflow.groups`: each group sees its own variant."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swarmrl.build import check_plugins, make_runtime
from swarmrl.config import ConfigError, TaskConfig, load_config
from swarmrl.policy.tokenizer import build_tokenizer
from swarmrl.tasks.arith import ArithTask
from swarmrl.tasks.arith_items import ArithProblem, Item
from swarmrl.tasks.variants import MATH_HINTS, hinted

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny_test.yaml"
PROBLEM = ArithProblem(id="p", modulus=10, items=(Item(1, (3, 1), None, 4), Item(2, (0, 2, 1), 1, 7)))


def test_arith_variants_keep_the_items_and_say_them_differently():
    task = ArithTask(TaskConfig())
    assert PROBLEM.text() == "A:3+1\nB:#A+2+1"
    assert task.variant(PROBLEM, 1) == "B:#A+2+1\nA:3+1"
    assert task.variant(PROBLEM, 2) == ("Item A is 3 plus 1, modulo 10.\n"
                                        "Item B is the result of A plus 2 plus 1, modulo 10.")
    assert task.variant(PROBLEM, 3) == "A:3+1\nB:#A+2+1\nHint: A can be done at once; B needs A."
    assert task.variant(PROBLEM, 4) == task.variant(PROBLEM, 1)  # the kinds repeat


def test_math_and_code_variants_add_a_hint():
    assert hinted("What is 2+2?", MATH_HINTS, 2) == "What is 2+2?\n\n" + MATH_HINTS[1]
    assert hinted("What is 2+2?", MATH_HINTS, 4) == hinted("What is 2+2?", MATH_HINTS, 1)


def test_groups_receive_their_variants_in_their_headers():
    cfg = load_config(TINY, ["workflow.name=voting", "workflow.generators=3", "workflow.groups=2"])
    check_plugins(cfg)
    tok = build_tokenizer()
    runtime, task = make_runtime(cfg, tok)
    problem = task.sample(np.random.default_rng(0), 1)[0]
    r = runtime.new_rollout(0, 0, problem, 10.0)
    # creation order: generator-1, generator-2, generator-3, aggregator -> groups 0, 1, 0, 1
    assert set(r.variants) == {"generator-2", "aggregator"}
    for name, agent in r.agents.items():
        want = task.variant(problem, 1) if name in r.variants else problem.text()
        assert want in tok.decode(agent.ids)
    assert r.problem_text("generator-1") == problem.text() != r.problem_text("generator-2")


@pytest.mark.parametrize("overrides, message", [
    (["workflow.groups=5", "workflow.name=voting", "workflow.generators=3"], "more than the 4 agents"),
    (["workflow.groups=0"], "workflow.groups must be >= 1"),
])
def test_bad_groups_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        check_plugins(load_config(TINY, overrides))


def test_a_task_without_a_variant_hook_is_refused_when_groups_are_asked_for():
    sort_task = Path(__file__).resolve().parents[2] / "examples" / "sort_task.py"
    with pytest.raises(ConfigError, match="no `variant\\(problem, k\\)` hook"):
        check_plugins(load_config(TINY, [f"task.name={sort_task}:SortTask", "workflow.groups=2",
                                         "workflow.name=voting"]))
