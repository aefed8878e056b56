"""`code`: the agent submits a Python solution (item "A"); it runs against the problem's
tests in the sandbox (sandbox/), and the score is the fraction of tests passed (or 1 only
if all pass: `task.code_scoring`).

The grade's status is the sandbox's: `timeout`, `memory` and `error` are the code's fault
and score what passed before them; `infra_error` (the sandbox broke) is not a zero: the
runtime counts it and the trainer drops the rollout (sandbox/infra.py).

A submission may be a whole solution (`def f(...): ...`, with helpers and imports) or, for
a problem with a function prompt (HumanEval), only the body that completes the prompt;
a markdown code fence around it is removed.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

from swarmrl.sandbox.limits import ExecResult
from swarmrl.tasks.base import Grade
from swarmrl.tasks.datasets import CodeRecord, load_code
from swarmrl.tasks.variants import CODE_HINTS, hinted


@dataclass(frozen=True)
class CodeProblem:
    id: str
    record: CodeRecord

    @property
    def num_items(self) -> int:
        return 1

    def text(self) -> str:
        return self.record.prompt


_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def solution_source(record: CodeRecord, answer: str) -> str:
    """The program to run for a submission: fences removed; a bare body completes the prompt."""
    m = _FENCE.search(answer)
    code = m.group(1) if m else answer
    if record.entry_point and record.setup and not re.search(
            rf"^\s*(async\s+)?def\s+{re.escape(record.entry_point)}\s*\(", code, re.M):
        return record.setup + code  # a completion of the prompt (HumanEval's convention)
    return code


def job_for(record: CodeRecord, answer: str) -> dict:
    return {"setup": record.setup, "solution": solution_source(record, answer),
            "entry_point": record.entry_point, "tests": list(record.tests)}


def score(result: ExecResult, scoring: str) -> float:
    """fraction: passed / total; all_or_nothing: 1 if every test passed. 0 for infra errors."""
    if result.status == "infra_error" or not result.passed:
        return 0.0
    if scoring == "all_or_nothing":
        return 1.0 if all(result.passed) else 0.0
    return sum(result.passed) / len(result.passed)


def to_grade(result: ExecResult, scoring: str) -> Grade:
    n, k = len(result.passed), sum(result.passed)
    detail = f"{k}/{n} tests passed" + (f"; {result.detail}" if result.detail else "")
    return Grade(score(result, scoring), result.status, detail[:500])


class CodeTask:
    name = "code"
    scripted = False  # no demonstrations: runs start from a model

    def __init__(self, cfg, pool, records: list[CodeRecord] | None = None):
        """`pool`: a sandbox.SandboxPool (`from_config` builds and checks it from `sandbox:`)."""
        self.cfg, self.pool = cfg, pool
        self.records = records if records is not None else load_code(cfg.dataset, cfg.prompt_field, cfg.tests_field)
        if not self.records:
            raise ValueError("code task: the dataset has no problems")

    @classmethod
    def from_config(cls, cfg) -> "CodeTask":
        """With a sandbox pool built from `cfg.sandbox` and checked: a run without a working
        sandbox stops here, before anything trains."""
        from swarmrl.sandbox import make_pool
        return cls(cfg.task, make_pool(cfg.sandbox))

    def scripts(self) -> None:
        """No scripted demonstrations: a code run starts from a model (model.name_or_path)."""
        return None

    def sample(self, rng: np.random.Generator, n: int) -> list[CodeProblem]:
        idx = rng.integers(0, len(self.records), size=n)
        return [self.problem(int(i)) for i in idx]

    def problem(self, index: int) -> CodeProblem:
        r = self.records[index]
        return CodeProblem(id="code-" + hashlib.sha1(f"{r.id}|{r.prompt}".encode()).hexdigest()[:10], record=r)

    def variant(self, problem: CodeProblem, k: int) -> str:
        """Group k's view of the problem: the statement with an approach hint (tasks/variants.py)."""
        return hinted(problem.text(), CODE_HINTS, k)

    def instructions(self) -> str:
        """The task in words, for the chat protocol's system message."""
        return ("Write a Python solution to the programming problem. The whole problem is item A: submit the "
                "complete program in a fenced code block, e.g. <submit item=\"A\">```python\n...\n```</submit>. "
                "It is run against hidden tests; the first submission is final.")

    def parse_item(self, problem: CodeProblem, ref: str) -> int | None:
        return 1 if ref.strip() == "A" else None

    def take(self, problem: CodeProblem, ref: str) -> list[int] | None:
        return [1] if self.parse_item(problem, ref) else None

    def render_item(self, problem: CodeProblem, index: int, known: dict[int, str]) -> str:
        return "A: the solution"

    def learn(self, problem: CodeProblem, line: str) -> dict[int, str]:
        return {}  # code is not a one-token result worth tracking

    def grade(self, problem: CodeProblem, item: int, answer: str) -> Grade:
        if item != 1:
            return Grade(0.0, "fail", f"no item {item}")
        return to_grade(self.pool.run(job_for(problem.record, answer)), self.cfg.code_scoring)

    def grade_batch(self, pairs: list[tuple[CodeProblem, str]]) -> list[Grade]:
        """Many submissions through the pool at once (item A each), results in order."""
        results = self.pool.map([job_for(p.record, a) for p, a in pairs])
        return [to_grade(r, self.cfg.code_scoring) for r in results]

    def close(self) -> None:
        """The task owns its pool (make_task built it): the trainer's close() ends here."""
        self.pool.close()


def demo_submission(problem: CodeProblem) -> str | None:
    """A scripted reference reply (warm starts), where the dataset has a known solution."""
    ref = problem.record.reference
    return None if ref is None else f'<submit item="A">{ref}</submit>'
