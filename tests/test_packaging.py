"""The built wheel works without the repository: presets shipped as package data, the `swarmrl`
command installed, a tiny training run from an unrelated directory.

Builds the wheel (`pip wheel --no-deps`) from a copy of the project's build inputs
(pyproject.toml, README.md, LICENSE, src/), so that no build/ or egg-info lands in the working
tree while other tests run (a missing LICENSE becomes an empty placeholder in that copy only).
Then a venv in one of two ways. By default ("linked") it sees this interpreter's dependencies
through a directory of links that leaves swarmrl itself out, and pip installs the wheel, checking
its declared dependencies against them: about 7 s each to build, make the venv and install on the
2-core dev machine. Under `-m slow` ("fresh") it installs everything from the index as a user
would: torch==2.13.0 first (the CPU wheel found through pip's find-links, as scripts/setup.sh
does), then the wheel with its dependencies, about 100 s more. Either way 15 s to train.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TORCH = os.environ.get("SWARMRL_TORCH", "2.13.0")
PIP = ["-m", "pip", "install", "-q", "--disable-pip-version-check"]  # as scripts/setup.sh
PRESETS = ("swarmrl/configs/rlcr_arith.yaml", "swarmrl/configs/tiny_test.yaml",
           "swarmrl/configs/experiments/latency_shaping.yaml", "swarmrl/configs/sweeps/workflow_grid.yaml")
REPORT_ASSETS = tuple(f"swarmrl/report/assets/{n}" for n in ("report.html", "report.css", "metrics.js", "timeline.js"))


def _run(cmd: list[str], cwd: Path, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _clean_env(**extra: str) -> dict:
    """The environment without anything that would let the fresh venv see the repository."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("project")
    for name in ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, src / name)
    if not (src / "LICENSE").exists():
        (src / "LICENSE").write_text("")  # placeholder: pyproject's license-files names it
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--disable-pip-version-check", "-q", "-w", out],
         cwd=src, timeout=300, env=_clean_env())
    (whl,) = out.glob("swarmrl-*.whl")
    return whl


def _linked_dependencies(into: Path) -> Path:
    """This interpreter's installed packages, one link each, without swarmrl (its editable
    install's .pth and finder included), so a venv can reach them but not the repository."""
    into.mkdir()
    sites = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}  # lib64 on some systems
    for entry in (e for site in sorted(sites) for e in site.iterdir()):
        keep = not entry.name.startswith(("swarmrl", "__editable__")) and entry.suffix != ".pth"
        if keep and not (into / entry.name).exists():
            (into / entry.name).symlink_to(entry)
    return into


@pytest.fixture(scope="module", params=["linked", pytest.param("fresh", marks=pytest.mark.slow)])
def venv(request, wheel, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    v = root / "v"
    _run([sys.executable, "-m", "venv", v], cwd=root, timeout=120, env=_clean_env())
    py = v / "bin" / "python"
    if request.param == "linked":
        site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         cwd=root, timeout=60, env=_clean_env()).stdout.strip())
        (site / "dependencies.pth").write_text(f"{_linked_dependencies(root / 'deps')}\n")
    else:
        _run([py, *PIP, f"torch=={TORCH}"], cwd=root, timeout=600, env=_clean_env())
    _run([py, *PIP, wheel], cwd=root, timeout=900, env=_clean_env())
    return v


def test_wheel_ships_the_presets_and_metadata(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(meta).decode()
    assert set(PRESETS) <= names, sorted(n for n in names if "/configs/" in n)
    assert set(REPORT_ASSETS) <= names, sorted(n for n in names if "/report/" in n)  # report.html's template
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Development Status :: 3 - Alpha" in metadata
    assert not any(n.startswith(("tests/", "configs/", "benchmarks/")) for n in names)


def test_installed_wheel_trains_from_another_directory(venv, tmp_path):
    from swarmrl.config import load_config
    from swarmrl.config_load import resolve_config
    from swarmrl.policy.model import build_tiny_policy, save_policy

    model = tmp_path / "model"  # an untrained tiny model: --init skips the minutes-long warm start
    save_policy(build_tiny_policy(load_config(resolve_config("tiny_test")).model), model)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = _clean_env(SWARMRL_CACHE_DIR=str(tmp_path / "cache"))
    exe = venv / "bin" / "swarmrl"

    helps = _run([exe, "--help"], cwd=work, timeout=120, env=env).stdout
    assert "demo" in helps

    where = _run([venv / "bin" / "python", "-c",
                  "import swarmrl; from swarmrl.config_load import resolve_config; "
                  "print(resolve_config('rlcr_arith').resolve()); print(swarmrl.__file__)"],
                 cwd=work, timeout=120, env=env).stdout.split()
    preset, init_file = Path(where[0]), Path(where[1])
    assert preset.is_file() and preset.is_relative_to(init_file.parent) and preset.is_relative_to(venv)

    _run([exe, "train", "tiny_test", "--out", "run", "--init", model, "rl.steps=1", "eval.val_interval=0",
          "run.threads=1", "run.progress=false"], cwd=work, timeout=300, env=env)
    assert (work / "run" / "metrics.jsonl").read_text().strip()

    bad = subprocess.run([exe, "train", "no_such_preset", "--out", "run2"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0
    assert "config not found: no_such_preset" in bad.stdout + bad.stderr and "tiny_test" in bad.stdout + bad.stderr
