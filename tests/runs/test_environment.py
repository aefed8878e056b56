import json
import subprocess
from pathlib import Path

import torch

from swarmrl.runs.environment import MACHINE_KEYS, differences, environment, source_commit, trained_elsewhere

ROOT = Path(__file__).resolve().parents[2]


def test_the_record_names_this_build_and_machine():
    env = environment(threads=3, processes=2)
    assert env["versions"]["torch"] == torch.__version__
    assert env["versions"]["swarmrl"]  # installed (editable or wheel)
    assert env["torch_build"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["torch_threads"] == 3 and env["processes"] == 2 and env["usable_cores"] >= 1
    assert json.loads(json.dumps(env)) == env  # JSON as it is


def test_the_source_commit_is_this_checkouts_head():
    got = source_commit()
    if not (ROOT / ".git").exists():  # an sdist or a copy without git: nothing to name
        assert got is None
        return
    try:
        git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    except OSError:  # no git on this machine: nothing to name either
        assert got is None
        return
    if git.returncode != 0:  # e.g. a checkout git refuses to read (another owner)
        assert got is None
        return
    assert got["commit"] == git.stdout.strip() and isinstance(got["uncommitted_changes"], bool)


def test_records_differ_only_in_what_changes_floats():
    a = environment(threads=1)
    assert differences(a, {**a, "utc": "later", "step": 7, "executable": "/elsewhere"}) == []
    assert differences(a, {**a, "torch_threads": 2}) == ["torch_threads"]
    other_cpu = {**a, "cpu": "another CPU", "versions": {**a["versions"], "torch": "0.0"}}
    assert differences(a, other_cpu) == ["versions", "cpu"]
    assert differences(a, {**a, "torch_threads": 2}, MACHINE_KEYS) == []  # same machine, other threads


def test_a_result_trained_elsewhere_says_where_the_machines_differ():
    here = environment(threads=1, processes=2)
    assert trained_elsewhere(None) == trained_elsewhere({}) == ""  # no record: nothing to compare
    assert trained_elsewhere({**here, "torch_threads": 7, "processes": 1}) == ""  # this machine, other threads
    other = {**here, "cpu": "another CPU", "versions": {**here["versions"], "torch": "0.0"}}
    assert trained_elsewhere(other).startswith(" (trained where versions and cpu differ from this machine's")
