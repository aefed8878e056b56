"""math: math-verify grading (equivalent forms accepted, wrong answers rejected, on CHAMP
answers), deterministic sampling, and a scored run through the org runtime."""

from __future__ import annotations

import numpy as np
import pytest

from swarmrl.config import TaskConfig
from swarmrl.tasks import make_task
from swarmrl.tasks.datasets import MathRecord, champ_records
from swarmrl.tasks.math import MathTask, demo_submission, grade_answer

from task_helpers import run_one


@pytest.mark.parametrize("answer", ["0.5", "1/2", "\\boxed{\\dfrac12}", "$\\frac{2}{4}$",
                                    "so the answer is $\\boxed{\\frac{1}{2}}$.", "x = \\boxed{0.50}"])
def test_equivalent_forms_of_a_half(answer):
    assert grade_answer(answer, "\\frac{1}{2}").score == 1.0


@pytest.mark.parametrize("answer", ["0.6", "\\boxed{2}", "1/3", "", "no idea", "\\boxed{-\\frac{1}{2}}"])
def test_wrong_or_unparsable_answers_fail(answer):
    g = grade_answer(answer, "\\frac{1}{2}")
    assert (g.score, g.status) == (0.0, "fail")


@pytest.fixture(scope="module")
def champ():
    return champ_records()


def test_champ_keeps_single_expression_answers(champ):
    assert len(champ) == 155  # of 270 in v0; prose answers ("..., or equivalently ...") are left out
    assert all(r.answer and r.question for r in champ)
    assert not any(", or" in r.answer for r in champ)


def test_champ_integer_answers_in_equivalent_forms(champ):
    ints = [r for r in champ if r.answer.lstrip("-").isdigit()][:20]
    assert len(ints) == 20
    for r in ints:
        n = int(r.answer)
        for form in (f"\\boxed{{{n}}}", f"The answer is ${n}$.", f"\\boxed{{\\frac{{{2 * n}}}{{2}}}}", f"{n}.0"):
            assert grade_answer(form, r.answer).score == 1.0, (form, r.answer)
        for wrong in (f"\\boxed{{{n + 1}}}", f"{n - 2}"):
            assert grade_answer(wrong, r.answer).score == 0.0, (wrong, r.answer)


def test_champ_expression_answers(champ):
    """`2^(n-1)` must not collapse to 2 (math-verify's plain-text parse takes the last number)."""
    ref = next(r.answer for r in champ if r.answer == "2^(n-1)")
    assert grade_answer("\\boxed{2^{n-1}}", ref).score == 1.0
    assert grade_answer("$\\frac{2^n}{2}$", ref).score == 1.0
    assert grade_answer("\\boxed{2}", ref).score == 0.0
    assert grade_answer("\\boxed{2^n}", ref).score == 0.0


def test_every_champ_reference_grades_itself(champ):
    assert all(grade_answer(demo_submission_body(r), r.answer).score == 1.0 for r in champ)


def demo_submission_body(r: MathRecord) -> str:
    return f"\\boxed{{{r.answer}}}"


RECORDS = [MathRecord("q1", "What is 1/2 + 1/4?", "\\frac{3}{4}"), MathRecord("q2", "What is 6 * 7?", "42"),
           MathRecord("q3", "Solve x + 1 = 3.", "2")]


def test_sampling_is_deterministic_given_the_rng():
    task = MathTask(TaskConfig(name="math"), records=RECORDS)
    a = [p.id for p in task.sample(np.random.default_rng(7), 6)]
    b = [p.id for p in task.sample(np.random.default_rng(7), 6)]
    assert a == b and len(set(a)) > 1
    p = task.sample(np.random.default_rng(7), 1)[0]
    assert p.num_items == 1 and p.text() in {r.question for r in RECORDS}
    assert task.parse_item(p, "A") == 1 and task.parse_item(p, "B") is None and task.take(p, "A") == [1]
    assert task.learn(p, "#general ceo: A=42") == {1: "42"}


def test_make_task_math_loads_champ():
    task = make_task(TaskConfig(name="math"))
    assert task.name == "math" and len(task.records) == 155


def test_runtime_scores_math_with_the_grader():
    task = MathTask(TaskConfig(name="math"), records=RECORDS)
    p = task.problem(0)  # 1/2 + 1/4
    right = run_one(task, p, {("ceo", 0): "1/2+1/4=3/4 <submit item=\"A\">\\boxed{0.75}</submit><done/>"})
    assert right.score == 1.0 and right.submissions[0]["status"] == "pass"
    wrong = run_one(task, p, {("ceo", 0): "<submit item=\"A\">\\boxed{\\frac{2}{3}}</submit><done/>"})
    assert wrong.score == 0.0 and wrong.counters["wrong_submits"] == 1
    # An expert solves it: the CEO hires, briefs, and the expert submits the scripted demo.
    team = run_one(task, p, {("ceo", 0): '<hire role="expert">solve A</hire><wait/>',
                             ("expert-1", 0): "working " + demo_submission(p) + "<done/>"})
    assert team.score == 1.0 and team.solved_by == {1: "expert-1"}
