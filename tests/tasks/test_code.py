"""code: HumanEval through the sandbox (canonical solutions score 1, bare prompts 0),
scoring knobs checked by hand, DeepCoder-style records, and a scored org-runtime run."""

from __future__ import annotations

import time

import numpy as np
import pytest

from swarmrl.config import SandboxConfig, TaskConfig
from swarmrl.sandbox import ExecResult, Limits, SandboxPool, SandboxUnavailable
from swarmrl.sandbox import bwrap as bw
from swarmrl.tasks import make_task
from swarmrl.tasks.code import CodeTask, demo_submission, score, solution_source
from swarmrl.tasks.datasets import CodeRecord, deepcoder_tests, humaneval_records

from task_helpers import run_one


@pytest.fixture(scope="module")
def pool():
    p = SandboxPool(Limits(cpu_time_s=10, wall_time_s=10.0, memory_mb=1024), "bwrap", 2)
    try:
        p.check()
    except SandboxUnavailable as e:
        p.close()
        pytest.skip(f"bubblewrap sandbox cannot run on this machine: {e}")
    yield p
    p.close()


@pytest.fixture(scope="module")
def humaneval():
    return humaneval_records()


def _task(pool, records, scoring="all_or_nothing"):
    return CodeTask(TaskConfig(name="code", code_scoring=scoring), pool, records=records)


def test_humaneval_canonical_solutions_pass_and_bare_prompts_fail(pool, humaneval):
    """All 164 problems, both ways, through the pool (about 50 s on 2 cores)."""
    task = _task(pool, humaneval)
    problems = [task.problem(i) for i in range(len(humaneval))]
    t0 = time.monotonic()
    good = task.grade_batch([(p, p.record.reference) for p in problems])
    bare = task.grade_batch([(p, p.record.prompt) for p in problems])
    print(f"HumanEval x2 through the sandbox: {time.monotonic() - t0:.1f} s")
    assert len(problems) == 164
    assert [p.record.id for p, g in zip(problems, good) if g.score != 1.0 or g.status != "pass"] == []
    assert [p.record.id for p, g in zip(problems, bare) if g.score != 0.0] == []
    assert all(g.status == "fail" for g in bare)


def test_completion_style_and_fenced_submissions(pool, humaneval):
    rec = humaneval[0]
    task = _task(pool, [rec])
    p = task.problem(0)
    body = rec.reference[len(rec.prompt):]  # the canonical body alone completes the prompt
    assert solution_source(rec, body) == rec.prompt + body
    assert task.grade(p, 1, body).score == 1.0
    assert task.grade(p, 1, "Here it is:\n```python\n" + rec.reference + "```\n").score == 1.0
    assert task.grade(p, 2, rec.reference).score == 0.0  # no item B


def test_fraction_versus_all_or_nothing_by_hand():
    r = ExecResult("fail", passed=[True, False, True, True])
    assert score(r, "fraction") == 0.75 and score(r, "all_or_nothing") == 0.0
    assert score(ExecResult("pass", passed=[True] * 3), "all_or_nothing") == 1.0
    assert score(ExecResult("timeout", passed=[True, False]), "fraction") == 0.5
    assert score(ExecResult("infra_error", passed=[True]), "fraction") == 0.0


def test_deepcoder_stdio_and_call_records(pool):
    stdio_tests, _ = deepcoder_tests('[{"input": "2 3\\n", "output": "5\\n"}, {"input": "10 -4\\n", "output": "6\\n"}]', None, "t")
    call_tests, entry = deepcoder_tests({"inputs": [[1, 2], [5, 5]], "outputs": [3, 10], "fn_name": "add"}, None, "t")
    recs = [CodeRecord("s", "Add two numbers from stdin.", "", None, tuple(stdio_tests)),
            CodeRecord("c", "def add(a, b):", "", entry, tuple(call_tests))]
    task = _task(pool, recs, scoring="fraction")
    s, c = task.problem(0), task.problem(1)
    assert task.grade(s, 1, "a, b = map(int, input().split())\nprint(a + b)").score == 1.0
    assert task.grade(s, 1, "a, b = map(int, input().split())\nprint(abs(a) + abs(b))").score == 0.5
    g = task.grade(c, 1, "def add(a, b):\n    return a + b if a < 5 else 0")
    assert (g.score, g.status) == (0.5, "fail") and g.detail.startswith("1/2 tests passed")


def test_sampling_is_deterministic(pool, humaneval):
    task = _task(pool, humaneval)
    a = [p.id for p in task.sample(np.random.default_rng(3), 5)]
    assert a == [p.id for p in task.sample(np.random.default_rng(3), 5)]
    assert demo_submission(task.problem(0)).startswith('<submit item="A">from typing import List')


def test_make_task_code_checks_the_sandbox():
    task = make_task(TaskConfig(name="code"), SandboxConfig(workers=1, wall_time_s=5.0))
    try:
        assert task.name == "code" and len(task.records) == 164
    finally:
        task.pool.close()


def test_make_task_code_refuses_without_bwrap(monkeypatch):
    monkeypatch.setattr(bw.os, "access", lambda path, mode: "bwrap" not in path)
    with pytest.raises(SandboxUnavailable, match="bwrap.*not found.*bubblewrap"):
        make_task(TaskConfig(name="code"), SandboxConfig(workers=1))


def test_runtime_scores_code_with_the_sandbox(pool):
    tests, entry = deepcoder_tests(["assert double(2) == 4", "assert double(-1) == -2", "assert double(0) == 0"], None, "t")
    task = _task(pool, [CodeRecord("d", "def double(x): return 2x", "", entry, tuple(tests))], scoring="fraction")
    p = task.problem(0)
    partial = run_one(task, p, {("ceo", 0): '<submit item="A">def double(x):\n    return abs(x) * 2\n</submit><done/>'})
    assert partial.score == pytest.approx(2 / 3) and partial.submissions[0]["status"] == "fail"
    full = run_one(task, p, {("ceo", 0): '<submit item="A">def double(x):\n    return x * 2\n</submit><done/>'})
    assert full.score == 1.0 and full.submissions[0]["status"] == "pass"
    bomb = run_one(task, p, {("ceo", 0): '<submit item="A">import os\nos._exit(0)</submit><done/>'})
    assert bomb.score == 0.0 and bomb.counters["infra_errors"] == 0 and bomb.submissions[0]["status"] == "error"
