"""scripts/setup.sh skips pip while its stamp matches what it installed, and installs again when a
dependency list, the script, the torch pin or the packages change.

The script runs in a copy of the repository's layout whose `.venv/bin/python` is a stand-in that
logs its arguments and succeeds, so no package is installed (the real install is the README's
commands, run by CI). Where the machine lacks bubblewrap or chromium and this is not root the
script only prints a hint, as on a user's machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/calls.log"
[ -f "$(dirname "$0")/missing" ] && [ "$1" = -c ] && exit 1
exit 0
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "docs" / "requirements.txt").write_text("mkdocs\n")
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "python").write_text(FAKE_PYTHON)
    (bin_ / "python").chmod(0o755)
    return tmp_path


def _setup(tree: Path, **env: str) -> list[str]:
    """Run the script; the stand-in python's pip calls during this run."""
    log = tree / ".venv" / "bin" / "calls.log"
    log.unlink(missing_ok=True)
    r = subprocess.run(["bash", "scripts/setup.sh"], cwd=tree, env={**os.environ, **env},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    calls = log.read_text().splitlines() if log.exists() else []
    return [c for c in calls if c.startswith("-m pip install")]


def test_installs_once_then_skips_until_an_input_changes(tree: Path):
    first = _setup(tree)
    assert len(first) == 3 and "torch==2.13.0" in first[0]  # torch pinned first
    assert (tree / ".venv" / ".swarmrl-setup-stamp").exists()
    assert _setup(tree) == []  # nothing changed
    (tree / "pyproject.toml").write_text("[project]\nname = 'x'\ndependencies = ['rich']\n")
    assert len(_setup(tree)) == 3
    assert _setup(tree) == []
    assert "torch==2.12.0" in _setup(tree, SWARMRL_TORCH="2.12.0")[0]  # another pin
    assert len(_setup(tree, SWARMRL_TORCH="2.12.0", SWARMRL_SETUP_FORCE="1")) == 3


def test_installs_again_when_the_packages_are_gone(tree: Path):
    _setup(tree)
    (tree / ".venv" / "bin" / "missing").touch()  # the import check now fails
    assert len(_setup(tree)) == 3
