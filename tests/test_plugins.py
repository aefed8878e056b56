"""Bad plugin input fails before training starts, with a message that names the problem.

Each case is driven through `swarmrl.cli.main` (exit code 2, `error:` and the message on
stdout, no run directory, no metrics, no staged model left behind) or through the registry
that the CLI resolves it with (`check_plugins` resolves every registry name of the config).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from swarmrl.build import check_plugins
from swarmrl.cli import main
from swarmrl.config import ConfigError, load_config
from swarmrl.policy.model import build_tiny_policy, save_policy
from swarmrl.registry import PluginError, Registry
from swarmrl.rl.advantages import get_advantage
from swarmrl.scenarios import SCENARIOS, make_scenario
from swarmrl.tasks import TASKS
from swarmrl.tasks.base import TASK_METHODS
from swarmrl.workflows.graph import WorkflowError
from test_cli import error_output

REPO = Path(__file__).resolve().parents[1]
TINY = str(REPO / "configs" / "tiny_test.yaml")
SORT_FILE = REPO / "examples" / "sort_task.py"

NO_GRADE = '''
class NoGradeTask:
    """A task class without `grade`."""
    name = "no_grade"
    scripted = False

    def __init__(self, cfg):
        self.cfg = cfg

    def sample(self, rng, n):
        return []

    def parse_item(self, problem, ref):
        return None

    def take(self, problem, ref):
        return None

    def render_item(self, problem, index, known):
        return ""

    def learn(self, problem, line):
        return {}

    def scripts(self):
        return None
'''

DEAD_ROLE = '''
from swarmrl.scenarios.graph import GraphScenario
from swarmrl.workflows.graph import RoleSpec, Workflow


class DeadScenario(GraphScenario):
    """solver -> reviewer (submits), and an auditor whose output reaches no one."""

    @classmethod
    def from_config(cls, cfg):
        roles = (RoleSpec("solver", 2),
                 RoleSpec("auditor", inputs=("solver",), expects="verdict"),
                 RoleSpec("reviewer", inputs=("solver",), submits=True, expects="choice"))
        return cls(Workflow("dead_end", roles))
'''


@pytest.fixture(scope="module")
def init_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("init") / "tiny"
    save_policy(build_tiny_policy(load_config(TINY, []).model), path)
    return path


@pytest.fixture
def plugin_file(tmp_path):
    def write(name: str, text: str) -> Path:
        path = tmp_path / "plugins" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path
    return write


def train_fails(tmp_path: Path, capsys, overrides: list[str], init: Path | None = None) -> str:
    """`swarmrl train` with `overrides` exits 2 having written nothing; returns what it printed."""
    out = tmp_path / "runs" / "bad"
    capsys.readouterr()
    args = ["train", TINY, "--out", str(out), *(["--init", str(init)] if init else []), *overrides]
    assert main(args) == 2
    printed = error_output(capsys)
    assert "error:" in printed and "Traceback" not in printed
    assert not out.exists() and not (out / "metrics.jsonl").exists()
    assert not (tmp_path / "runs").exists()  # the parent it would have made is removed again
    return printed


def test_unknown_task_name_lists_the_registered_ones(tmp_path, capsys, init_model):
    msg = train_fails(tmp_path, capsys, ["task.name=nosuch"], init=init_model)
    assert "unknown task 'nosuch'" in msg
    assert "registered: arith, code, math" in msg
    assert "path/to/file.py:Name" in msg


def test_unknown_task_name_fails_before_a_warm_start(tmp_path, capsys):
    """Without --init the CLI would warm-start: the name is resolved before any demonstration."""
    cache = tmp_path / "cache"
    msg = train_fails(tmp_path, capsys, ["task.name=nosuch", f"warmstart.cache_dir={cache}"])
    assert "unknown task 'nosuch'" in msg
    assert not cache.exists()


def test_a_custom_task_cannot_warm_start_and_says_use_init(tmp_path, capsys):
    cache = tmp_path / "cache"
    msg = train_fails(tmp_path, capsys, [f"task.name={SORT_FILE}:SortTask", f"warmstart.cache_dir={cache}"])
    assert "no scripted demonstrations" in msg and "--init" in msg
    assert not cache.exists()


def test_spec_whose_file_does_not_exist(tmp_path, capsys, init_model):
    missing = tmp_path / "nowhere" / "my_task.py"
    msg = train_fails(tmp_path, capsys, [f"task.name={missing}:MyTask"], init=init_model)
    assert f"no file {missing}" in msg
    with pytest.raises(PluginError, match="no file"):
        TASKS.get(f"{missing}:MyTask")


def test_spec_whose_attribute_does_not_exist(tmp_path, capsys, init_model):
    spec = f"{SORT_FILE}:SortTsk"
    msg = train_fails(tmp_path, capsys, [f"task.name={spec}"], init=init_model)
    assert "has no 'SortTsk'" in msg and "SortTask" in msg  # lists what the file defines
    with pytest.raises(PluginError, match="has no 'Nope'"):
        TASKS.get("swarmrl.tasks.arith:Nope")


def test_spec_whose_module_cannot_be_imported():
    with pytest.raises(PluginError, match="cannot import 'no_such_pkg.tasks'"):
        TASKS.get("no_such_pkg.tasks:MyTask")


def test_task_class_missing_a_protocol_method_names_it(tmp_path, capsys, plugin_file, init_model):
    spec = f"{plugin_file('no_grade.py', NO_GRADE)}:NoGradeTask"
    with pytest.raises(PluginError) as e:
        TASKS.get(spec)
    assert "lacks method(s) of the task protocol: grade" in str(e.value)
    msg = train_fails(tmp_path, capsys, [f"task.name={spec}"], init=init_model)
    assert "NoGradeTask" in msg and "protocol: grade" in msg


def test_two_registrations_under_one_name_name_both():
    class FirstTask:
        pass

    class SecondTask:
        pass

    for cls in (FirstTask, SecondTask):
        for m in TASK_METHODS:
            setattr(cls, m, lambda self, *a: None)
    reg = Registry("task", required=TASK_METHODS)
    reg.add("sorting", FirstTask)
    with pytest.raises(PluginError) as e:
        reg.add("sorting", SecondTask)
    msg = str(e.value)
    assert "two tasks registered as 'sorting'" in msg
    assert "FirstTask" in msg and "SecondTask" in msg
    assert reg.get("sorting") is FirstTask  # the first one stays
    # the decorator form, on the real registry's name
    with pytest.raises(PluginError, match="two tasks registered as 'arith'.*ArithTask.*SecondTask"):
        TASKS.register("arith")(SecondTask)
    assert TASKS.names() == ["arith", "code", "math"]


def test_scenario_with_a_dead_role_names_it(tmp_path, capsys, plugin_file, init_model):
    spec = f"{plugin_file('dead_end.py', DEAD_ROLE)}:DeadScenario"
    cfg = load_config(TINY, [f"workflow.name={spec}"])
    assert SCENARIOS.get(spec).__name__ == "DeadScenario"  # the class itself passes the protocol check
    with pytest.raises(WorkflowError, match=r"roles \['auditor'\] are unreachable"):
        make_scenario(cfg)
    with pytest.raises(WorkflowError, match="auditor"):
        check_plugins(cfg)
    msg = train_fails(tmp_path, capsys, [f"workflow.name={spec}"], init=init_model)
    assert "workflow dead_end: roles ['auditor'] are unreachable" in msg


def test_unknown_estimator_in_rl_advantage(tmp_path, capsys, init_model):
    msg = train_fails(tmp_path, capsys, ["rl.advantage=no_such_mod:baseline"], init=init_model)
    assert "cannot import 'no_such_mod'" in msg
    msg = train_fails(tmp_path, capsys, ["rl.advantage=nosuch"], init=init_model)
    assert "unknown advantage estimator 'nosuch'" in msg and "collective" in msg and "rloo" in msg
    spec = f"{REPO / 'examples' / 'mean_baseline.py'}:no_such_fn"
    with pytest.raises(PluginError, match="has no 'no_such_fn'.*mean_baseline"):
        get_advantage(spec)


def test_check_plugins_accepts_the_examples():
    ex = REPO / "examples"
    check_plugins(load_config(TINY, [f"task.name={ex / 'sort_task.py'}:SortTask",
                                     f"workflow.name={ex / 'pipeline_workflow.py'}:PipelineScenario",
                                     f"rl.advantage={ex / 'mean_baseline.py'}:mean_baseline"]))


def test_plugin_errors_are_config_errors():
    assert issubclass(PluginError, ConfigError)
