"""Loaders: DAPO/GSM8K/DeepCoder files in parquet and JSON lines, the builtins, and bad
input that must fail before training with the file, the row and the field named."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from swarmrl.config import TaskConfig
from swarmrl.tasks.datasets import DatasetError, check_tests, humaneval_records, load_code, load_math, read_rows
from swarmrl.tasks.math import MathTask

DAPO_ROWS = [
    {"prompt": [{"role": "user", "content": "What is 2+2?"}], "reward_model": {"ground_truth": "4", "style": "rule"}},
    {"prompt": [{"role": "user", "content": "Half of 1?"}], "reward_model": {"ground_truth": "\\frac{1}{2}", "style": "rule"}},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_dapo_parquet_with_chat_prompt_and_dotted_answer(tmp_path):
    path = tmp_path / "dapo.parquet"
    pq.write_table(pa.Table.from_pylist(DAPO_ROWS), path)
    recs = load_math(str(path), "dapo", "prompt", "reward_model.ground_truth")
    assert [(r.question, r.answer) for r in recs] == [("What is 2+2?", "4"), ("Half of 1?", "\\frac{1}{2}")]
    task = MathTask(TaskConfig(name="math"), records=recs)
    assert task.grade(task.problem(1), 1, "\\boxed{0.5}").score == 1.0


def test_dapo_jsonl_equals_parquet(tmp_path):
    recs = load_math(write_jsonl(tmp_path / "dapo.jsonl", DAPO_ROWS), "auto", "prompt", "reward_model.ground_truth")
    assert [r.answer for r in recs] == ["4", "\\frac{1}{2}"]


def test_gsm8k_answer_after_hashes(tmp_path):
    rows = [{"question": "Tom has 3 apples and buys 1,204 more. How many?", "answer": "3 + 1204 = 1207\n#### 1,207"}]
    (rec,) = load_math(write_jsonl(tmp_path / "gsm8k.jsonl", rows), "gsm8k", "prompt", "answer")
    assert (rec.question.startswith("Tom"), rec.answer) == (True, "1207")


def test_missing_answer_names_file_row_and_field(tmp_path):
    rows = DAPO_ROWS + [{"prompt": "What is 1+1?", "reward_model": {"style": "rule"}}]
    path = write_jsonl(tmp_path / "dapo.jsonl", rows)
    with pytest.raises(DatasetError, match=r"dapo.jsonl: row 2: no field 'reward_model.ground_truth'"):
        load_math(path, "dapo", "prompt", "reward_model.ground_truth")


def test_empty_answer_and_wrong_field_name(tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", [{"problem": "1+1?", "answer": ""}])
    with pytest.raises(DatasetError, match=r"m.jsonl: row 0: no field 'prompt' \(fields here: \['answer', 'problem'\]\)"):
        load_math(path)
    with pytest.raises(DatasetError, match=r"m.jsonl: row 0: field 'answer' is empty"):
        load_math(path, prompt_field="problem")


def test_not_parquet_or_jsonl(tmp_path):
    fake = tmp_path / "data.parquet"
    fake.write_text("this is not parquet")
    with pytest.raises(DatasetError, match=r"data.parquet: not a readable parquet file"):
        read_rows(fake)
    csv = tmp_path / "data.csv"
    csv.write_text("a,b\n")
    with pytest.raises(DatasetError, match=r"data.csv: unsupported file type '.csv'"):
        read_rows(csv)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x", "answer": "1"}\n{not json\n')
    with pytest.raises(DatasetError, match=r"bad.jsonl: row 1: not JSON lines"):
        read_rows(bad)
    with pytest.raises(DatasetError, match="file not found"):
        read_rows(tmp_path / "nope.jsonl")


def test_deepcoder_jsonl_kinds(tmp_path):
    rows = [
        {"prompt": "Sum two ints.", "tests": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}])},
        {"prompt": "Add.", "tests": [{"input": "1\n2", "output": "3", "testtype": "functional", "metadata": {"func_name": "add"}}]},
        {"prompt": "Square.", "tests": ["assert sq(3) == 9", "assert sq(-2) == 4"], "solution": "def sq(x):\n    return x * x\n"},
    ]
    a, b, c = load_code(write_jsonl(tmp_path / "dc.jsonl", rows))
    assert a.entry_point is None and a.tests == ({"kind": "stdio", "stdin": "1 2\n", "stdout": "3\n"},)
    assert b.entry_point == "add" and b.tests == ({"kind": "call", "args": [1, 2], "expected": 3},)
    assert c.entry_point == "sq" and len(c.tests) == 2 and c.reference.startswith("def sq")


def test_deepcoder_missing_tests_names_row_and_field(tmp_path):
    rows = [{"prompt": "ok", "tests": ["assert f(1) == 1"]}, {"prompt": "no tests", "tests": []}]
    with pytest.raises(DatasetError, match=r"dc.jsonl: row 1: field 'tests' is empty"):
        load_code(write_jsonl(tmp_path / "dc.jsonl", rows))
    with pytest.raises(DatasetError, match=r"dc.jsonl: row 0: no field 'cases'"):
        load_code(str(tmp_path / "dc.jsonl"), tests_field="cases")
    rows = [{"prompt": "bad", "tests": [{"input": "x"}]}]
    with pytest.raises(DatasetError, match=r"row 0: field 'tests': test 0"):
        load_code(write_jsonl(tmp_path / "dc2.jsonl", rows))


def test_check_tests_counts_statements_that_call_candidate():
    src = "METADATA = {}\n\ndef check(candidate):\n    import math\n    assert candidate(1) == 2\n    assert True\n    for i in range(3):\n        assert candidate(i) > i\n"
    tests = check_tests(src)
    assert [t["counted"] for t in tests] == [False, False, True, False, True]
    assert tests[2]["code"] == "assert candidate(1) == 2"


def test_humaneval_builtin():
    recs = humaneval_records()
    assert len(recs) == 164 and recs[0].id == "HumanEval-0" and recs[0].entry_point == "has_close_elements"
    assert all(any(t["counted"] for t in r.tests) and r.reference.startswith(r.prompt) for r in recs)


def test_bad_bytes_and_unreadable_paths_name_the_file_and_row(tmp_path):
    bad = tmp_path / "latin.jsonl"
    bad.write_bytes(b'{"prompt": "x", "answer": "1"}\n{"prompt": "caf\xe9", "answer": "2"}\n')
    with pytest.raises(DatasetError, match=r"latin.jsonl: row 1: not UTF-8 text"):
        read_rows(bad)
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    with pytest.raises(DatasetError, match=r"folder.jsonl: cannot read"):
        read_rows(folder)


def test_deepcoder_inputs_and_outputs_must_pair_up(tmp_path):
    rows = [{"prompt": "p", "tests": {"inputs": 3, "outputs": 4}}]
    with pytest.raises(DatasetError, match=r"dc.jsonl: row 0: field 'tests': 'inputs' and 'outputs' must be lists"):
        load_code(write_jsonl(tmp_path / "dc.jsonl", rows))
    rows = [{"prompt": "p", "tests": {"inputs": ["1"], "outputs": ["1", "2"]}}]
    with pytest.raises(DatasetError, match=r"of the same length"):
        load_code(write_jsonl(tmp_path / "dc.jsonl", rows))


def test_dataset_errors_are_value_errors():
    assert issubclass(DatasetError, ValueError)  # the CLI reports ValueErrors as `error: ...`, exit 2
