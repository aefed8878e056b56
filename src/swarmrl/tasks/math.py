"""`math`: one question, one answer (item "A"), graded by math-verify.

math-verify parses both sides (LaTeX, `\\boxed{}`, plain expressions, fractions, decimals)
into sympy and compares them, so `\\frac{1}{2}`, `1/2`, `0.5` and `\\boxed{\\dfrac12}` are
all right for a reference of 1/2. A string compare would mark a correct model wrong and
teach it formatting, not math.

Grading parses model text with sympy, which can hang on adversarial input
(`10^10^10^10`): math-verify's timeouts use SIGALRM, which works only in the main thread,
so we use them there, and elsewhere cap the answer's length instead (the runtime grades
in the main thread).
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass

import numpy as np

from swarmrl.tasks.base import Grade
from swarmrl.tasks.datasets import MathRecord, load_math
from swarmrl.tasks.variants import MATH_HINTS, hinted

MAX_ANSWER_CHARS = 2000


@dataclass(frozen=True)
class MathProblem:
    id: str
    question: str
    answer: str

    @property
    def num_items(self) -> int:
        return 1

    def text(self) -> str:
        return self.question


def _timeouts() -> dict:
    main = threading.current_thread() is threading.main_thread()
    return {"parsing_timeout": 5 if main else None}


def _gold(reference: str):
    from math_verify import parse

    # Boxed first: as plain text math-verify takes the last number it finds, so `2^(n-1)`
    # would become 2 (measured on CHAMP); boxed, the whole expression is the answer.
    for form in (f"\\boxed{{{reference}}}", f"${reference}$", reference):
        parsed = parse(form, **_timeouts())
        if parsed:
            return parsed
    return []


def grade_answer(answer: str, reference: str) -> Grade:
    """Is `answer` (free text; the last \\boxed{} or expression counts) equal to `reference`?"""
    from math_verify import parse, verify

    gold = _gold(reference)
    if not gold:
        return Grade(0.0, "infra_error", f"reference answer {reference[:80]!r} does not parse")
    text = answer.strip()[-MAX_ANSWER_CHARS:]
    try:
        pred = parse(text, **_timeouts())
        main = threading.current_thread() is threading.main_thread()
        ok = bool(pred) and verify(gold, pred, timeout_seconds=5 if main else None)
    except Exception as e:  # sympy on model text: any failure is a wrong answer, not a crash
        return Grade(0.0, "fail", f"unparsable answer: {type(e).__name__}")
    if ok:
        return Grade(1.0, "pass", f"{pred[-1]} == {reference}")
    return Grade(0.0, "fail", f"{pred[-1] if pred else text[:40]!r} != {reference}")


class MathTask:
    name = "math"
    scripted = False  # no demonstrations: runs start from a model

    def __init__(self, cfg, records: list[MathRecord] | None = None):
        self.cfg = cfg
        self.records = records if records is not None else load_math(
            cfg.dataset, cfg.dataset_format, cfg.prompt_field, cfg.answer_field)
        if not self.records:
            raise ValueError("math task: the dataset has no problems")

    def sample(self, rng: np.random.Generator, n: int) -> list[MathProblem]:
        """n problems drawn with replacement; the same rng state gives the same problems."""
        idx = rng.integers(0, len(self.records), size=n)
        return [self.problem(int(i)) for i in idx]

    def problem(self, index: int) -> MathProblem:
        r = self.records[index]
        return MathProblem(id=_stable_id(r.id, r.question), question=r.question, answer=r.answer)

    def variant(self, problem: MathProblem, k: int) -> str:
        """Group k's view of the problem: the statement with an approach hint (tasks/variants.py)."""
        return hinted(problem.text(), MATH_HINTS, k)

    def instructions(self) -> str:
        """The task in words, for the chat protocol's system message."""
        return ("Solve the math problem. The whole problem is item A: submit the final answer alone, e.g. "
                "<submit item=\"A\">42</submit>. The first submission of an item is final.")

    def parse_item(self, problem: MathProblem, ref: str) -> int | None:
        return 1 if ref.strip() == "A" else None

    def take(self, problem: MathProblem, ref: str) -> list[int] | None:
        return [1] if self.parse_item(problem, ref) else None

    def render_item(self, problem: MathProblem, index: int, known: dict[int, str]) -> str:
        return "A: the answer" + (f" (claimed: {known[1]})" if 1 in known else "")

    def learn(self, problem: MathProblem, line: str) -> dict[int, str]:
        """A claimed result stated in a line the agent saw (`A=42`)."""
        m = _CLAIM.search(line)
        return {1: m.group(1)} if m else {}

    def scripts(self) -> None:
        """No scripted demonstrations: a math run starts from a model (model.name_or_path)."""
        return None

    def grade(self, problem: MathProblem, item: int, answer: str) -> Grade:
        if item != 1:
            return Grade(0.0, "fail", f"no item {item}")
        return grade_answer(answer, problem.answer)


def demo_submission(problem: MathProblem) -> str:
    """A scripted reference reply (warm starts): the answer, boxed, submitted as item A."""
    return f'<submit item="A">\\boxed{{{problem.answer}}}</submit>'


_CLAIM = re.compile(r"\bA=(\S+)")


def _stable_id(key: str, text: str) -> str:
    return "math-" + hashlib.sha1(f"{key}|{text}".encode()).hexdigest()[:10]
