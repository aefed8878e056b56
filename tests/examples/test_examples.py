"""The plugin examples of examples/ run through the real CLI, from a temporary directory.

examples/sort_task.py (a task), examples/pipeline_workflow.py (a role graph) and
examples/mean_baseline.py (an advantage estimator) are loaded by absolute `file.py:Name`
specs; each run trains 2 steps of configs/tiny_test.yaml from a tiny random model (a custom
task has no scripted demonstrations, so no warm start), is evaluated from its saved
config.yaml alone, and is resumed to step 3. Hand-computed numbers pin the estimator and
SortTask's grading.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from swarmrl.cli import main
from swarmrl.config import load_config
from swarmrl.policy.model import build_tiny_policy, save_policy
from swarmrl.policy.tokenizer import build_tokenizer, encode_text
from swarmrl.registry import load_spec
from swarmrl.rl.advantages import get_advantage
from swarmrl.scenarios import SCENARIOS
from swarmrl.tasks import TASKS

REPO = Path(__file__).resolve().parents[2]
TINY = str(REPO / "configs" / "tiny_test.yaml")
EXAMPLES = REPO / "examples"
SORT_SPEC = f"{EXAMPLES / 'sort_task.py'}:SortTask"
PIPELINE_SPEC = f"{EXAMPLES / 'pipeline_workflow.py'}:PipelineScenario"
BASELINE_SPEC = f"{EXAMPLES / 'mean_baseline.py'}:mean_baseline"
# Keep the runs short: no validation pass at step 0 (16 held-out problems), one torch thread
# (the tiny model is faster without intra-op threads on a shared 2-core machine).
FAST = ["eval.val_interval=0", "run.threads=1"]


@contextmanager
def cwd(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def samples(run: Path, step: int) -> list[dict]:
    return [json.loads(x) for x in (run / "samples" / f"step_{step:04d}.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """The temporary working directory every command runs from (nothing relative to the repo)."""
    return tmp_path_factory.mktemp("work")


@pytest.fixture(scope="module")
def init_model(work) -> Path:
    """A tiny random model of tiny_test.yaml's sizes: custom tasks cannot warm-start."""
    path = work / "tiny_init"
    save_policy(build_tiny_policy(load_config(TINY, []).model), path)
    return path


@pytest.fixture(scope="module")
def sort_run(work, init_model) -> Path:
    with cwd(work):
        assert main(["train", TINY, "--out", "sort_run", "--init", str(init_model),
                     f"task.name={SORT_SPEC}", "rl.steps=2", *FAST]) == 0
    return work / "sort_run"


@pytest.fixture(scope="module")
def pipeline_run(work, init_model) -> Path:
    """The workflow and the estimator in one run (on the built-in arith task)."""
    with cwd(work):
        assert main(["train", TINY, "--out", "pipeline_run", "--init", str(init_model),
                     f"workflow.name={PIPELINE_SPEC}", "workflow.generators=2",
                     f"rl.advantage={BASELINE_SPEC}", "rl.steps=2", *FAST]) == 0
    return work / "pipeline_run"


# ------------------------------------------------------------------ SortTask


def test_sort_task_by_hand():
    cls = TASKS.get(SORT_SPEC)
    assert cls is load_spec(SORT_SPEC)  # one module per file, however it is reached
    task = cls(load_config(TINY, []).task)
    assert task.scripted is False and task.scripts() is None
    p = load_spec(f"{EXAMPLES / 'sort_task.py'}:SortProblem")(id="sort-x", items=((3, 1, 2), (5, 5, 0)))
    assert p.text() == "A:3,1,2\nB:5,5,0"
    assert task.render_item(p, 2, {}) == "B:5,5,0"
    # grade: exact, whitespace-tolerant, one item at a time
    assert task.grade(p, 1, "1,2,3").score == 1.0 and task.grade(p, 1, "1,2,3").status == "pass"
    assert task.grade(p, 1, " 1, 2 ,3\n").score == 1.0
    assert task.grade(p, 2, "0,5,5").score == 1.0
    assert task.grade(p, 1, "3,2,1").score == 0.0 and task.grade(p, 1, "3,2,1").status == "fail"
    assert task.grade(p, 1, "1,2").score == 0.0
    assert task.grade(p, 2, "0,5").score == 0.0
    assert task.grade(p, 3, "1").score == 0.0  # no item C
    # the score of a problem is the mean of its items: one of two right -> 0.5
    assert np.mean([task.grade(p, i, a).score for i, a in ((1, "1,2,3"), (2, "5,5,0"))]) == 0.5
    # items, ranges, claims
    assert task.parse_item(p, "B") == 2 and task.parse_item(p, "C") is None and task.parse_item(p, "b") is None
    assert task.take(p, "A-B") == [1, 2] and task.take(p, "B") == [2]
    assert task.take(p, "B-A") is None and task.take(p, "A-C") is None and task.take(p, "") is None
    assert task.learn(p, "solver: B=0,5,5 A=1,2 C=9") == {2: "0,5,5", 1: "1,2"}
    assert task.learn(p, "nothing here") == {}


def test_sort_task_sampling_is_deterministic_and_representable():
    cfg = load_config(TINY, [f"task.name={SORT_SPEC}"]).task
    task = TASKS.get(SORT_SPEC)(cfg)
    a = task.sample(np.random.default_rng(7), 3)
    b = task.sample(np.random.default_rng(7), 3)
    assert a == b and [p.id for p in a] == [p.id for p in b]
    assert all(p.id.startswith("sort-") for p in a)
    assert len({p.id for p in a}) == 3
    assert all(p.num_items == cfg.items_per_problem for p in a)
    assert all(len(v) == cfg.terms_per_item and all(0 <= x < cfg.modulus for x in v) for p in a for v in p.items)
    p = a[0]
    assert all(task.grade(p, i, p.answer(i)).correct for i in range(1, p.num_items + 1))
    tok = build_tokenizer()  # the text round-trips through the tiny model's tokenizer
    text = p.text() + "\n" + task.render_item(p, 1, {})
    assert tok.decode(encode_text(tok, text)) == text
    # a file-loaded class and its problems pickle by reference (Ray workers load the same file)
    assert pickle.loads(pickle.dumps(p)) == p
    assert pickle.loads(pickle.dumps(task)).sample(np.random.default_rng(7), 3) == a


def test_sort_task_trains_through_the_cli(sort_run):
    assert [r["step"] for r in rows(sort_run)] == [0, 1]
    cfg = yaml.safe_load((sort_run / "config.yaml").read_text())
    assert cfg["task"]["name"] == SORT_SPEC
    s = samples(sort_run, 0)[0]
    assert s["problem_id"].startswith("sort-")
    assert s["problem"].splitlines()[0].startswith("A:") and "," in s["problem"]
    assert (sort_run / "checkpoints" / "step_2" / "manifest.json").is_file()


def test_sort_run_evaluates_from_its_saved_config(sort_run, tmp_path):
    out = tmp_path / "eval.json"
    with cwd(tmp_path):  # another directory: the absolute spec in config.yaml is all it needs
        assert main(["eval", str(sort_run), "--problems", "2", "--json", str(out)]) == 0
    m = json.loads(out.read_text())
    assert m["problems"] == 2 and 0.0 <= m["score_mean"] <= 1.0


def test_sort_run_resumes_to_step_3(sort_run, tmp_path, capsys):
    run = tmp_path / "sort_copy"
    shutil.copytree(sort_run, run)
    capsys.readouterr()
    with cwd(tmp_path):
        assert main(["train", "--resume", str(run), "rl.steps=3"]) == 0
    assert "resuming" in capsys.readouterr().out
    assert [r["step"] for r in rows(run)] == [0, 1, 2]
    assert (run / "checkpoints" / "step_3" / "manifest.json").is_file()
    assert yaml.safe_load((run / "config.yaml").read_text())["rl"]["steps"] == 3
    assert samples(run, 2)[0]["problem_id"].startswith("sort-")


# ------------------------------------------------------------------ mean_baseline


def test_mean_baseline_by_hand():
    fn = get_advantage(BASELINE_SPEC)
    assert fn is load_spec(BASELINE_SPEC)
    # Group 0: rollout 0 has two agents (reward 1 each), rollout 1 one agent (reward 0). The
    # group's mean is over rollouts, each counted once: (1 + 0) / 2 = 0.5 (not 2/3 per sequence),
    # so 1 - 0.5, 1 - 0.5, 0 - 0.5. Group 1: a single rollout, no spread -> exactly 0.
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.25])
    groups = torch.tensor([0, 0, 0, 1])
    rollouts = torch.tensor([0, 0, 1, 2])
    roles = torch.tensor([0, 1, 1, 0])
    assert fn(rewards, groups, rollouts, roles).tolist() == [0.5, 0.5, -0.5, 0.0]
    # no std division: scaling the rewards scales the advantage
    assert fn(4 * rewards, groups, rollouts, roles).tolist() == [2.0, 2.0, -2.0, 0.0]
    # ids need not be contiguous or sorted
    assert fn(rewards.flip(0), torch.tensor([9, 3, 3, 3]), torch.tensor([7, 5, 2, 2]), roles).tolist() == \
        [0.0, -0.5, 0.5, 0.5]


# ------------------------------------------------------------------ PipelineScenario (+ mean_baseline)


def test_pipeline_scenario_graph():
    from swarmrl.config import load_config as lc
    scenario = SCENARIOS.get(PIPELINE_SPEC).from_config(lc(TINY, ["workflow.generators=2"]))
    assert scenario.name == "pipeline"
    assert scenario.role_types() == ["solver", "checker", "reviewer"]
    assert scenario.multiplicity() == {"solver": 2, "checker": 1, "reviewer": 1}
    assert [scenario.submits(r) for r in scenario.role_types()] == [False, False, True]
    assert scenario.expects("checker") == "verdict" and "verdict" in scenario.actions("checker")
    assert scenario.max_team_size() == 4


def test_pipeline_with_mean_baseline_trains_evals_and_resumes(pipeline_run, tmp_path, capsys):
    assert [r["step"] for r in rows(pipeline_run)] == [0, 1]
    cfg = yaml.safe_load((pipeline_run / "config.yaml").read_text())
    assert cfg["workflow"]["name"] == PIPELINE_SPEC and cfg["rl"]["advantage"] == BASELINE_SPEC
    s = samples(pipeline_run, 0)[0]
    assert s["workflow"] == "pipeline"
    assert [(a["name"], a["role"]) for a in s["team"]] == [
        ("solver-1", "solver"), ("solver-2", "solver"), ("checker", "checker"), ("reviewer", "reviewer")]
    assert any(k.startswith("role/solver/") for k in rows(pipeline_run)[0])

    out = tmp_path / "eval.json"
    with cwd(tmp_path):
        assert main(["eval", str(pipeline_run), "--problems", "1", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["problems"] == 1

    run = tmp_path / "pipeline_copy"
    shutil.copytree(pipeline_run, run)
    with cwd(tmp_path):
        assert main(["train", "--resume", str(run), "rl.steps=3"]) == 0
    assert [r["step"] for r in rows(run)] == [0, 1, 2]
    assert (run / "checkpoints" / "step_3" / "manifest.json").is_file()
    assert samples(run, 2)[0]["workflow"] == "pipeline"
