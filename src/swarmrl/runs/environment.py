"""What a run ran on: library versions, the source commit, the CPU and accelerators.

Runs are bit-exact only on one machine and library build (README "Guarantees"): a run on
another CPU is another draw of the same recipe. `environment.jsonl` in a run directory says which
machine and build each start or resume of the run used, so two runs can be told apart before
their numbers are compared.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

LIBRARIES = ("swarmrl", "torch", "transformers", "peft", "safetensors", "tokenizers", "ray", "vllm")


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def source_commit() -> dict[str, Any] | None:
    """The git commit of swarmrl's source tree, and whether it had uncommitted changes; None when
    the package is not a checkout (installed from a wheel) or git is missing."""
    root = Path(__file__).resolve().parents[3]  # src/swarmrl/runs/ -> the repository root
    if not ((root / ".git").exists() and (root / "pyproject.toml").is_file()):
        return None
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head, "uncommitted_changes": bool(dirty)}


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo where there is one)."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        return model


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def environment(threads: int | None = None, processes: int = 1) -> dict[str, Any]:
    """One JSON-able record of this process's machine and build."""
    import torch  # here, so that readers of the records (reports, compare_runs) need no torch
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return {
        "versions": {"python": platform.python_version(), **{n: _version(n) for n in LIBRARIES}},
        "torch_build": {"cuda": torch.version.cuda, "cpu_capability": torch.backends.cpu.get_cpu_capability()},
        "source": source_commit(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "usable_cores": usable_cores(),
        "torch_threads": threads if threads is not None else torch.get_num_threads(),
        "processes": processes,
        "gpus": gpus,
        "executable": sys.executable,
    }


MACHINE_KEYS = ("versions", "torch_build", "cpu", "gpus")  # the machine and library build
FLOAT_KEYS = MACHINE_KEYS + ("torch_threads", "processes")  # everything in a record that changes a run's floats


def differences(a: dict, b: dict, keys: tuple[str, ...] = FLOAT_KEYS) -> list[str]:
    """The `keys` in which two records differ (empty, for FLOAT_KEYS: the same config and seed
    are expected to give the same run bit for bit)."""
    return [k for k in keys if a.get(k) != b.get(k)]


def trained_elsewhere(record: dict | None) -> str:
    """A remark on a cached result whose `environment` record names another machine or library
    build than this process's (a cache shared between machines, a library upgraded since): the
    cache key holds the inputs, not the machine, and the same inputs may round otherwise there."""
    other = differences(record, environment(), MACHINE_KEYS) if record else []
    return (f" (trained where {' and '.join(other)} differ from this machine's: trained here, the same "
            "recipe may round to other weights)") if other else ""
