"""One execution: statuses, partial credit, the three test kinds, output caps, and
infra errors that are never silent zeros."""

from __future__ import annotations

import json

import pytest

from swarmrl.sandbox import Limits, run_job
from swarmrl.sandbox import runner
from swarmrl.sandbox.runner import verdict

ADD = "def add(a, b):\n    return a + b if a != 3 else 0\n"


def test_partial_credit_per_test(pool):
    job = {"solution": ADD, "entry_point": "add", "tests": [
        {"kind": "assert", "code": "assert candidate(1, 2) == 3"},
        {"kind": "assert", "code": "assert add(3, 4) == 7"},  # the bug
        {"kind": "assert", "code": "x = 5", "counted": False},  # setup, not a test
        {"kind": "call", "args": [2, 2], "expected": 4},
        {"kind": "call", "args": [[1], [2]], "expected": [1, 2]}]}
    got = pool.run(job)
    assert got.passed == [True, False, True, True] and got.status == "fail"
    assert got.fraction == 0.75


def test_stdio_tests_compare_stdout_in_the_harness(pool):
    job = {"solution": "a, b = map(int, input().split())\nprint(a * b)\n", "tests": [
        {"kind": "stdio", "stdin": "3 4\n", "stdout": "12\n"},
        {"kind": "stdio", "stdin": "2 5\n", "stdout": "10   \n\n"},  # trailing spaces ignored
        {"kind": "stdio", "stdin": "2 2\n", "stdout": "5"}]}
    got = pool.run(job)
    assert got.passed == [True, True, False] and got.status == "fail"


def test_syntax_error_is_the_codes_error(pool):
    got = pool.run({"solution": "def f(:\n", "entry_point": "f", "tests": [{"kind": "assert", "code": "assert f() == 1"}]})
    assert got.status == "error" and got.passed == [False] and "SyntaxError" in got.detail


def test_stderr_is_capped_and_marked():
    lim = Limits(cpu_time_s=5, wall_time_s=5.0, memory_mb=512, max_processes=16, max_file_mb=4, max_output_bytes=4096)
    got = run_job({"solution": "import sys\nsys.stderr.write('e' * 100000)\ndef f():\n    return 1\n",
                   "entry_point": "f", "tests": [{"kind": "assert", "code": "assert f() == 1"}]}, lim, "bwrap", 200_000 + 63)
    assert got.status == "pass"
    assert got.stderr_truncated and got.stderr.startswith("e" * 4096) and len(got.stderr) < 4200


def test_sandbox_that_cannot_start_is_infra_error(monkeypatch):
    monkeypatch.setattr(runner, "bwrap_argv", lambda *a, **k: ["/nonexistent/bwrap"])
    got = run_job({"solution": "", "tests": []}, Limits(), "bwrap", 200_000)
    assert got.status == "infra_error" and "did not start" in got.detail


def test_bwrap_failure_is_infra_error_with_its_message(monkeypatch):
    monkeypatch.setattr(runner, "bwrap_argv", lambda *a, **k: ["/usr/bin/bwrap", "--no-such-flag"])
    got = run_job({"solution": "", "tests": []}, Limits(), "bwrap", 200_000)
    assert got.status == "infra_error" and "no-such-flag" in got.detail


def test_broken_dataset_test_is_infra_not_the_codes_fault(pool):
    job = {"setup": "raise RuntimeError('bad prompt')", "solution": "def f():\n    return 1\n", "entry_point": "f",
           "tests": [{"kind": "assert", "code": "assert f() == 1"}]}
    got = pool.run(job)
    assert got.status == "infra_error" and "bad prompt" in got.detail


@pytest.mark.parametrize("channel, killed, status, passed", [
    ("", False, "infra_error", []),  # never started
    ('{"event": "started"}\n', True, "timeout", []),
    ('{"event": "started"}\n', False, "error", []),  # harness killed by the code
    ('{"event": "started"}\n' + json.dumps({"event": "result", "passed": [True, False], "status": "fail"}) + "\n",
     False, "fail", [True, False]),
    ("garbage\n" + json.dumps({"event": "result", "passed": [True], "status": "pass"}), False, "infra_error", []),
])
def test_verdict_rules(channel, killed, status, passed):
    got = verdict(channel, killed, 0, "bwrap: boom")
    assert (got.status, got.passed) == (status, passed)
