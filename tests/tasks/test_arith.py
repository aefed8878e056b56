"""`arith`: answers (with dependencies), grading, the scripted work format, sampling."""

from __future__ import annotations

import numpy as np
import pytest

from swarmrl.config import TaskConfig
from swarmrl.tasks.arith import ArithProblem, ArithTask, Item, work_text
from swarmrl.tasks.arith_scripts import longest_chain
from swarmrl.tasks.base import Grade


class ScriptedRng:
    """Stands in for np.random.Generator: returns the scripted draws in call order."""

    def __init__(self, draws):
        # ("terms", [a, b, c]) is drawn as the first operand a, then the steps [b, c].
        self.draws = []
        for kind, value in draws:
            self.draws += [("first", value[0]), ("steps", value[1:])] if kind == "terms" else [(kind, value)]

    def integers(self, low, high, size=None):
        kind, value = self.draws.pop(0)
        assert kind in (("steps",) if size is not None else ("first", "dep")), (kind, low, high, size)
        if size is not None:
            assert len(value) == size and all(low <= v < high for v in value)
        else:
            assert low <= value < high
        return np.array(value) if size is not None else value

    def random(self):
        kind, value = self.draws.pop(0)
        assert kind == "coin"
        return value


def constructed_problem() -> ArithProblem:
    """Items (mod 10), by hand:
    1: 3+4+5          = 12 -> 2
    2: #1+8+7 = 2+8+7 = 17 -> 7   (terms[0]=9 is ignored)
    3: 1+1+1          = 3
    4: #2+6+6 = 7+6+6 = 19 -> 9   (terms[0]=0 is ignored)
    """
    rng = ScriptedRng([
        ("terms", [3, 4, 5]),
        ("terms", [9, 8, 7]), ("coin", 0.1), ("dep", 1),
        ("terms", [1, 1, 1]), ("coin", 0.9),
        ("terms", [0, 6, 6]), ("coin", 0.0), ("dep", 2),
    ])
    task = ArithTask(TaskConfig(items_per_problem=4, terms_per_item=3, max_step=9, dependency_rate=0.5, modulus=10))
    (problem,) = task.sample(rng, 1)
    assert rng.draws == []
    return problem


def test_constructed_problem_answers_by_hand():
    p = constructed_problem()
    assert [it.answer for it in p.items] == [2, 7, 3, 9]
    assert [it.dep for it in p.items] == [None, 1, None, 2]
    assert p.items[1] == Item(2, (9, 8, 7), 1, 7)
    assert p.num_items == 4 and p.modulus == 10
    # items are labelled A, B, C, ... so a label never collides with an operand digit
    assert p.text() == "A:3+4+5\nB:#A+8+7\nC:1+1+1\nD:#B+6+6"
    assert p.item(4).text() == "D:#B+6+6"
    assert p.id.startswith("arith-") and len(p.id) == len("arith-") + 10


def test_dependency_chain_answer_uses_the_dependency_result_not_its_first_term():
    # 1: 9+9 = 18 -> 8 ; 2: #1+5 = 8+5 = 13 -> 3 ; 3: #2+1 = 4  (mod 10)
    rng = ScriptedRng([("terms", [9, 9]), ("terms", [4, 5]), ("coin", 0.0), ("dep", 1),
                       ("terms", [7, 1]), ("coin", 0.0), ("dep", 2)])
    task = ArithTask(TaskConfig(items_per_problem=3, terms_per_item=2, max_step=9, dependency_rate=1.0))
    (p,) = task.sample(rng, 1)
    assert [it.answer for it in p.items] == [8, 3, 4]


def test_modulus_other_than_ten():
    # mod 7: 1: 6+5 = 11 -> 4 ; 2: #1+3 = 7 -> 0
    rng = ScriptedRng([("terms", [6, 5]), ("terms", [2, 3]), ("coin", 0.2), ("dep", 1)])
    task = ArithTask(TaskConfig(items_per_problem=2, terms_per_item=2, max_step=6, dependency_rate=0.5, modulus=7))
    (p,) = task.sample(rng, 1)
    assert [it.answer for it in p.items] == [4, 0]


def test_sampled_answers_match_an_independent_recomputation():
    task = ArithTask(TaskConfig(items_per_problem=8, terms_per_item=3, dependency_rate=0.5))
    for p in task.sample(np.random.default_rng(7), 20):
        results = {}
        for it in p.items:
            first = results[it.dep] if it.dep is not None else it.terms[0]
            results[it.index] = (first + sum(it.terms[1:])) % 10
            assert it.answer == results[it.index]
            assert 0 <= it.answer < 10
            if it.dep is not None:
                assert 1 <= it.dep < it.index


def test_grade():
    task = ArithTask(TaskConfig(items_per_problem=4))
    p = constructed_problem()
    assert task.grade(p, 4, "9") == Grade(1.0, "pass")
    assert task.grade(p, 4, " 9\n").correct  # surrounding whitespace is ignored
    assert not task.grade(p, 4, "8").correct
    assert not task.grade(p, 4, "19").correct
    assert not task.grade(p, 4, "nine").correct
    assert not task.grade(p, 4, "").correct
    assert task.grade(p, 1, "2").correct and not task.grade(p, 2, "2").correct
    assert not task.grade(p, 0, "2").correct  # out of range items are never correct
    assert not task.grade(p, 5, "2").correct
    assert not task.grade(p, -1, "9").correct


def test_work_text_for_a_dependent_item():
    p = constructed_problem()
    # item 4 = #2+6+6 with item 2's result 7: 7+6=13 -> 3, 3+6=9
    assert work_text(p, 4, {2: 7}) == '[D]7+6=3+6=9<submit item="D">9</submit>'
    assert work_text(p, 4, {2: 7}, submit=False) == "[D]7+6=3+6=9"
    # the writer's known value is what it uses (a wrong belief gives a wrong answer)
    assert work_text(p, 4, {2: 1}) == '[D]1+6=7+6=3<submit item="D">3</submit>'
    with pytest.raises(KeyError):
        work_text(p, 4, {})  # the dependency must be known


def test_work_text_for_an_independent_item():
    p = constructed_problem()
    assert work_text(p, 1, {}) == '[A]3+4=7+5=2<submit item="A">2</submit>'
    assert work_text(p, 2, {1: 2}) == '[B]2+8=0+7=7<submit item="B">7</submit>'


def test_work_text_matches_the_module_docstring_example():
    # "item E = #B+3+1 when item B's result is 7: [E]7+3=0+1=1<submit item="E">1</submit>"
    items = tuple(Item(i, (0, 0, 0), None, 0) for i in range(1, 5)) + (Item(5, (4, 3, 1), 2, 1),)
    p = ArithProblem("x", items, 10)
    assert p.item(5).text() == "E:#B+3+1"
    assert work_text(p, 5, {2: 7}) == '[E]7+3=0+1=1<submit item="E">1</submit>'


def test_sampling_is_deterministic_per_seed():
    task = ArithTask(TaskConfig())
    a = task.sample(np.random.default_rng(123), 5)
    b = task.sample(np.random.default_rng(123), 5)
    c = task.sample(np.random.default_rng(124), 5)
    assert a == b
    assert [p.id for p in a] == [p.id for p in b]
    assert [p.text() for p in a] != [p.text() for p in c]
    assert len({p.id for p in a}) == 5  # distinct problems get distinct ids


def test_parse_item_maps_labels_to_indices():
    task = ArithTask(TaskConfig(items_per_problem=4))
    p = constructed_problem()
    assert [task.parse_item(p, ref) for ref in ["A", "B", "C", "D", " D "]] == [1, 2, 3, 4, 4]
    for bad in ["E", "Z", "a", "1", "4", "", "AB", "#A", "-"]:
        assert task.parse_item(p, bad) is None, bad


def test_dependency_rate_zero_gives_no_dependencies():
    task = ArithTask(TaskConfig(items_per_problem=8, dependency_rate=0.0))
    problems = task.sample(np.random.default_rng(0), 30)
    assert all(it.dep is None for p in problems for it in p.items)
    assert all("#" not in p.text() for p in problems)


def test_dependency_rate_one_gives_a_dependency_on_every_later_item():
    task = ArithTask(TaskConfig(items_per_problem=8, dependency_rate=1.0))
    for p in task.sample(np.random.default_rng(0), 30):
        assert p.items[0].dep is None
        assert all(it.dep is not None and 1 <= it.dep < it.index for it in p.items[1:])


def test_items_per_problem_and_terms_per_item():
    task = ArithTask(TaskConfig(items_per_problem=5, terms_per_item=4))
    (p,) = task.sample(np.random.default_rng(1), 1)
    assert p.num_items == 5
    assert all(len(it.terms) == 4 for it in p.items)
    assert [it.index for it in p.items] == [1, 2, 3, 4, 5]


def test_max_chain_bounds_every_chain_and_zero_leaves_the_problems_unchanged():
    cfg = dict(items_per_problem=12, dependency_rate=0.6)
    free = ArithTask(TaskConfig(**cfg)).sample(np.random.default_rng(3), 40)
    assert free == ArithTask(TaskConfig(**cfg, max_chain=0)).sample(np.random.default_rng(3), 40)
    assert max(len(longest_chain(p)) for p in free) > 2  # the unbounded task does chain further
    for bound in (1, 2, 3):
        capped = ArithTask(TaskConfig(**cfg, max_chain=bound)).sample(np.random.default_rng(3), 40)
        assert max(len(longest_chain(p)) for p in capped) == bound
        for p, q in zip(free, capped):  # the same draws: a cut drops a dependency, nothing else
            assert [it.terms[1:] for it in p.items] == [it.terms[1:] for it in q.items]
            for a, b in zip(p.items, q.items):
                assert b.dep in (a.dep, None)
                first = q.items[b.dep - 1].answer if b.dep else b.terms[0]
                assert b.answer == (first + sum(b.terms[1:])) % q.modulus
