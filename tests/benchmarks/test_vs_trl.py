"""benchmarks/vs_trl.py without TRL's environment, with processes that cannot split a step, or
with a one-process run it cannot make: it says what to do and exits non-zero, before any model is
loaded (the benchmark itself is run by hand, never as a timed test)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "vs_trl.py"


def load_vs_trl():
    spec = importlib.util.spec_from_file_location("vs_trl", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_interpreter_says_how_to_create_it(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_vs_trl().main(["--trl-python", str(tmp_path / "no-venv" / "bin" / "python")])
    assert exit_info.value.code not in (0, None)
    err = capsys.readouterr().err
    assert "does not exist" in err
    assert "python3 -m venv .venv-trl" in err and "pip install torch==2.13.0" in err


def test_interpreter_without_trl_says_how_to_create_it(tmp_path, capsys):
    fake = tmp_path / "python"  # an interpreter whose `import trl` fails
    fake.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'trl'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(SystemExit) as exit_info:
        load_vs_trl().main(["--trl-python", str(fake)])
    assert exit_info.value.code not in (0, None)
    err = capsys.readouterr().err
    assert "import trl" in err and "No module named 'trl'" in err
    assert "pip install trl transformers" in err


@pytest.mark.parametrize("argv, side", [(["--processes", "3"], "swarmrl on 3"), (["--processes", "0"], "swarmrl on 0"),
                                        (["--trl-processes", "5"], "trl on 5")])
def test_processes_that_cannot_split_a_step_are_refused_first(tmp_path, argv, side):
    missing = str(tmp_path / "no-venv" / "bin" / "python")  # refused before the environment is even probed
    with pytest.raises(SystemExit) as exit_info:
        load_vs_trl().main(["--trl-python", missing, *argv])
    assert side in str(exit_info.value.code) and "32 completions" in str(exit_info.value.code)


def test_side_processes_default_to_both_sides():
    vs_trl = load_vs_trl()
    ap = type("Args", (), {"processes": 2, "trl_processes": 0})
    assert (vs_trl.side_processes(ap, "swarmrl"), vs_trl.side_processes(ap, "trl")) == (2, 2)
    ap.trl_processes = 1
    assert (vs_trl.side_processes(ap, "swarmrl"), vs_trl.side_processes(ap, "trl")) == (2, 1)


@pytest.mark.parametrize("argv, says", [(["--one-process", "--processes", "2", "--trl-processes", "1"],
                                         "no --trl-processes"),
                                        (["--one-process", "--trl-processes", "2"], "no --trl-processes"),
                                        (["--one-process", "--warmup", "0"], "--warmup 1 or more")])
def test_one_process_mode_refuses_what_it_cannot_run(tmp_path, argv, says):
    missing = str(tmp_path / "no-venv" / "bin" / "python")
    with pytest.raises(SystemExit) as exit_info:
        load_vs_trl().main(["--trl-python", missing, *argv])
    assert says in str(exit_info.value.code)


def test_a_result_records_which_warm_start_it_measured(tmp_path):
    import json
    vs_trl = load_vs_trl()
    assert vs_trl.warm_start_record(tmp_path) == {}  # not a warm start: nothing to say
    (tmp_path / "warmstart.json").write_text(json.dumps({"key": "abc", "rollouts": 480, "sequences": 2176,
                                                          "generated_tokens": 149589, "final_loss": 0.023,
                                                          "seconds": 141.0}))
    assert vs_trl.warm_start_record(tmp_path) == {"key": "abc", "rollouts": 480, "sequences": 2176,
                                                  "generated_tokens": 149589, "final_loss": 0.023}
