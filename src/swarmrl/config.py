"""Typed, validated configuration: the one import for sections, loading and validation.

A facade: the sections live in config_schema.py, reading and validation in config_load.py
(which imports config_schema only), so neither imports the other through this module.
"""

from __future__ import annotations

from swarmrl.config_load import (DEMO_CONFIG, REPO_CONFIGS, apply_overrides, config_from_dict, load_config,
                                 read_yaml, resolve_config, suggest, validate)
from swarmrl.config_schema import (ClockConfig, Config, ConfigError, DistributedConfig, EvalConfig, LearnerConfig, ModelConfig,
                                   PolicyConfig, RLConfig, RunConfig, SamplerConfig, SandboxConfig, ShapingConfig,
                                   TaskConfig, TimeLimitConfig, WarmStartConfig, WorkflowConfig)
from swarmrl.diagnostics.detectors import DetectorConfig


__all__ = [
    "DEMO_CONFIG", "REPO_CONFIGS", "apply_overrides", "config_from_dict", "load_config", "read_yaml",
    "resolve_config", "suggest", "validate",
    "ClockConfig", "Config", "ConfigError", "DetectorConfig", "DistributedConfig", "EvalConfig", "LearnerConfig", "ModelConfig",
    "PolicyConfig", "RLConfig", "RunConfig", "SamplerConfig", "SandboxConfig", "ShapingConfig", "TaskConfig",
    "TimeLimitConfig", "WarmStartConfig", "WorkflowConfig",
]
