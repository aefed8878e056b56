"""swarmrl: reinforcement learning from collective rewards for teams of LLM agents.

The public API (everything in `__all__`; `import swarmrl` is cheap: each name below is
imported on first access, so torch and transformers load only when a function needs them):

Running (swarmrl/api.py; the `swarmrl` command line is a thin layer over these):
    train(config, out, overrides, init)   RL-train a team policy into a run directory -> Run
    resume(run_dir, overrides)            continue a run from its newest checkpoint -> Run
    evaluate(run_or_model, ...)           score on held-out problems -> dict (what `swarmrl eval` prints)
    scale(run_or_model, team_sizes, ...)  score vs latency budget per team size -> ScaleResult
    load_run(path)                        read a run directory back -> Run
    pretrain(config)                      warm-start the tiny model on scripted demonstrations -> model dir
    random_model(config, out)             save a randomly initialised tiny model (an `init=` for train)
    Run, ScaleResult                      the results above

Configuration:
    Config, load_config                   the typed config and its loader (YAML file + key=value overrides)
    ConfigError                           raised for any bad input (config, paths, flags), with a message

Building blocks (extend swarmrl with your own; see docs/ARCHITECTURE.md):
    Task, Grade                           the task protocol and one graded submission
    Scenario, GraphScenario, OrgScenario  who takes part in a rollout and what each role may do
    Workflow, RoleSpec                    a role graph (the graph scenarios' definition)
    TASKS, SCENARIOS                      registries of tasks (`task.name`) and scenarios (`workflow.name`)
    ADVANTAGES, LOSSES, AGGREGATIONS      registries of advantage estimators (`rl.advantage`), policy
                                          losses (`rl.loss`) and loss aggregations (`rl.aggregation`)

    __version__                           the installed package's version string
"""

from __future__ import annotations

import importlib

_FALLBACK_VERSION = "0.1.0"  # pyproject.toml's version, for a source tree that is not installed


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python < 3.8
        return _FALLBACK_VERSION
    try:
        return version("swarmrl")
    except PackageNotFoundError:
        return _FALLBACK_VERSION


# name -> (module, attribute): imported on first access (PEP 562 module __getattr__).
_LAZY: dict[str, tuple[str, str]] = {
    "train": ("swarmrl.api", "train"),
    "resume": ("swarmrl.api", "resume"),
    "evaluate": ("swarmrl.api", "evaluate"),
    "scale": ("swarmrl.api", "scale"),
    "load_run": ("swarmrl.api", "load_run"),
    "pretrain": ("swarmrl.api", "pretrain"),
    "random_model": ("swarmrl.api", "random_model"),
    "Run": ("swarmrl.api", "Run"),
    "ScaleResult": ("swarmrl.api", "ScaleResult"),
    "Config": ("swarmrl.config", "Config"),
    "ConfigError": ("swarmrl.config", "ConfigError"),
    "load_config": ("swarmrl.config", "load_config"),
    "Task": ("swarmrl.tasks.base", "Task"),
    "Grade": ("swarmrl.tasks.base", "Grade"),
    "Scenario": ("swarmrl.scenarios", "Scenario"),
    "GraphScenario": ("swarmrl.scenarios", "GraphScenario"),
    "OrgScenario": ("swarmrl.scenarios", "OrgScenario"),
    "Workflow": ("swarmrl.workflows.graph", "Workflow"),
    "RoleSpec": ("swarmrl.workflows.graph", "RoleSpec"),
    "TASKS": ("swarmrl.tasks", "TASKS"),
    "SCENARIOS": ("swarmrl.scenarios", "SCENARIOS"),
    "ADVANTAGES": ("swarmrl.rl.advantages", "ADVANTAGES"),
    "LOSSES": ("swarmrl.rl.losses", "LOSSES"),
    "AGGREGATIONS": ("swarmrl.rl.aggregation", "AGGREGATIONS"),
}

# Documentation for exported classes whose own definition carries none (a dataclass's
# generated signature is not documentation). Applied on first access, only where missing.
# What the exported values (not classes or functions) are; they cannot carry a docstring.
VALUE_DOCS: dict[str, str] = {
    "__version__": "The installed package's version string (pyproject.toml's when not installed).",
    "TASKS": "Registry of tasks, selected by `task.name` (arith, math, code, or a `module:Name` plugin).",
    "SCENARIOS": "Registry of scenarios, selected by `workflow.name` (org, single, voting, eval_opt, "
                 "orch_workers, or a `module:Name` plugin).",
    "ADVANTAGES": "Registry of advantage estimators, selected by `rl.advantage` (collective, grpo, rloo, "
                  "per_role, or a plugin).",
    "LOSSES": "Registry of policy losses, selected by `rl.loss` (ppo_clip, pg, or a plugin).",
    "AGGREGATIONS": "Registry of loss aggregations over tokens, sequences and roles, selected by "
                    "`rl.aggregation` (token_mean, seq_mean, role_balanced, or a plugin).",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    """Import a public name on first access (keeps `import swarmrl` free of torch). `__version__`
    is read on first access too: importlib.metadata alone would double the import time."""
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'swarmrl' has no attribute {name!r}") from None
    obj = getattr(importlib.import_module(module), attr)
    globals()[name] = obj  # later accesses skip this function
    return obj


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
