"""Reading a config: YAML + `key=value` overrides -> a typed, validated `Config`.

The sections and their docstrings are in config_schema.py; this module parses, coerces
types, and writes the error messages that name the key and suggest the
closest one; config_checks.py checks the values. It imports no task, workflow or RL code: names that select an extension are
resolved by their registries before training.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.resources
import math
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

from swarmrl.config_checks import CONTEXT_MARGIN_TOKENS, validate  # noqa: F401 (re-exported)
from swarmrl.config_schema import Config, ConfigError


def _packaged_configs() -> Path:
    """The presets shipped inside the package (swarmrl/configs/, package data in the wheel; the
    repository's top-level configs/ is a symlink to it)."""
    return Path(str(importlib.resources.files("swarmrl") / "configs"))


REPO_CONFIGS = _packaged_configs()  # kept under its old name: the packaged presets directory
DEMO_CONFIG = "rlcr_arith.yaml"


def suggest(key: str, options: list[str]) -> str:
    """` (did you mean 'x'?)` for the closest of `options`, or "" when none is close."""
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.5)
    return f" (did you mean '{close[0]}'?)" if close else ""


def packaged_config_names() -> list[str]:
    """The presets `resolve_config` finds by name: paths under swarmrl/configs/ without `.yaml`
    (`rlcr_arith`, `experiments/latency_shaping`, ...)."""
    return sorted(p.relative_to(REPO_CONFIGS).with_suffix("").as_posix() for p in REPO_CONFIGS.rglob("*.yaml"))


def resolve_config(name: str | None) -> Path | None:
    """A path that exists, else a preset shipped with the package: `rlcr_arith`, `rlcr_arith.yaml`,
    `experiments/latency_shaping` (a leading `configs/` is accepted too, as the repository's
    README spells them). Neither: a ConfigError listing the presets."""
    if name is None:
        return None
    p = Path(name)
    if p.exists():
        return p
    rel = p.as_posix()
    if rel.startswith("configs/"):
        rel = rel[len("configs/"):]
    if not p.is_absolute() and ".." not in Path(rel).parts:
        for cand in (REPO_CONFIGS / rel, REPO_CONFIGS / f"{rel}.yaml"):
            if cand.is_file():
                return cand
    raise ConfigError(f"config not found: {name} (not a file here, nor a packaged preset; presets: "
                      f"{', '.join(packaged_config_names())})")


def _coerce(path: str, value: Any, typ: Any) -> Any:
    """Check one leaf value against its annotated type; ints are accepted for floats and strings."""
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
        if not math.isfinite(value):  # YAML's .nan / .inf pass every `>` check or fail it silently
            raise ConfigError(f"{path}: expected a finite number, got {value!r}")
        return float(value)
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        return value
    if typ is str:
        # YAML reads `rl.smaller_caps=0` (a one-item list) as an integer: an integer is its digits
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
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
            raise ConfigError(f"unknown config key '{path}'{suggest(key, names)}")
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
            raise ConfigError(f"unknown config key '{key}'{suggest(key, keys)}")
        node = data
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                section = ".".join(parts[:i + 1])
                raise ConfigError(f"{section}: expected a mapping, got {node!r} (cannot set '{key}')")
        node[parts[-1]] = _parse_value(key, raw)
    return data


def _parse_value(key: str, raw: str) -> Any:
    if raw == "":
        return ""
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        raise ConfigError(f"{key}: cannot parse the value {raw!r}") from None


# Keys saved by earlier versions that no longer mean anything, with the only value they could
# have had: dropped when read, so existing run directories still resume and evaluate.
RETIRED_KEYS = {("clock", "mode"): "simulated"}


def config_from_dict(data: dict) -> Config:
    data = dict(data or {})
    for (section, key), value in RETIRED_KEYS.items():
        sec = data.get(section)
        if isinstance(sec, dict) and sec.get(key) == value:
            data[section] = {k: v for k, v in sec.items() if k != key}
    return validate(_build(Config, data, ""))


# Keys whose value may be a plugin spec (registry.py): `path/to/file.py:Name` or `pkg.mod:Name`.
PLUGIN_KEYS = (("task", "name"), ("workflow", "name"), ("rl", "advantage"), ("rl", "loss"), ("rl", "aggregation"))


def absolute_plugin_paths(data: dict, base: Path) -> dict:
    """A file spec `examples/x.py:Name` made absolute against `base` (the working directory the
    user typed it in), so the run's saved config finds the plugin from any directory."""
    for section, key in PLUGIN_KEYS:
        value = (data.get(section) or {}).get(key) if isinstance(data.get(section), dict) else None
        if isinstance(value, str) and ":" in value:
            file, sep, name = value.rpartition(":")
            if file.endswith(".py") and not Path(file).expanduser().is_absolute():
                data[section] = {**data[section], key: f"{(base / Path(file).expanduser()).resolve()}{sep}{name}"}
    return data


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """YAML file (or None for defaults) + `key=value` overrides -> validated Config. File plugin
    specs are resolved against the working directory (`absolute_plugin_paths`)."""
    data = read_yaml(path) if path is not None else {}
    return config_from_dict(absolute_plugin_paths(apply_overrides(data, list(overrides or [])), Path.cwd()))


def read_yaml(path: str | Path) -> dict:
    """A YAML file whose top level is a mapping (empty file: {}); any other content is a
    ConfigError naming the file (and the line, for a syntax error)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}" if not p.exists() else f"{p}: not a file")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not a UTF-8 text file (byte {e.start}: {e.reason})") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        raise ConfigError(f"{p}: invalid YAML{at}: {getattr(e, 'problem', None) or e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping, got a {type(data).__name__}")
    return data
