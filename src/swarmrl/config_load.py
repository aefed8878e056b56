"""Reading a config: YAML + `key=value` overrides -> a typed, validated `Config`.

Split from config.py (which holds only the sections and their docstrings): parsing,
type coercion, value checks and the error messages that name the key and suggest the
closest one.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

from swarmrl.config import Config, ConfigError


def _suggest(key: str, options: list[str]) -> str:
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.5)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _coerce(path: str, value: Any, typ: Any) -> Any:
    """Check one leaf value against its annotated type; ints are accepted for floats."""
    origin = typing.get_origin(typ)
    if origin is Literal:
        if value not in typing.get_args(typ):
            raise ConfigError(f"{path}: {value!r} is not one of {list(typing.get_args(typ))}")
        return value
    if typ is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true/false, got {value!r}")
        return value
    if typ is float:
        if isinstance(value, str):  # YAML 1.1 reads `1e-3` (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if typ is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{path}: unsupported type {typ}")


def _build(cls: type, data: dict, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"unknown config key '{path}'{_suggest(key, names)}")
        typ = hints[key]
        if dataclasses.is_dataclass(typ):
            kwargs[key] = _build(typ, value, f"{path}.")
        else:
            kwargs[key] = _coerce(path, value, typ)
    return cls(**kwargs)


def _all_keys(cls: type, prefix: str = "") -> list[str]:
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out += _all_keys(hints[f.name], f"{prefix}{f.name}.")
        else:
            out.append(f"{prefix}{f.name}")
    return out


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """`a.b=value` strings -> nested dict updates (values parsed as YAML scalars)."""
    keys = _all_keys(Config)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}' is not key=value")
        key, raw = item.split("=", 1)
        if key not in keys:
            raise ConfigError(f"unknown config key '{key}'{_suggest(key, keys)}")
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = yaml.safe_load(raw) if raw != "" else ""
    return data


def validate(cfg: Config) -> Config:
    """Value checks that types cannot express."""
    checks = [
        (1 <= cfg.task.items_per_problem <= 26, "task.items_per_problem must be in [1, 26] (items are labelled A-Z)"),
        (cfg.task.terms_per_item >= 2, "task.terms_per_item must be >= 2"),
        (1 <= cfg.task.max_step < cfg.task.modulus, "task.max_step must be in [1, modulus - 1]"),
        (0.0 <= cfg.task.dependency_rate <= 1.0, "task.dependency_rate must be in [0, 1]"),
        (2 <= cfg.task.modulus <= 10, "task.modulus must be in [2, 10] (single-digit answers)"),
        (0 <= cfg.workflow.max_experts <= 8, "workflow.max_experts must be in [0, 8]"),
        (cfg.workflow.generators >= 1, "workflow.generators (a multiplicity) must be >= 1"),
        (cfg.workflow.workers >= 1, "workflow.workers (a multiplicity) must be >= 1"),
        (cfg.workflow.max_hires_per_rollout >= cfg.workflow.max_experts,
         "workflow.max_hires_per_rollout must be >= workflow.max_experts (or the cap cannot be reached)"),
        (cfg.sampler.kv_cache_mb >= 0, "sampler.kv_cache_mb must be >= 0 (0 = no cap)"),
        (cfg.run.keep_checkpoints >= 0, "run.keep_checkpoints must be >= 0 (0 = keep all)"),
        (cfg.policy.lora_rank >= 1, "policy.lora_rank must be >= 1"),
        (cfg.rl.role_grad_interval >= 0, "rl.role_grad_interval must be >= 0"),
        (cfg.eval.val_interval >= 0, "eval.val_interval must be >= 0"),
        (cfg.eval.val_problems >= 1, "eval.val_problems must be >= 1"),
        (cfg.time_limit.start > 0, "time_limit.start must be > 0 seconds"),
        (cfg.time_limit.end > 0, "time_limit.end must be > 0 seconds"),
        (cfg.shaping.penalty_per_s >= 0, "shaping.penalty_per_s must be >= 0"),
        (cfg.shaping.safety_cap_s > 0, "shaping.safety_cap_s must be > 0 seconds"),
        (cfg.time_limit.ramp_steps >= 0, "time_limit.ramp_steps must be >= 0"),
        (cfg.rl.steps >= 0, "rl.steps must be >= 0"),
        (cfg.rl.problems_per_step >= 1, "rl.problems_per_step must be >= 1"),
        (cfg.rl.rollouts_per_problem >= 2, "rl.rollouts_per_problem must be >= 2 (a group needs a baseline)"),
        (cfg.rl.lr > 0, "rl.lr must be > 0"),
        (0.0 <= cfg.rl.smaller_caps_fraction <= 1.0, "rl.smaller_caps_fraction must be in [0, 1]"),
        (cfg.rl.smaller_caps_fraction == 0 or (cfg.workflow.name == "org" and cfg.workflow.max_experts >= 1),
         "rl.smaller_caps_fraction needs workflow.name=org with max_experts >= 1 (only a CEO who hires has a cap)"),
        (cfg.rl.clip_eps > 0, "rl.clip_eps must be > 0"),
        (cfg.rl.micro_batch_tokens >= 64, "rl.micro_batch_tokens must be >= 64"),
        (cfg.rl.minibatches_per_step >= 1, "rl.minibatches_per_step must be >= 1"),
        (cfg.sampler.temperature > 0, "sampler.temperature must be > 0"),
        (cfg.sampler.max_new_tokens_per_turn >= 1, "sampler.max_new_tokens_per_turn must be >= 1"),
        (cfg.clock.call_overhead_s >= 0, "clock.call_overhead_s must be >= 0"),
        (cfg.clock.decode_tokens_per_s > 0, "clock.decode_tokens_per_s must be > 0"),
        (cfg.clock.prefill_tokens_per_s > 0, "clock.prefill_tokens_per_s must be > 0"),
        (cfg.clock.message_latency_s >= 0, "clock.message_latency_s must be >= 0"),
        (cfg.model.num_heads % max(cfg.model.num_kv_heads, 1) == 0, "model.num_heads must be a multiple of model.num_kv_heads"),
        (cfg.eval.time_limit >= 0, "eval.time_limit must be >= 0 (0 = time_limit.end)"),
        (0 <= cfg.eval.team_size <= cfg.workflow.max_experts + 1, "eval.team_size must be in [0, workflow.max_experts + 1]"),
        (cfg.eval.problems >= 1, "eval.problems must be >= 1"),
    ]
    checks += _sandbox_checks(cfg)
    checks += _distributed_checks(cfg)
    for ok, msg in checks:
        if not ok:
            raise ConfigError(msg)
    # sampler.engine=vllm is checked against the hardware by the trainer (policy/vllm_engine.py);
    # rl.advantage / rl.loss are checked against their registries by the trainer (in rl/).
    return cfg


def _sandbox_checks(cfg: Config) -> list[tuple[bool, str]]:
    sb = cfg.sandbox
    return [
        (sb.cpu_time_s >= 1, "sandbox.cpu_time_s must be >= 1"),
        (sb.wall_time_s > 0.5, "sandbox.wall_time_s must be > 0.5 seconds"),
        (sb.memory_mb >= 64, "sandbox.memory_mb must be >= 64 (the Python interpreter needs it)"),
        (sb.max_processes >= 4, "sandbox.max_processes must be >= 4 (harness, worker, helpers)"),
        (sb.max_file_mb >= 1, "sandbox.max_file_mb must be >= 1"),
        (sb.max_output_bytes >= 1024, "sandbox.max_output_bytes must be >= 1024"),
        (1 <= sb.workers <= 64, "sandbox.workers must be in [1, 64]"),
        (0.0 <= sb.max_infra_error_rate <= 1.0, "sandbox.max_infra_error_rate must be in [0, 1]"),
        (cfg.task.name != "math" or cfg.task.dataset_format != "deepcoder",
         "task.dataset_format=deepcoder is a code format; math takes dapo or gsm8k"),
        (cfg.task.name != "code" or cfg.task.dataset_format in ("auto", "deepcoder"),
         "task.dataset_format for code must be auto or deepcoder"),
    ]


def _distributed_checks(cfg: Config) -> list[tuple[bool, str]]:
    d = cfg.distributed
    addr_ok = d.address in ("", "auto") or d.address.startswith("ray://") or ":" in d.address
    return [
        (d.rollout_workers >= 1, "distributed.rollout_workers must be >= 1"),
        (d.rollout_workers <= cfg.rl.problems_per_step,
         f"distributed.rollout_workers ({d.rollout_workers}) must be <= rl.problems_per_step "
         f"({cfg.rl.problems_per_step}): a worker runs whole problem groups"),
        (d.max_staleness >= 0, "distributed.max_staleness must be >= 0 (0 = on-policy)"),
        (d.worker_cpus > 0, "distributed.worker_cpus must be > 0"),
        (d.max_worker_restarts >= 0, "distributed.max_worker_restarts must be >= 0"),
        (addr_ok, f"distributed.address {d.address!r} must be empty (start a local cluster), "
                  "'auto', 'ray://host:port' or 'host:port'"),
        (d.max_staleness == 0 or d.backend == "ray", "distributed.max_staleness > 0 needs distributed.backend=ray"),
    ]


def config_from_dict(data: dict) -> Config:
    return validate(_build(Config, data or {}, ""))


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """YAML file (or None for defaults) + `key=value` overrides -> validated Config."""
    data: dict = {}
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"config file not found: {p}")
        data = yaml.safe_load(p.read_text()) or {}
    return config_from_dict(apply_overrides(data, list(overrides or [])))
