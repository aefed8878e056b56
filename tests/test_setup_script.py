"""scripts/setup.sh skips pip while its stamp matches what it installed, and installs again when a
dependency list, the script, the torch pin or the packages change.

The script runs in a copy of the repository's layout whose `.venv/bin/python` is a stand-in: it
logs its arguments, hands the script's installed-packages check (`-c`) to this interpreter, and
succeeds at everything else, so no package is installed (the real install is the README's
commands, run by CI). `PYTHONPATH` points that check at the copy's `src/`, as an editable install
of the copy would. Where the machine lacks bubblewrap or chromium and this is not root the script
only prints a hint, as on a user's machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/calls.log"
[ "$1" = -c ] && exec {python} "$@"
exit 0
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "docs" / "requirements.txt").write_text("mkdocs\n")
    (tmp_path / "src" / "swarmrl").mkdir(parents=True)
    (tmp_path / "src" / "swarmrl" / "__init__.py").write_text("")
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "python").write_text(FAKE_PYTHON.format(python=sys.executable))
    (bin_ / "python").chmod(0o755)
    return tmp_path


def _setup(tree: Path, moved: bool = False, **env: str) -> list[str]:
    """Run the script; the stand-in python's pip calls during this run. `moved`: swarmrl is
    found somewhere else than the copy's src/ (a checkout moved after its install)."""
    log = tree / ".venv" / "bin" / "calls.log"
    log.unlink(missing_ok=True)
    path = str(ROOT / "src") if moved else str(tree / "src")
    r = subprocess.run(["bash", "scripts/setup.sh"], cwd=tree, env={**os.environ, "PYTHONPATH": path, **env},
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


def test_installs_again_when_swarmrl_comes_from_another_checkout(tree: Path):
    _setup(tree)
    assert _setup(tree) == []
    assert len(_setup(tree, moved=True)) == 3


def test_installs_again_when_torch_is_gone(tree: Path):
    _setup(tree)
    shadow = tree / "shadow"  # a `torch` that fails to be found: importlib.metadata then raises
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(
        "import importlib.metadata as m\n_v = m.version\n"
        "m.version = lambda n: (_ for _ in ()).throw(m.PackageNotFoundError(n)) if n == 'torch' else _v(n)\n")
    assert len(_setup(tree, PYTHONPATH=f"{shadow}:{tree / 'src'}")) == 3
